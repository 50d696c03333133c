"""`manage.py doctor`: the linked session, the model table, a probe ask and an offline capture
report, in plain sentences; the owner's Settings shows the last result."""

from __future__ import annotations

import io
import json

import pytest
import respx
from django.core.management import CommandError, call_command
from django.urls import reverse

from accounts.models import PerplexityAccount
from pplxweb import doctor
from tests.fake_perplexity.streams_2026 import research_events
from tests.perplexity.streams import FIXTURES, answer_stream, fixture, sse

BASE = "https://perplexity.test"
SSE = {"content-type": "text/event-stream; charset=utf-8"}
V2 = json.loads((FIXTURES / "escapeWu__catalog__model_config_v2.json").read_text())
SIGNED_IN = {
    "user": {"id": "u1", "email": "me@example.com", "subscription_tier": "max"},
    "expires": "2027-03-01T00:00:00Z",
}
pytestmark = pytest.mark.django_db


@pytest.fixture
def linked(owner, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return PerplexityAccount.objects.create(
        user=owner,
        email="me@example.com",
        session=json.dumps({"cookies": {"__Secure-next-auth.session-token": "T"}}),
    )


@pytest.fixture
def upstream():
    with respx.mock(base_url=BASE, assert_all_called=False) as mock:
        yield mock


def run(*args) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("doctor", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc.returncode
    return out.getvalue(), 0


def test_a_healthy_link_and_the_model_table_with_what_changed(linked, upstream, owner_client):
    upstream.get("/api/auth/session").respond(json=SIGNED_IN)
    upstream.get("/rest/models/config/v2").respond(json=V2)
    out, code = run()
    assert code == 0
    assert "signed in as me@example.com (max), valid until 2027-03-01" in out
    assert f"lists {len(V2['models'])} models" in out
    assert "Since the cached table: added" in out  # the shipped fallback is older than the v2 snapshot
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "Protocol check: all fine" in page and "signed in as me@example.com" in page


def test_a_signed_out_session_fails_in_a_sentence(linked, upstream, owner_client):
    upstream.get("/api/auth/session").respond(json={})
    out, code = run()
    assert code == 1 and "FAIL  Perplexity says the linked session is signed out. Re-link in Settings." in out
    page = owner_client.get(reverse("accounts:settings")).content.decode()
    assert "Protocol check: needs a look" in page


def test_a_challenge_and_a_refused_version_are_named(linked, upstream):
    route = upstream.get("/api/auth/session")
    route.respond(
        403, html="<html><title>Just a moment...</title></html>", headers={"cf-mitigated": "challenge"}
    )
    assert "Cloudflare check blocked this server" in run()[0]
    route.respond(400, json={"detail": "unsupported version"})
    assert "request (headers or client version" in run()[0]


def test_the_probe_asks_once_and_reports_what_it_read(linked, upstream):
    upstream.get("/api/auth/session").respond(json=SIGNED_IN)
    upstream.get("/rest/models/config/v2").respond(json=V2)
    ask = upstream.post("/rest/sse/perplexity_ask").respond(
        headers=SSE, content=fixture("smdex__cli-test__ASK1_SSE.from-fixtures-ts.sse")
    )
    out, code = run("--probe")
    assert code == 0 and ask.call_count == 1
    assert "The stream reads as completed: 2 characters of answer in workflow_root" in out
    events = answer_stream(["x"])
    events[-1]["brand_new_field"] = True
    ask.respond(headers=SSE, content=sse(events))
    assert "Unknown fields in the stream: brand_new_field." in run("--probe")[0]


def test_no_link_no_owner_and_the_offline_capture(tmp_path, owner, settings):
    settings.DATA_DIR = tmp_path
    out, code = run()
    assert code == 1 and "Link your Perplexity account" in out
    path = tmp_path / "research.sse"
    path.write_bytes(sse(research_events(replaces=10)))
    out, code = run("--capture", str(path))
    assert code == 0 and "a 15000-character report" in out and "in ask_text_0_markdown, ask_text" in out
    (tmp_path / "junk").write_text("<html>nope</html>")
    out, code = run("--capture", str(tmp_path / "junk"))
    assert code == 1 and "No answer events" in out
    assert run("--capture", str(tmp_path / "missing"))[1] == 2
    assert doctor.last()["lines"][0][1].startswith("Link your")  # an offline report is not the link's check


def test_nobody_owns_it_yet(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    assert run()[1] == 2
