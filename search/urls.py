from __future__ import annotations

from django.urls import path

from search import views

app_name = "search"

urlpatterns = [
    path("", views.home, name="home"),
    path("history/", views.history, name="history"),
]
