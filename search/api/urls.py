from __future__ import annotations

from django.urls import path

from search.api import views

app_name = "api"

urlpatterns = [
    path("v1/models", views.models, name="models"),
    path("v1/chat/completions", views.chat_completions, name="chat_completions"),
    path("mcp", views.mcp, name="mcp"),
]
