"""pplxweb's protocol client against the local fake Perplexity (tests/fake_perplexity/app.py),
in-process through httpx's ASGI transport: every sign-in delivery, the fixtures replayed in
both framings, and the public API path. (The same fake behind the real server, with pacing,
stalls and dropped sockets, is tests/e2e/.)"""

from __future__ import annotations

import json

import httpx
import pytest

from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity import signin
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import AuthError, ChallengeError, RateLimited, RequestRejected, SignInError
from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.request import AskOptions, AskRequest
from tests.fake_perplexity import app as fake

BASE = "https://fake.perplexity.test"


@pytest.fixture(autouse=True)
def fresh_fake():
    fake.state.update({"ask": {"pace": 0}, "signin": {}, "requests": []})
    yield
    fake.state.update({"ask": {}, "signin": {}, "requests": []})


def client(**kwargs) -> PerplexityClient:
    return PerplexityClient(BASE, BASE, transport=httpx.ASGITransport(app=fake.application), **kwargs)


async def ask(request: AskRequest, api_key: str = "", **kwargs):
    async with client(**kwargs) as c:
        stream = c.ask_api(request, api_key) if api_key else c.ask(request)
        async with stream:
            async for _ in stream:
                pass
        return extract(stream.snapshot, ended=stream.ended, asked=request.options.model)


@pytest.mark.parametrize("delivery", ["json", "cookie", "chunked", "redirect"])
async def test_every_sign_in_delivery_gives_a_session_that_searches(delivery):
    fake.state["signin"] = {"delivery": delivery}
    async with client() as c:
        await signin.start_sign_in(c, "someone@example.com")
        result = await signin.verify_code(c, "someone@example.com", fake.CODE)
        assert result.token == fake.TOKEN and not result.totp_challenge
        cookies = jar.with_session(c.cookies, result.token)  # what linking stores
    answer = await ask(AskRequest("capital of France?"), cookies=cookies)
    assert answer.status == "completed" and answer.answer.endswith("It lies on the Seine.")
    sent = fake.state["requests"][-1]
    assert sent["path"] == "/rest/sse/perplexity_ask"
    assert f"{jar.SESSION_COOKIE}={fake.TOKEN}" in sent["headers"]["cookie"]
    assert "authorization" not in sent["headers"]
    assert json.loads(sent["body"])["query_str"] == "capital of France?"


@pytest.mark.parametrize("delivery", ["totp", "totp-cookie"])
async def test_the_authenticator_step_in_both_deliveries(delivery):
    fake.state["signin"] = {"delivery": delivery}
    async with client() as c:
        await signin.start_sign_in(c, "someone@example.com")
        result = await signin.verify_code(c, "someone@example.com", fake.CODE)
        assert result.totp_challenge == "FAKE-CHALLENGE" and not result.token
        assert await signin.verify_totp(c, result.totp_challenge, fake.TOTP_CODE) == fake.TOKEN


async def test_wrong_codes_and_a_missing_csrf_cookie_are_refused():
    async with client() as c:
        await signin.start_sign_in(c, "someone@example.com")
        with pytest.raises(SignInError):
            await signin.verify_code(c, "someone@example.com", "000000")
    async with client() as c:
        c.csrf_token = "f" * 64  # the token without the cookie it belongs to
        response = await c._call(
            "POST", "/api/auth/signin-email", json={"email": "x@example.com", "csrfToken": c.csrf_token}
        )
        assert response.status_code == 403


@pytest.mark.parametrize(
    ("fixture", "status", "answer"),
    [
        ("smdex__cli-test__ASK1_SSE.from-fixtures-ts.sse", "completed", "OK"),
        ("smdex__cli-test__img-sse-fixture.txt", "completed", "Media generated: 'Small blue square icon'"),
        ("smdex__test__sse-basic.synthetic.txt", "completed", "final answer"),
        ("smdex__test__sse-incremental.synthetic.txt", "completed", "Hello world"),
        ("ak2k__fetch-url__no-completed-marker.events.jsonl", "truncated", "Partial answer before cut"),
    ],
)
@pytest.mark.parametrize("framing", ["crlf", "lf"])
async def test_fixtures_replayed_in_either_framing(fixture, status, answer, framing):
    fake.state["ask"] = {"fixture": fixture, "framing": framing, "pace": 0}
    result = await ask(AskRequest("q"), cookies={jar.SESSION_COOKIE: fake.TOKEN})
    assert (result.status, result.answer) == (status, answer)


async def test_the_api_path_streams_the_agent_api_with_its_sources():
    result = await ask(AskRequest("capital of France?", AskOptions(mode="pro")), api_key=fake.API_KEY)
    assert result.status == "completed"
    assert result.answer == "".join(fake.DEFAULT_ANSWER)
    assert [s.title for s in result.sources] == ["Paris - Wikipedia", "Paris population"]
    assert result.model == "perplexity/sonar"
    sent = fake.state["requests"][-1]
    assert sent["path"] == "/v1/agent"
    assert sent["headers"]["authorization"] == f"Bearer {fake.API_KEY}"
    assert "cookie" not in sent["headers"]
    body = json.loads(sent["body"])
    assert body["stream"] is True and body["input"] == "capital of France?" and body["preset"] == "low"
    assert body["tool_choice"] == "required" and body["tools"][0]["type"] == "web_search"


@pytest.mark.parametrize(
    ("key", "fault", "error"),
    [
        ("pplx-wrong", "", AuthError),
        (fake.API_KEY, "429", RateLimited),
        (fake.API_KEY, "403", ChallengeError),
        (fake.API_KEY, "400", RequestRejected),
    ],
)
async def test_the_api_path_faults(key, fault, error):
    fake.state["ask"] = {"fault": fault, "pace": 0}
    with pytest.raises(error):
        await ask(AskRequest("q"), api_key=key)


async def test_the_api_path_without_a_finish_is_truncated():
    fake.state["ask"] = {"fault": "no_completed", "pace": 0}
    result = await ask(AskRequest("q"), api_key=fake.API_KEY)
    assert result.status == "truncated" and result.answer.startswith("Paris is the")
