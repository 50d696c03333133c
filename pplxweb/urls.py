from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from pplxweb import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("accounts.urls")),
    path("", include("search.urls")),
]
