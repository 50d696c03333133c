from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from accounts import views

app_name = "accounts"

urlpatterns = [
    path("setup/", views.setup, name="setup"),
    path("accounts/login/", views.SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", views.PasswordView.as_view(), name="password"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/perplexity/", views.perplexity, name="perplexity"),
    path("settings/defaults/", views.search_defaults, name="defaults"),
    path("settings/household/<int:member_id>/remove/", views.remove_member, name="remove_member"),
    path("settings/household/<int:member_id>/quota/", views.set_quota, name="quota"),
]
