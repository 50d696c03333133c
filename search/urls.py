from __future__ import annotations

from django.urls import path, register_converter

from pplxweb.ids import converter
from search.attachments import views as attachment_views
from search.history import views as history_views
from search.library import views as library_views
from search.live import views
from search.models import Attachment, Entry, Thread

app_name = "search"
# ids in addresses, checked against their column's range (pplxweb.ids): out of range is a 404
register_converter(converter(Thread), "thread_id")
register_converter(converter(Entry), "entry_id")
register_converter(converter(Attachment), "attachment_id")

urlpatterns = [
    path("", views.home, name="home"),
    path("search/", views.ask, name="ask"),
    path("thread/<thread_id:pk>/", views.thread, name="thread"),
    path("entry/<entry_id:pk>/stop/", views.stop, name="stop"),
    path("entry/<entry_id:pk>/redo/", views.redo, name="redo"),
    path("entry/<entry_id:pk>/show/", views.show_version, name="show_version"),
    path("entry/<entry_id:pk>/edit/", views.edit, name="edit"),
    path("entry/<entry_id:pk>/image/<int:n>/", history_views.image, name="image"),
    path("entry/<entry_id:pk>/answer.md", history_views.entry_markdown, name="entry_markdown"),
    path("entry/<entry_id:pk>/answer.html", history_views.entry_copy_html, name="entry_copy_html"),
    path("entry/<entry_id:pk>/report.md", history_views.entry_report, name="entry_report"),
    path("attachments/", attachment_views.attach, name="attach"),
    path("attachment/<attachment_id:pk>/", attachment_views.download, name="attachment"),
    path("attachment/<attachment_id:pk>/remove/", attachment_views.remove, name="remove_attachment"),
    path("history/", history_views.history_page, name="history"),
    path("history/suggest/", history_views.suggest, name="suggest"),
    path("history/delete/", history_views.delete, name="delete"),
    path("history/export.zip", history_views.export_all, name="export_all"),
    path("history/import/", history_views.import_view, name="import"),
    path("thread/<thread_id:pk>/export.<str:kind>", history_views.export_thread, name="export_thread"),
    path("opensearch.xml", views.opensearch, name="opensearch"),
    path("library/start/", library_views.start, name="library_start"),
    path("library/cancel/", library_views.cancel, name="library_cancel"),
    path("library/schedule/", library_views.schedule, name="library_schedule"),
]
