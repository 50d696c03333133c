from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required, user_passes_test
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from accounts import ratelimit, services
from accounts.forms import MemberForm, SetupForm, SignInForm
from pplxweb.net import client_ip

HOUR = timedelta(hours=1)


def _login_limits(request: HttpRequest) -> list[tuple[str, str, int]]:
    username = request.POST.get("username", "").strip().lower()[:150]
    limits = [("login-ip", client_ip(request), settings.LOGIN_RATE_PER_IP)]
    if username:
        limits.append(("login-user", username, settings.LOGIN_RATE_PER_USER))
    return limits


@method_decorator(sensitive_post_parameters("password"), name="dispatch")
@method_decorator(login_not_required, name="dispatch")
class SignInView(auth_views.LoginView):
    """Django's sign-in, with a token bucket per address and per user name.

    Every try takes a token, so guessing is slow; a successful sign-in empties the user name's
    count, so a person who signs in often is never locked out by their own successes.
    """

    template_name = "accounts/login.html"
    form_class = SignInForm
    redirect_authenticated_user = True

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method == "GET" and services.needs_setup():
            return redirect("accounts:setup")
        return super().dispatch(request, *args, **kwargs)

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        for scope, value, capacity in _login_limits(request):
            verdict = ratelimit.take(scope, value, capacity, HOUR)
            if not verdict.allowed:
                form = self.get_form()
                form.errors.clear()
                form.add_error(None, f"Too many sign-in attempts. Try again {verdict.wait_text}.")
                return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form) -> HttpResponse:
        ratelimit.reset("login-user", form.get_user().get_username().lower())
        return super().form_valid(form)


@login_not_required
@sensitive_post_parameters("password1", "password2", "setup_code")
@require_http_methods(["GET", "POST"])
def setup(request: HttpRequest) -> HttpResponse:
    """Create the owner with the setup code the server printed. Gone once anybody exists."""
    if not services.needs_setup():
        raise Http404("This server already has an owner.")
    form = SetupForm(request.POST or None)
    status = 200
    if request.method == "POST":
        verdict = ratelimit.take("setup-ip", client_ip(request), settings.LOGIN_RATE_PER_IP, HOUR)
        if not verdict.allowed:
            form.add_error(None, f"Too many attempts. Try again {verdict.wait_text}.")
            status = 429
        elif form.is_valid():
            try:
                owner = services.create_owner(
                    form.cleaned_data["username"], form.cleaned_data["password1"]
                )
            except services.SetupClosed as exc:
                raise Http404("This server already has an owner.") from exc
            login(request, owner, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, "Welcome. You own this pplxweb; link Perplexity in Settings.")
            return redirect("search:home")
    return render(request, "accounts/setup.html", {"form": form}, status=status)


def _is_owner(user) -> bool:
    return user.is_authenticated and user.is_superuser


@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    """Settings: for the owner, the household (add and remove people)."""
    member_form = MemberForm()
    if request.method == "POST" and "add_member" in request.POST:
        if not _is_owner(request.user):
            raise Http404
        member_form = MemberForm(request.POST)
        if member_form.is_valid():
            member = member_form.save()
            messages.success(request, f"{member.get_username()} can now sign in.")
            return redirect("accounts:settings")
    context = {
        "member_form": member_form,
        "members": services.household(request.user) if _is_owner(request.user) else [],
        "is_owner": _is_owner(request.user),
    }
    return render(request, "accounts/settings.html", context)


@require_POST
@user_passes_test(_is_owner)
def remove_member(request: HttpRequest, member_id: int) -> HttpResponse:
    name = services.remove_member(request.user, member_id)
    if name is None:
        raise Http404
    messages.success(request, f"{name} was removed, with their history.")
    return redirect("accounts:settings")
