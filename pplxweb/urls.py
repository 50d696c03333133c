from __future__ import annotations

from django.urls import include, path

from pplxweb import views

# No Django admin: nothing of pplxweb is registered there, and its sign-in had no limit.
urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("", include("search.api.urls")),  # the agents' API (/v1/) and MCP server (/mcp)
    path("", include("accounts.urls")),
    path("", include("search.urls")),
]
