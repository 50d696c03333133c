from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required, user_passes_test
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.timesince import timesince
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from accounts import household, ratelimit, services, signin
from accounts.forms import (
    RESET_MINUTES,
    AgentTokenForm,
    ApiKeyForm,
    CodeForm,
    CookieForm,
    DefaultsForm,
    EmailForm,
    MemberForm,
    RemoveMemberForm,
    ResetForm,
    SetupForm,
    SignInForm,
    TotpForm,
)
from accounts.models import LinkAttempt, PerplexityAccount, SearchDefaults
from accounts.services import agent_tokens, resets
from accounts.services.credentials import RELINK
from pplxweb import doctor, sockets
from pplxweb.net import client_ip
from search import members, storage
from search.library import display as library_display

HOUR = timedelta(hours=1)


@method_decorator(sensitive_post_parameters("password"), name="dispatch")
@method_decorator(login_not_required, name="dispatch")
class SignInView(auth_views.LoginView):
    """Django's sign-in, throttled by address and by user name and address (accounts.signin):
    guessing is slow, and the right password from an address that has not been failing always
    gets in."""

    template_name = "accounts/login.html"
    form_class = SignInForm
    redirect_authenticated_user = True

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method == "GET" and services.needs_setup():
            return redirect("accounts:setup")
        return super().dispatch(request, *args, **kwargs)

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            self.attempt = signin.begin(client_ip(request), request.POST.get("username", ""))
        except signin.Refused as refused:
            form = self.get_form()
            form.errors.clear()
            form.add_error(None, f"Too many sign-in attempts. Try again {refused.verdict.wait_text}.")
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form) -> HttpResponse:
        signin.succeeded(self.attempt)
        return super().form_valid(form)


@method_decorator(sensitive_post_parameters(), name="dispatch")
class PasswordView(auth_views.PasswordChangeView):
    """Django's password change, with the sign-in's limit per person: the old-password field
    must not be a way around it for someone holding an open session."""

    template_name = "accounts/password.html"
    success_url = "/settings/"

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        verdict = ratelimit.take("password-user", str(request.user.pk), settings.LOGIN_RATE_PER_USER, HOUR)
        if not verdict.allowed:
            form = self.get_form()
            form.errors.clear()
            form.add_error(None, f"Too many password attempts. Try again {verdict.wait_text}.")
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form) -> HttpResponse:
        ratelimit.reset("password-user", str(self.request.user.pk))
        old_key = self.request.session.session_key
        response = super().form_valid(form)  # this session stays signed in (a new key); the others end
        sockets.tell(self.request.user.pk, renamed=(old_key, self.request.session.session_key))
        return response


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
                owner = services.create_owner(form.cleaned_data["username"], form.cleaned_data["password1"])
            except services.SetupClosed as exc:
                raise Http404("This server already has an owner.") from exc
            login(request, owner, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, "Welcome. You own this pplxweb; link Perplexity in Settings.")
            return redirect("search:home")
    return render(request, "accounts/setup.html", {"form": form}, status=status)


def _ago(moment) -> str:
    """ "just now", "3 minutes ago", or "" for never (timesince says "0 minutes" for the first)."""
    if moment is None:
        return ""
    if timezone.now() - moment < timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment)} ago"


def _is_owner(user) -> bool:
    return user.is_authenticated and user.is_superuser


def _render_settings(request: HttpRequest, status: int = 200, **forms) -> HttpResponse:
    user = request.user
    account = PerplexityAccount.objects.filter(user=user).first()
    attempt = LinkAttempt.objects.filter(user=user).first()
    defaults, _ = SearchDefaults.objects.get_or_create(user=user)
    choices = services.model_choices()
    context = {
        "account": account,
        "attempt": attempt,
        "email_form": forms.get("email_form")
        or EmailForm(initial={"email": account.email if account else ""}),
        "code_form": forms.get("code_form") or CodeForm(),
        "totp_form": forms.get("totp_form") or TotpForm(),
        "cookie_form": forms.get("cookie_form") or CookieForm(),
        "api_key_form": forms.get("api_key_form") or ApiKeyForm(),
        "defaults_form": forms.get("defaults_form")
        or DefaultsForm(initial=defaults.as_initial(), choices=choices, tier=account.tier if account else ""),
        "link_error": forms.get("link_error", ""),
        "show_fallback": forms.get("show_fallback", False) or bool(account and account.status == "blocked"),
        # the sentence searches end with says "Re-link in Settings": here the way is just below
        "status_reason": account.status_reason.replace(RELINK, " Re-link below.") if account else "",
        "member_form": forms.get("member_form") or MemberForm(),
        "agent_tokens": [(t, _ago(t.last_used)) for t in agent_tokens.tokens_of(user)],
        "token_form": forms.get("token_form") or AgentTokenForm(),
        "new_token": forms.get("new_token"),
        "site": request.build_absolute_uri("/").rstrip("/"),
        "members": household.rows(user) if _is_owner(user) else [],
        "storage": storage.usage(user.pk).shown(),
        "is_owner": _is_owner(user),
        "doctor": doctor.last() if _is_owner(user) else None,
        "shared_by_owner": PerplexityAccount.objects.filter(shared=True, user__is_superuser=True)
        .exclude(user=user)
        .exists(),
    }
    context.update(library_display.context(user), library_csrf=get_token(request))
    return render(request, "accounts/settings.html", context, status=status)


@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    """Settings: the Perplexity link, search defaults, and for the owner the household."""
    if request.method == "POST" and "add_member" in request.POST:
        if not _is_owner(request.user):
            raise Http404
        member_form = MemberForm(request.POST)
        if member_form.is_valid():
            member = member_form.save()
            messages.success(request, f"{member.get_username()} can now sign in.")
            return redirect("accounts:settings")
        return _render_settings(request, member_form=member_form)
    return _render_settings(request)


LINK_ACTIONS = {
    "send_code": (EmailForm, "email_form"),
    "verify_code": (CodeForm, "code_form"),
    "verify_totp": (TotpForm, "totp_form"),
    "link_cookies": (CookieForm, "cookie_form"),
    "save_api_key": (ApiKeyForm, "api_key_form"),
}


@sensitive_post_parameters("code", "cookies", "api_key")
@require_POST
def perplexity(request: HttpRequest) -> HttpResponse:
    """Every action of the Perplexity panel; the submit button's name says which."""
    user = request.user
    action = next(
        (
            name
            for name in (*LINK_ACTIONS, "test", "unlink", "cancel", "remove_api_key", "share")
            if name in request.POST
        ),
        "",
    )
    if not action:
        return redirect("accounts:settings")
    form = None
    try:
        if action in LINK_ACTIONS:
            form_class, form_name = LINK_ACTIONS[action]
            form = form_class(request.POST)
            if not form.is_valid():
                return _render_settings(request, **{form_name: form})
            message = _link_action(user, action, form.cleaned_data)
        else:
            message = _panel_action(user, action, request.POST)
    except services.LinkError as exc:
        if form is None:
            messages.error(request, exc.message)
            return redirect(f"{reverse('accounts:settings')}#perplexity")
        return _render_settings(request, show_fallback=exc.challenge, link_error=exc.message)
    messages.success(request, message)
    return redirect(f"{reverse('accounts:settings')}#perplexity")


def _link_action(user, action: str, data: dict) -> str:
    if action == "send_code":
        services.start_link(user, data["email"])
        return "Perplexity has e-mailed you a code. Type it below."
    if action == "verify_code":
        if services.verify_code(user, data["code"]) == "totp":
            return "Code accepted. Your account also asks for an authenticator code."
        return "Perplexity account linked."
    if action == "verify_totp":
        services.verify_totp(user, data["code"])
        return "Perplexity account linked."
    if action == "link_cookies":
        services.link_with_cookies(user, data["cookies"])
        return "Perplexity account linked with your browser's cookies."
    services.set_api_key(user, data["api_key"])
    return "API key saved."


def _panel_action(user, action: str, post) -> str:
    if action == "test":
        account = services.test_connection(user)
        return f"Connection works: signed in as {account.email or 'your account'}."
    if action == "unlink":
        services.unlink(user)
        sockets.tell(user.pk, "unlinked")
        return "Unlinked. The session and its cookies are erased."
    if action == "cancel":
        LinkAttempt.objects.filter(user=user).delete()
        return "Linking cancelled; nothing was changed."
    if action == "remove_api_key":
        services.remove_api_key(user)
        return "API key removed."
    services.set_shared(user, post.get("share") == "on")
    return "Household sharing updated."


@require_POST
def search_defaults(request: HttpRequest) -> HttpResponse:
    account = PerplexityAccount.objects.filter(user=request.user).first()
    form = DefaultsForm(request.POST, choices=services.model_choices(), tier=account.tier if account else "")
    if not form.is_valid():
        return _render_settings(request, defaults_form=form)
    data = form.cleaned_data
    SearchDefaults.objects.update_or_create(
        user=request.user,
        defaults={
            "model": data["model"],
            "mode": data["mode"],
            "sources": ",".join(data["sources"]),
            "recency": data["recency"],
            "language": data["language"],
            "incognito": data["incognito"],
        },
    )
    messages.success(request, "Search defaults saved.")
    return redirect(f"{reverse('accounts:settings')}#defaults")


@require_POST
def agents(request: HttpRequest) -> HttpResponse:
    """Make a token (shown on the page this once, never stored), or revoke one."""
    if "revoke" in request.POST:
        try:
            name = agent_tokens.revoke_by_id(request.user, request.POST["revoke"][:19])
        except agent_tokens.TokenRefused:
            messages.info(request, "That token was already revoked.")
        else:
            messages.success(request, f"Revoked “{name}”: every request with it is refused from now on.")
        return redirect(f"{reverse('accounts:settings')}#agents")
    form = AgentTokenForm(request.POST)
    token = None
    if form.is_valid():
        try:
            token = agent_tokens.create(request.user, form.cleaned_data["name"])
        except agent_tokens.TokenRefused as exc:
            form.add_error("name", exc.message)
    response = _render_settings(request, token_form=AgentTokenForm() if token else form, new_token=token)
    response["Cache-Control"] = "no-store"  # the token is on this page alone
    return response


def _member(request: HttpRequest, member_id: int):
    member = services.member_of(request.user, member_id)
    if member is None:
        raise Http404("No such member of the household.")
    return member


@user_passes_test(_is_owner)
@require_http_methods(["GET", "POST"])
def remove_member(request: HttpRequest, member_id: int) -> HttpResponse:
    """Remove a member: GET asks (what they have here, keep or delete their history), POST does."""
    member = _member(request, member_id)
    holdings = members.holdings(member)
    name = member.get_username()
    form = RemoveMemberForm(request.POST or None, name=name, conversations=holdings.conversations)
    if request.method == "POST" and form.is_valid():
        removed = members.remove_member(request.user, member_id, keep_history=form.keep)
        if removed is None:
            raise Http404("No such member of the household.")
        messages.success(request, _removed_sentence(removed))
        return redirect(f"{reverse('accounts:settings')}#household")
    context = {"member": member, "holdings": holdings, "form": form}
    return render(request, "accounts/remove_member.html", context)


def _removed_sentence(removed: members.Removed) -> str:
    many = f"{removed.conversations} conversation{'' if removed.conversations == 1 else 's'}"
    if removed.kept:
        verb = "is" if removed.conversations == 1 else "are"
        return (
            f"{removed.name} was removed. Their {many} {verb} in your history, marked “from {removed.name}”."
        )
    return f"{removed.name} was removed, with their {many}."


@never_cache
@user_passes_test(_is_owner)
@require_POST
def member_password(request: HttpRequest, member_id: int) -> HttpResponse:
    """A one-time code for a member who forgot their password, shown once to the owner (the
    page is not cached); `cancel` voids the code instead."""
    member = _member(request, member_id)
    if "cancel" in request.POST:
        if resets.cancel(member):
            messages.success(request, f"The reset code for {member.get_username()} no longer works.")
        return redirect(f"{reverse('accounts:settings')}#household")
    issued = resets.issue(member)
    context = {"member": member, "issued": issued, "minutes": RESET_MINUTES}
    return render(request, "accounts/reset_code.html", context)


@never_cache
@login_not_required
@sensitive_post_parameters("code", "new_password1", "new_password2")
@require_http_methods(["GET", "POST"])
def reset(request: HttpRequest) -> HttpResponse:
    """A member sets a new password with the owner's one-time code, and is signed in."""
    if request.user.is_authenticated:
        return redirect("accounts:password")
    form = ResetForm(request.POST or None)
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if wait := _reset_limited(request, data["username"]):
            form.add_error(None, f"Too many tries. Try again {wait}.")
            status = 429
        else:
            try:
                person = resets.redeem(data["username"], data["code"], data["new_password1"])
            except resets.ResetRefused as exc:
                form.add_error("code", exc.message)
            else:
                sockets.tell(person.pk)  # their pages open elsewhere ask them to sign in again
                login(request, person, backend="django.contrib.auth.backends.ModelBackend")
                messages.success(request, "Your new password is set, and you are signed in.")
                return redirect("search:home")
    return render(request, "accounts/reset.html", {"form": form}, status=status)


def _reset_limited(request: HttpRequest, username: str) -> str:
    """When the next try is allowed ("in 12 minutes"), or "" now: the sign-in's limits, per
    address and per user name, with buckets of their own."""
    for scope, value, capacity in (
        ("reset-ip", client_ip(request), settings.LOGIN_RATE_PER_IP),
        ("reset-user", username.strip().lower()[:150], settings.LOGIN_RATE_PER_USER),
    ):
        verdict = ratelimit.take(scope, value, capacity, HOUR)
        if not verdict.allowed:
            return verdict.wait_text
    return ""
