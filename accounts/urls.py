from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.urls import path, register_converter

from accounts import household, views
from pplxweb.ids import converter

app_name = "accounts"
register_converter(converter(get_user_model()), "user_id")  # its range checked (pplxweb.ids)

urlpatterns = [
    path("setup/", views.setup, name="setup"),
    path("accounts/login/", views.SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", views.PasswordView.as_view(), name="password"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/perplexity/", views.perplexity, name="perplexity"),
    path("settings/defaults/", views.search_defaults, name="defaults"),
    path("settings/agents/", views.agents, name="agents"),
    path("settings/household/<user_id:member_id>/remove/", views.remove_member, name="remove_member"),
    path("settings/household/<user_id:member_id>/quota/", household.set_quota, name="quota"),
    path("settings/household/<user_id:member_id>/password/", views.member_password, name="member_password"),
    path("accounts/reset/", views.reset, name="reset"),
]
