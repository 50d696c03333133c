"""Linking a person's Perplexity account (ARCHITECTURE.md, "Linking a Perplexity account").

email -> start_link (csrf + signin-email; the cookie jar kept server-side in a LinkAttempt)
-> verify_code (signin-otp) -> optional verify_totp -> session info confirms the account ->
saved, encrypted. The previous link is replaced only once the new one is confirmed.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import shlex
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.debug import sensitive_variables

from accounts import ratelimit
from accounts.models import LinkAttempt, PerplexityAccount
from accounts.services.catalogue import refresh_catalogue, stale
from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity import signin
from pplxweb.perplexity.client import PerplexityClient, SessionInfo
from pplxweb.perplexity.errors import AuthError, ChallengeError, PerplexityError
from pplxweb.perplexity.stream import Timeouts
from pplxweb.perplexity.values import clean

log = logging.getLogger(__name__)
T = TypeVar("T")
CODE_LIFETIME = timedelta(minutes=15)
CODE_TRIES = 5
MAX_CODE = 64
KEEP_FROM_BROWSER = ("cf_clearance", "__cf_bm")
API_KEY = re.compile(r"^[A-Za-z0-9_\-]{16,200}$")


class LinkError(Exception):
    """A link step failed; `message` is the sentence shown on the form."""

    def __init__(self, message: str, *, challenge: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.challenge = challenge  # offer the cookie fallback


def make_client(
    cookies: dict | None = None, csrf: str = "", user_agent: str = "", account_id: str = ""
) -> PerplexityClient:
    gap, cap = settings.PERPLEXITY_READ_TIMEOUT, settings.PERPLEXITY_ANSWER_TIMEOUT
    return PerplexityClient(
        settings.PERPLEXITY_URL,
        settings.PERPLEXITY_API_URL,
        impersonate=settings.PERPLEXITY_IMPERSONATE,
        timeouts=Timeouts(read_gap=gap, research_read_gap=gap * 10, overall=cap, research_overall=cap * 6),
        cookies=cookies,
        csrf_token=csrf,
        user_agent=user_agent,
        account_id=account_id,
    )


def _run(step: Callable[[PerplexityClient], Awaitable[T]], **client_args: Any) -> tuple[T, PerplexityClient]:
    """Run one async step with a fresh client; upstream failures become LinkError."""

    async def run() -> tuple[T, PerplexityClient]:
        async with make_client(**client_args) as client:
            return await step(client), client

    try:
        return async_to_sync(run)()
    except ChallengeError as exc:
        raise LinkError(exc.message, challenge=True) from None
    except PerplexityError as exc:
        raise LinkError(exc.message) from None


def _account(user) -> PerplexityAccount:
    account, _ = PerplexityAccount.objects.get_or_create(user=user)
    return account


# --- e-mail code -----------------------------------------------------------------------------


def _clean_email(email: str) -> str:
    email = (email or "").strip()
    try:
        if len(email) > 254:
            raise ValidationError("too long")
        EmailValidator()(email)
    except ValidationError:
        raise LinkError(
            "That is not an e-mail address. Type the one you sign in to Perplexity with."
        ) from None
    return email.lower()


def start_link(user, email: str) -> None:
    """Ask Perplexity to e-mail a code. At most 1 a minute and 5 an hour per address."""
    email = _clean_email(email)
    for scope, capacity, period in (
        ("send-code-minute", 1, timedelta(minutes=1)),
        ("send-code-hour", 5, timedelta(hours=1)),
    ):
        verdict = ratelimit.take(scope, email, capacity, period)
        if not verdict.allowed:
            raise LinkError(f"A code was sent to {email} a moment ago. Ask for another {verdict.wait_text}.")

    async def send(client: PerplexityClient) -> None:
        await signin.start_sign_in(client, email)

    _, client = _run(send)
    state = json.dumps({"cookies": client.cookies, "csrf": client.csrf_token})
    LinkAttempt.objects.update_or_create(
        user=user,
        defaults={
            "email": email,
            "step": LinkAttempt.Step.CODE,
            "state": state,
            "tries": 0,
            "created": timezone.now(),
        },
    )


def _attempt(user, step: str) -> LinkAttempt:
    attempt = LinkAttempt.objects.filter(user=user).first()
    if attempt is None:
        raise LinkError("Ask for a code first: type your e-mail address.")
    if timezone.now() - attempt.created > CODE_LIFETIME:
        attempt.delete()
        raise LinkError("That code has expired. Ask for a new one.")
    if attempt.step != step:
        raise LinkError("That step is done; continue with the form shown.")
    return attempt


def _clean_code(code: str) -> str:
    code = (code or "").strip()
    if not code:
        raise LinkError("Type the code from the e-mail.")
    if len(code) > MAX_CODE:
        raise LinkError("That is not a Perplexity code: it is far too long.")
    return code


def _spend_try(user, attempt: LinkAttempt) -> None:
    if attempt.tries >= CODE_TRIES:
        attempt.delete()
        raise LinkError("Too many wrong codes. Ask for a new code.")
    verdict = ratelimit.take("verify-code-day", str(user.pk), 20, timedelta(days=1))
    if not verdict.allowed:
        raise LinkError(f"Too many codes tried today. Try again {verdict.wait_text}.")
    attempt.tries += 1
    attempt.save(update_fields=["tries"])


@sensitive_variables()
def verify_code(user, code: str) -> str:
    """Check the e-mailed code. Returns "linked", or "totp" when an authenticator code is next."""
    code = _clean_code(code)
    attempt = _attempt(user, LinkAttempt.Step.CODE)
    _spend_try(user, attempt)
    state = json.loads(attempt.state)

    async def check(client: PerplexityClient):
        return await signin.verify_code(client, attempt.email, code)

    result, client = _run(check, cookies=state.get("cookies"), csrf=state.get("csrf", ""))
    if result.totp_challenge:
        attempt.step, attempt.tries = LinkAttempt.Step.TOTP, 0
        attempt.state = json.dumps({"cookies": client.cookies, "challenge": result.totp_challenge})
        attempt.save(update_fields=["step", "tries", "state"])
        return "totp"
    _confirm(user, jar.with_session(client.cookies, result.token), "", attempt.email)
    return "linked"


@sensitive_variables()
def verify_totp(user, code: str) -> str:
    code = _clean_code(code)
    attempt = _attempt(user, LinkAttempt.Step.TOTP)
    _spend_try(user, attempt)
    state = json.loads(attempt.state)

    async def check(client: PerplexityClient) -> str:
        return await signin.verify_totp(client, state.get("challenge", ""), code)

    token, client = _run(check, cookies=state.get("cookies"))
    _confirm(user, jar.with_session(client.cookies, token), "", attempt.email)
    return "linked"


@sensitive_variables()
def _confirm(user, cookies: dict, user_agent: str, email: str, fallback: bool = False) -> PerplexityAccount:
    """Ask who the session belongs to; only then replace the stored link."""
    keep = {
        n: v
        for n, v in cookies.items()
        if n == jar.SESSION_COOKIE
        or n in KEEP_FROM_BROWSER
        or not n.startswith(("next-auth", "__Host-next-auth", "__Secure-next-auth"))
    }

    async def who(client: PerplexityClient) -> SessionInfo:
        info = await client.session_info()
        await refresh_catalogue(client)
        return info

    try:
        info, client = _run(who, cookies=keep, user_agent=user_agent)
    except LinkError as exc:
        if "signed out" in exc.message or "did not accept" in exc.message:
            raise LinkError(
                "Perplexity says this session is signed out; nothing was changed. Sign in again."
            ) from None
        raise
    with transaction.atomic():
        account = _account(user)
        account.session = json.dumps({"cookies": client.cookies, "user_agent": user_agent})
        # what Perplexity says is upstream text: cleaned and cut as every path saves it (values.clean)
        account.email = clean(info.email, 254) or email
        account.account_id = clean(info.user_id, 100)
        account.tier = clean(info.tier, 30)
        account.expires = parse_datetime(info.expires) if info.expires else None
        account.linked_at = account.checked_at = timezone.now()
        account.status, account.status_reason = PerplexityAccount.Status.OK, ""
        account.via_cookie_fallback = fallback
        account.save()
        LinkAttempt.objects.filter(user=user).delete()
    log.info("user %s linked Perplexity account %s", user.pk, account.email)
    return account


# --- cookie fallback -------------------------------------------------------------------------


def parse_browser_copy(text: str) -> tuple[dict[str, str], str]:
    """Cookies and User-Agent from a browser's Cookie header or a whole "Copy as cURL"."""
    text = (text or "").strip()
    if len(text) > 64 * 1024:
        raise LinkError("That is too long to be a Cookie header or a cURL command.")
    if text.lower().startswith("curl"):
        return _parse_curl(text)
    if text.lower().startswith("cookie:"):
        text = text[7:]
    return jar.parse_cookie_header(text), ""


def _parse_curl(text: str) -> tuple[dict[str, str], str]:
    try:
        words = shlex.split(text.replace("\\\n", " ").replace("^\n", " "))
    except ValueError:
        raise LinkError("That cURL command could not be read. Copy it again (Copy as cURL (bash)).") from None
    cookies: dict[str, str] = {}
    user_agent = ""
    for flag, value in itertools.pairwise(words):
        if flag in ("-H", "--header"):
            name, _, rest = value.partition(":")
            if name.strip().lower() == "cookie":
                cookies.update(jar.parse_cookie_header(rest))
            elif name.strip().lower() == "user-agent":
                user_agent = rest.strip()
        elif flag in ("-b", "--cookie"):
            cookies.update(jar.parse_cookie_header(value))
        elif flag in ("-A", "--user-agent"):
            user_agent = value.strip()
    return cookies, user_agent


@sensitive_variables()
def link_with_cookies(user, text: str) -> PerplexityAccount:
    cookies, user_agent = parse_browser_copy(text)
    token = jar.session_token(cookies)
    if not token:
        raise LinkError(
            "There is no Perplexity session cookie (__Secure-next-auth.session-token) in that. "
            "Copy a request to www.perplexity.ai while you are signed in."
        )
    kept = {jar.SESSION_COOKIE: token, **{n: cookies[n] for n in KEEP_FROM_BROWSER if n in cookies}}
    return _confirm(user, kept, user_agent, "", fallback=True)


# --- the panel's actions ---------------------------------------------------------------------


def test_connection(user) -> PerplexityAccount:
    """Ask session info with the stored link; the status says what came back."""
    account = _account(user)
    if not account.linked:
        raise LinkError("There is no linked account to test.")
    data = account.session_data()
    refresh = stale()

    async def check(client: PerplexityClient) -> SessionInfo:
        info = await client.session_info()
        if refresh:  # the catalogue is refreshed daily, with whichever link is at hand
            await refresh_catalogue(client)
        return info

    try:
        info, client = _run(check, cookies=data.get("cookies"), user_agent=data.get("user_agent", ""))
    except LinkError as exc:
        status = (
            PerplexityAccount.Status.BLOCKED if exc.challenge else PerplexityAccount.Status.NEEDS_ATTENTION
        )
        if "could not reach" in exc.message or "server error" in exc.message:
            status = account.status  # our network or theirs: the link itself is not at fault
        account.status, account.status_reason, account.checked_at = (
            status,
            exc.message[:300],
            timezone.now(),
        )
        account.save(update_fields=["status", "status_reason", "checked_at"])
        raise
    account.session = json.dumps({**data, "cookies": client.cookies})  # the session cookie rotates
    account.email = clean(info.email, 254) or account.email
    account.tier = clean(info.tier, 30) or account.tier
    account.expires = parse_datetime(info.expires) if info.expires else account.expires
    account.status, account.status_reason, account.checked_at = (
        PerplexityAccount.Status.OK,
        "",
        timezone.now(),
    )
    account.save()
    return account


def unlink(user) -> None:
    """Erase the session and its cookies at once (the API key, if any, stays)."""
    PerplexityAccount.objects.filter(user=user).update(
        session=None,
        email="",
        account_id="",
        tier="",
        expires=None,
        linked_at=None,
        status="ok",
        status_reason="",
        via_cookie_fallback=False,
        shared=False,
    )
    LinkAttempt.objects.filter(user=user).delete()


@sensitive_variables()
def set_api_key(user, key: str) -> None:
    key = (key or "").strip()
    if not API_KEY.match(key):
        raise LinkError("That does not look like a Perplexity API key (it starts with pplx-).")
    account = _account(user)
    account.api_key, account.api_key_last4 = key, key[-4:]
    account.save(update_fields=["api_key", "api_key_last4"])


def remove_api_key(user) -> None:
    PerplexityAccount.objects.filter(user=user).update(api_key=None, api_key_last4="")


def set_shared(owner, shared: bool) -> None:
    if not owner.is_superuser:
        raise LinkError("Only the owner can share a link with the household.")
    account = _account(owner)
    account.shared = shared and account.linked
    account.save(update_fields=["shared"])


def mark_auth_problem(account: PerplexityAccount, error: AuthError | ChallengeError) -> None:
    status = (
        PerplexityAccount.Status.BLOCKED
        if isinstance(error, ChallengeError)
        else PerplexityAccount.Status.NEEDS_ATTENTION
    )
    PerplexityAccount.objects.filter(pk=account.pk).update(
        status=status, status_reason=error.message[:300], checked_at=timezone.now()
    )
