from __future__ import annotations

from django.urls import path

from search.attachments import views as attachment_views
from search.history import views as history_views
from search.library import views as library_views
from search.live import views

app_name = "search"

urlpatterns = [
    path("", views.home, name="home"),
    path("search/", views.ask, name="ask"),
    path("thread/<int:pk>/", views.thread, name="thread"),
    path("entry/<int:pk>/stop/", views.stop, name="stop"),
    path("entry/<int:pk>/redo/", views.redo, name="redo"),
    path("entry/<int:pk>/show/", views.show_version, name="show_version"),
    path("entry/<int:pk>/edit/", views.edit, name="edit"),
    path("entry/<int:pk>/image/<int:n>/", history_views.image, name="image"),
    path("entry/<int:pk>/answer.md", history_views.entry_markdown, name="entry_markdown"),
    path("entry/<int:pk>/report.md", history_views.entry_report, name="entry_report"),
    path("attachments/", attachment_views.attach, name="attach"),
    path("attachment/<int:pk>/", attachment_views.download, name="attachment"),
    path("attachment/<int:pk>/remove/", attachment_views.remove, name="remove_attachment"),
    path("history/", history_views.history_page, name="history"),
    path("history/suggest/", history_views.suggest, name="suggest"),
    path("history/delete/", history_views.delete, name="delete"),
    path("history/export.zip", history_views.export_all, name="export_all"),
    path("history/import/", history_views.import_view, name="import"),
    path("thread/<int:pk>/export.<str:kind>", history_views.export_thread, name="export_thread"),
    path("opensearch.xml", views.opensearch, name="opensearch"),
    path("library/start/", library_views.start, name="library_start"),
    path("library/cancel/", library_views.cancel, name="library_cancel"),
    path("library/schedule/", library_views.schedule, name="library_schedule"),
]
