from __future__ import annotations

from django.urls import path

from search import views

app_name = "search"

urlpatterns = [
    path("", views.home, name="home"),
    path("search/", views.ask, name="ask"),
    path("thread/<int:pk>/", views.thread, name="thread"),
    path("entry/<int:pk>/stop/", views.stop, name="stop"),
    path("history/", views.history, name="history"),
    path("opensearch.xml", views.opensearch, name="opensearch"),
]
