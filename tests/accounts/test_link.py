"""Linking a Perplexity account through Settings, with JavaScript off (plain forms)."""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import respx
from django.conf import settings
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from accounts import services
from accounts.models import LinkAttempt, ModelCatalogue, PerplexityAccount

pytestmark = pytest.mark.django_db

BASE = "https://perplexity.test"
TOKEN = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..SECRET-SESSION-TOKEN-0123456789.tag"
OTHER_TOKEN = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..OTHER-SESSION-TOKEN-9876543210.tag"
SESSION = {
    "user": {"id": "acct-1", "email": "me@example.com", "subscription_tier": "pro"},
    "expires": "2027-01-31T10:00:00Z",
}
CHALLENGE = httpx.Response(
    403,
    text="<html><title>Just a moment...</title></html>",
    headers={"content-type": "text/html", "cf-mitigated": "challenge"},
)


@pytest.fixture
def upstream():
    with respx.mock(base_url=BASE, assert_all_called=False) as mock:
        mock.get("/api/auth/csrf").respond(
            json={"csrfToken": "c" * 64}, headers={"set-cookie": "next-auth.csrf-token=x%7Cy; Path=/"}
        )
        mock.post("/api/auth/signin-email").respond(json={"success": "Email sign in triggered"})
        mock.post("/api/auth/signin-otp").respond(json={"token": TOKEN, "status": "success"})
        mock.get("/api/auth/session").respond(json=SESSION)
        mock.get("/rest/models/config").respond(
            json={"models": {"pplx_pro": {"mode": "search"}}, "config": []}
        )
        yield mock


def post(client, **data):
    return client.post(reverse("accounts:perplexity"), data)


def link(client, code="123456"):
    assert post(client, send_code="1", email="Me@Example.com").status_code == 302
    return post(client, verify_code="1", code=code)


def test_link_with_the_token_in_json(owner_client, owner, upstream):
    response = link(owner_client)
    assert response.status_code == 302
    account = PerplexityAccount.objects.get(user=owner)
    assert account.linked and account.email == "me@example.com" and account.tier == "pro"
    assert account.expires.year == 2027 and account.status == "ok"
    assert services.credentials_for(owner).cookies["__Secure-next-auth.session-token"] == TOKEN
    sent = upstream.calls
    otp = json.loads(next(c for c in sent if c.request.url.path == "/api/auth/signin-otp").request.content)
    assert otp == {"email": "me@example.com", "otp": "123456", "csrfToken": "c" * 64}
    session_call = [c for c in sent if c.request.url.path == "/api/auth/session"][-1]
    assert f"__Secure-next-auth.session-token={TOKEN}" in session_call.request.headers["cookie"]
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "me@example.com" in page and "Test connection" in page
    assert TOKEN not in page and "SECRET-SESSION" not in page
    assert not LinkAttempt.objects.exists()


def test_the_code_step_shows_a_code_form(owner_client, upstream):
    post(owner_client, send_code="1", email="me@example.com")
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "Perplexity has e-mailed a code to" in page and 'name="verify_code"' in page


def test_link_with_the_token_only_in_set_cookie(owner_client, owner, upstream):
    upstream.post("/api/auth/signin-otp").respond(
        json={"status": "success"},
        headers={"set-cookie": f"__Secure-next-auth.session-token={TOKEN}; Path=/; Secure"},
    )
    assert link(owner_client).status_code == 302
    assert services.credentials_for(owner).cookies["__Secure-next-auth.session-token"] == TOKEN


def test_link_with_chunked_cookies(owner_client, owner, upstream):
    upstream.post("/api/auth/signin-otp").respond(
        json={"status": "success"},
        headers=[
            ("set-cookie", f"__Secure-next-auth.session-token.0={TOKEN[:25]}; Path=/"),
            ("set-cookie", f"__Secure-next-auth.session-token.1={TOKEN[25:]}; Path=/"),
        ],
    )
    assert link(owner_client).status_code == 302
    cookies = services.credentials_for(owner).cookies
    assert cookies["__Secure-next-auth.session-token"] == TOKEN
    assert not any(name.endswith((".0", ".1")) for name in cookies)


def test_link_with_an_authenticator(owner_client, owner, upstream):
    upstream.post("/api/auth/signin-otp").respond(
        302, headers={"location": "/auth/totp-challenge?token=CH-1"}
    )
    verify = upstream.post("/api/auth/totp-challenge/verify").respond(json={"token": TOKEN})
    assert link(owner_client).status_code == 302
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "authenticator" in page and 'name="verify_totp"' in page
    assert not PerplexityAccount.objects.filter(user=owner, session__isnull=False).exists()
    assert post(owner_client, verify_totp="1", code="654321").status_code == 302
    assert json.loads(verify.calls.last.request.content) == {"token": "CH-1", "code": "654321"}
    assert PerplexityAccount.objects.get(user=owner).linked


def test_the_authenticator_step_tries_the_second_verify_path_on_404(owner_client, owner, upstream):
    upstream.post("/api/auth/signin-otp").respond(
        302, headers={"location": "/auth/totp-challenge?token=CH-1"}
    )
    first = upstream.post("/api/auth/totp-challenge/verify").respond(404, text="Not Found")
    second = upstream.post("/api/auth/totp/challenge-verify").respond(json={"token": TOKEN})
    assert link(owner_client).status_code == 302
    assert post(owner_client, verify_totp="1", code="654321").status_code == 302
    assert first.call_count == 1 and second.call_count == 1
    assert json.loads(second.calls.last.request.content) == {"token": "CH-1", "code": "654321"}
    assert PerplexityAccount.objects.get(user=owner).linked


@pytest.mark.parametrize(
    ("otp", "sentence"),
    [
        (
            httpx.Response(401, json={"text": "Invalid code"}),
            "Perplexity did not accept that code (Invalid code)",
        ),
        (
            httpx.Response(302, headers={"location": "/api/auth/error?error=Verification"}),
            "or it has expired",
        ),
        (CHALLENGE, "Cloudflare"),
        (httpx.Response(503, text="down"), "server error"),
        (httpx.ConnectError("down"), "could not reach Perplexity"),
    ],
)
def test_code_failures_say_so_and_leave_the_old_link(owner_client, owner, upstream, otp, sentence):
    services.link_with_cookies(owner, f"__Secure-next-auth.session-token={OTHER_TOKEN}")  # an existing link
    post(owner_client, send_code="1", email="me@example.com")
    route = upstream.post("/api/auth/signin-otp")
    route.side_effect = otp if isinstance(otp, Exception) else None
    if not isinstance(otp, Exception):
        route.mock(return_value=otp)
    response = post(owner_client, verify_code="1", code="111111")
    assert response.status_code == 200
    assert sentence in response.content.decode()
    assert services.credentials_for(owner).cookies["__Secure-next-auth.session-token"] == OTHER_TOKEN
    if otp is CHALLENGE:
        assert '<details open id="fallback">' in response.content.decode()


def test_a_refused_code_can_be_typed_again(owner_client, owner, upstream):
    upstream.post("/api/auth/signin-otp").mock(
        side_effect=[
            httpx.Response(401, json={"text": "Invalid code"}),
            httpx.Response(200, json={"token": TOKEN}),
        ]
    )
    assert "Invalid code" in link(owner_client, code="000000").content.decode()
    assert post(owner_client, verify_code="1", code="123456").status_code == 302
    assert PerplexityAccount.objects.get(user=owner).linked


def test_five_wrong_codes_then_a_new_code_is_needed(owner_client, upstream):
    upstream.post("/api/auth/signin-otp").respond(401, json={"text": "Invalid code"})
    post(owner_client, send_code="1", email="me@example.com")
    for _ in range(5):
        assert "Invalid code" in post(owner_client, verify_code="1", code="000000").content.decode()
    response = post(owner_client, verify_code="1", code="000000")
    assert "Too many wrong codes. Ask for a new code." in response.content.decode()
    assert not LinkAttempt.objects.exists()


def test_an_expired_code(owner_client, upstream):
    post(owner_client, send_code="1", email="me@example.com")
    LinkAttempt.objects.update(created=timezone.now() - timedelta(minutes=16))
    assert (
        "That code has expired. Ask for a new one."
        in post(owner_client, verify_code="1", code="1").content.decode()
    )


@pytest.mark.parametrize(
    ("code", "sentence"),
    [(" ", "Type the code from the e-mail."), ("9" * 20_000, "far too long")],
)
def test_empty_and_huge_codes(owner_client, upstream, code, sentence):
    post(owner_client, send_code="1", email="me@example.com")
    response = post(owner_client, verify_code="1", code=code)
    assert response.status_code == 200
    assert sentence in response.content.decode()


def test_not_an_email_and_an_unknown_email(owner_client, upstream):
    assert "That is not an e-mail address" in post(owner_client, send_code="1", email="me@").content.decode()
    upstream.post("/api/auth/signin-email").respond(400, json={"text": "No account with this email"})
    response = post(owner_client, send_code="1", email="nobody@example.com")
    assert "No account with this email" in response.content.decode()
    assert not LinkAttempt.objects.exists()


def test_challenge_when_sending_the_code_offers_the_fallback(owner_client, upstream):
    upstream.get("/api/auth/csrf").mock(return_value=CHALLENGE)
    response = post(owner_client, send_code="1", email="me@example.com")
    text = response.content.decode()
    assert "Cloudflare" in text and '<details open id="fallback">' in text


def test_send_code_is_limited_per_address(owner_client, upstream):
    post(owner_client, send_code="1", email="me@example.com")
    response = post(owner_client, send_code="1", email="ME@example.com")
    assert "A code was sent to me@example.com a moment ago. Ask for another in" in response.content.decode()


def test_a_session_that_is_signed_out_is_not_saved(owner_client, owner, upstream):
    upstream.get("/api/auth/session").respond(json={})
    response = link(owner_client)
    assert "signed out; nothing was changed" in response.content.decode()
    assert not PerplexityAccount.objects.filter(user=owner, session__isnull=False).exists()


CURL = (
    "curl 'https://www.perplexity.ai/rest/thread/list' \\\n  -H 'accept: */*' \\\n"
    f"  -b '__Secure-next-auth.session-token.0={TOKEN[:20]}; __Secure-next-auth.session-token.1={TOKEN[20:]}; cf_clearance=CLEAR; pplx.visitor-id=v' \\\n"
    "  -H 'user-agent: Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0.0.0 Safari/537.36'"
)


def test_cookie_fallback_from_copy_as_curl_keeps_cookie_clearance_and_agent(owner_client, owner, upstream):
    assert post(owner_client, link_cookies="1", **{"cookies": CURL}).status_code == 302
    credential = services.credentials_for(owner)
    assert credential.cookies == {"__Secure-next-auth.session-token": TOKEN, "cf_clearance": "CLEAR"}
    assert credential.user_agent.endswith("Chrome/156.0.0.0 Safari/537.36")
    checked = upstream.calls.last.request
    assert (
        checked.headers["user-agent"] == credential.user_agent
        and "cf_clearance=CLEAR" in checked.headers["cookie"]
    )
    assert PerplexityAccount.objects.get(user=owner).via_cookie_fallback


def test_cookie_fallback_from_a_cookie_header(owner, upstream):
    services.link_with_cookies(owner, f"Cookie: __Secure-next-auth.session-token={TOKEN}; other=1")
    assert services.credentials_for(owner).cookies == {"__Secure-next-auth.session-token": TOKEN}


def test_cookie_fallback_without_a_session_cookie(owner_client, upstream):
    response = post(
        owner_client,
        link_cookies="1",
        **{"cookies": "curl 'https://www.perplexity.ai/' -H 'cookie: cf_clearance=x'"},
    )
    assert "There is no Perplexity session cookie" in response.content.decode()


def test_test_connection_and_its_statuses(owner_client, owner, upstream):
    link(owner_client)
    upstream.get("/api/auth/session").respond(
        json=SESSION, headers={"set-cookie": "__Secure-next-auth.session-token=ROTATED; Path=/"}
    )
    assert post(owner_client, test="1").status_code == 302
    assert services.credentials_for(owner).cookies["__Secure-next-auth.session-token"] == "ROTATED"
    upstream.get("/api/auth/session").respond(401)
    post(owner_client, test="1")
    account = PerplexityAccount.objects.get(user=owner)
    assert account.status == "needs_attention" and "Re-link" in account.status_reason
    upstream.get("/api/auth/session").mock(return_value=CHALLENGE)
    post(owner_client, test="1")
    assert PerplexityAccount.objects.get(user=owner).status == "blocked"
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "blocked by Cloudflare" in page


def test_unlink_erases_the_session_at_once(owner_client, owner, upstream):
    link(owner_client)
    assert post(owner_client, unlink="1").status_code == 302
    account = PerplexityAccount.objects.get(user=owner)
    assert account.session is None and not account.linked
    with connection.cursor() as cursor:
        cursor.execute("SELECT session FROM accounts_perplexityaccount")
        assert cursor.fetchone()[0] is None


def test_relink_keeps_the_old_link_until_the_new_one_is_confirmed(owner_client, owner, upstream):
    link(owner_client)
    upstream.post("/api/auth/signin-otp").respond(json={"token": OTHER_TOKEN})
    assert post(owner_client, send_code="1", email="me+again@example.com").status_code == 302
    assert services.credentials_for(owner).cookies["__Secure-next-auth.session-token"] == TOKEN
    post(owner_client, verify_code="1", code="1")
    assert services.credentials_for(owner).cookies["__Secure-next-auth.session-token"] == OTHER_TOKEN


def test_api_key_is_stored_encrypted_and_shown_masked(owner_client, owner):
    assert post(owner_client, save_api_key="1", **{"api_key": "pplx-abcdefghijklmnop1234"}).status_code == 302
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "1234" in page and "pplx-abcdefghijklmnop1234" not in page and "abcdefghijklmnop" not in page
    credential = services.credentials_for(owner)
    assert credential.kind == "api_key" and credential.api_key == "pplx-abcdefghijklmnop1234"
    assert (
        "does not look like a Perplexity API key"
        in post(owner_client, save_api_key="1", **{"api_key": "x y"}).content.decode()
    )


def test_session_link_comes_before_the_api_key(owner_client, owner, upstream):
    services.set_api_key(owner, "pplx-abcdefghijklmnop1234")
    link(owner_client)
    assert services.credentials_for(owner).kind == "session"
    PerplexityAccount.objects.filter(user=owner).update(status="needs_attention")
    assert services.credentials_for(owner).kind == "api_key"


def test_household_sharing_is_off_by_default_and_counts_searches(client, owner, member, upstream):
    client.force_login(owner)
    link(client)
    with pytest.raises(services.NoCredential):
        services.credentials_for(member)
    post(client, share="on")
    credential = services.credentials_for(member)
    assert credential.kind == "shared" and credential.account.user == owner
    services.set_api_key(member, "pplx-abcdefghijklmnop1234")  # the member's own row (an API key)
    services.record_search(member, credential)
    shared, own = PerplexityAccount.objects.get(user=owner), PerplexityAccount.objects.get(user=member)
    assert shared.shared_searches == 1 and shared.last_credential == "shared"
    assert own.last_search_at is not None and own.last_credential == "shared"  # shown on their page
    assert "Household searches" in client.get(reverse("accounts:settings")).content.decode()
    services.record_search(owner, services.credentials_for(owner))  # the owner's own: not counted
    shared.refresh_from_db()
    assert shared.shared_searches == 1 and shared.last_credential == "session"


def test_a_member_cannot_share_and_sees_only_their_own_panel(client, owner, member, upstream):
    client.force_login(owner)
    link(client)
    client.force_login(member)
    page = client.get(reverse("accounts:settings")).content.decode()
    assert "me@example.com" not in page and "Test connection" not in page
    response = post(client, share="on")
    assert (
        "Only the owner" in client.get(reverse("accounts:settings")).content.decode()
        or response.status_code == 302
    )
    post(client, unlink="1")  # unlinks nothing of the owner's
    assert PerplexityAccount.objects.get(user=owner).linked
    assert not PerplexityAccount.objects.get(user=owner).shared


def test_search_defaults_refuse_a_max_model_on_a_pro_account(owner_client, owner, upstream):
    from tests.perplexity.streams import fixture

    upstream.get("/rest/models/config").respond(
        content=fixture("smdex__cli-test__models-config-capture.json"),
        headers={"content-type": "application/json"},
    )
    link(owner_client)
    choices = services.model_choices()
    max_model = next(c.slug for c in choices if c.tier == "max")
    data = {"model": max_model, "mode": "pro", "sources": ["web"], "language": "en-US", "incognito": "on"}
    response = owner_client.post(reverse("accounts:defaults"), data)
    assert "needs Perplexity Max" in response.content.decode()
    data["model"] = "pplx_pro"
    assert owner_client.post(reverse("accounts:defaults"), data).status_code == 302
    assert owner.search_defaults.model == "pplx_pro" and owner.search_defaults.incognito


def test_the_search_options_list_the_same_models_before_and_after_linking(owner_client, owner, upstream):
    """Before linking, the shipped catalogue; after, the fetched one (the same snapshot here): one
    list, Max models marked for a Pro account in Options as in Settings; none marked for Max."""
    from tests.perplexity.streams import fixture

    upstream.get("/rest/models/config").respond(
        content=fixture("jacob-bd__scripts__reference_model_config.json"),
        headers={"content-type": "application/json"},
    )

    def lists() -> tuple[list[str], list[str]]:
        found = []
        for name in ("search:home", "accounts:settings"):
            page = owner_client.get(reverse(name)).content.decode()
            select = page[page.index('<select name="model"') :]
            found.append(re.findall(r"<option [^>]*>([^<]*)</option>", select[: select.index("</select>")]))
        return found[0], found[1]

    options, settings_list = lists()
    assert options == settings_list and "Claude Opus 4.8 · Max" in options and "Claude Sonnet 5" in options
    link(owner_client)
    assert ModelCatalogue.objects.exists()  # fetched at linking
    assert lists() == (options, options)
    PerplexityAccount.objects.filter(user=owner).update(tier="max")
    assert lists()[0] == [name.removesuffix(" · Max") for name in options]


@pytest.mark.django_db(transaction=True)
def test_the_raw_token_is_not_in_the_database_file_nor_the_logs(owner_client, owner, upstream, caplog):
    caplog.set_level(logging.DEBUG)
    link(owner_client)
    post(owner_client, test="1")
    assert TOKEN not in caplog.text and "SECRET-SESSION" not in caplog.text
    if connection.vendor != "sqlite":
        return
    name = Path(settings.DATABASES["default"]["TEST"]["NAME"])
    data = b"".join(p.read_bytes() for p in (name, Path(f"{name}-wal")) if p.exists())
    assert len(data) > 0
    assert b"SECRET-SESSION-TOKEN" not in data
    assert PerplexityAccount.objects.get(user=owner).linked  # and it is there, encrypted


@pytest.mark.django_db
def test_model_choices_follow_a_new_catalogue_and_are_the_callers_own():
    from accounts.services.catalogue import save_catalogue

    def catalogue(label: str) -> dict:
        slot = {"label": label, "non_reasoning_model": "m1", "subscription_tier": "pro"}
        return {"models": {"m1": {"label": label, "mode": "search"}}, "config": [slot]}

    save_catalogue(catalogue("First"))
    choices = services.model_choices()
    assert [c.label for c in choices][1:] == ["First"]
    choices.clear()  # a caller's list: the next caller still gets them all
    assert [c.label for c in services.model_choices()][1:] == ["First"]
    save_catalogue(catalogue("Second"))  # worked out again for a new catalogue
    assert [c.label for c in services.model_choices()][1:] == ["Second"]


@pytest.mark.django_db
def test_the_catalogue_is_read_once_from_its_cache(monkeypatch):
    # another thread can clear the decoded-catalogue cache between a check and a read; the
    # lookup must be one step (this cache answers "yes, it is here" and then loses it)
    import importlib

    module = importlib.import_module(
        "accounts.services.catalogue"
    )  # the package exports a function of that name

    class Cleared(dict):
        def __contains__(self, key):
            return True

        def __getitem__(self, key):
            raise KeyError(key)

    module.save_catalogue({"models": {"m1": {"label": "One", "mode": "search"}}, "config": []})
    cache = Cleared()
    monkeypatch.setattr(module, "_decoded", cache)
    assert module.catalogue()["models"]["m1"]["label"] == "One"


def test_settings_says_just_now_not_0_minutes_ago(owner_client, owner, upstream):
    link(owner_client)
    PerplexityAccount.objects.filter(user=owner).update(last_search_at=timezone.now())
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "<dt>Last search</dt><dd>just now" in page and "0\xa0minutes ago" not in page
    PerplexityAccount.objects.filter(user=owner).update(last_search_at=timezone.now() - timedelta(hours=3))
    assert "3\xa0hours ago" in owner_client.get(reverse("accounts:settings")).content.decode()


def test_odd_session_and_catalogue_fields_are_saved_cleaned(owner_client, owner, upstream):
    """What Perplexity says of the session and its models is upstream text too: a NUL
    (PostgreSQL), a lone surrogate (any database) or an overlong field never stops a link."""
    upstream.get("/api/auth/session").respond(
        text=json.dumps(
            {
                "user": {
                    "id": "acct\u0000-1" + "9" * 200,
                    "email": "me\udc00@example.com",
                    "subscription_tier": "max\u0000" * 20,
                },
                "expires": "2027-01-31T10:00:00Z",
            }
        ),
        headers={"content-type": "application/json"},
    )
    upstream.get("/rest/models/config").respond(
        text=json.dumps({"models": {"pplx_pro": {"mode": "search", "label": "Best\u0000"}}, "config": []}),
        headers={"content-type": "application/json"},
    )
    assert link(owner_client).status_code == 302
    account = PerplexityAccount.objects.get(user=owner)
    assert account.linked and account.email == "me?@example.com"
    assert account.account_id == ("acct-1" + "9" * 200)[:100] and account.tier == ("max" * 20)[:30]
    assert ModelCatalogue.objects.get().data["models"]["pplx_pro"]["label"] == "Best"
