"""The client against respx routes shaped like docs/protocol.md: sign-in, session, models, ask, faults."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx

from pplxweb.perplexity import signin
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import (
    AuthError,
    ChallengeError,
    NetworkError,
    ProtocolError,
    RateLimited,
    RequestRejected,
    RunGone,
    SignInError,
    Timeout,
    UpstreamError,
)
from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.request import AskOptions, AskRequest, FollowUp
from pplxweb.perplexity.stream import Timeouts
from tests.perplexity.streams import PacedBody, answer_stream, sse

BASE = "https://pplx.test"
API = "https://api.pplx.test"
TOKEN = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..test-token.payload.tag"
SSE = {"content-type": "text/event-stream; charset=utf-8"}
CHALLENGE_HTML = "<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>cdn-cgi/challenge-platform</body></html>"


def client(**kwargs) -> PerplexityClient:
    return PerplexityClient(BASE, API, impersonate="off", **kwargs)


@pytest.fixture
def mock():
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def csrf_route(mock):
    return mock.get("/api/auth/csrf").respond(
        json={"csrfToken": "c" * 64},
        headers={"set-cookie": "__Host-next-auth.csrf-token=abc%7Cdef; Path=/; Secure; HttpOnly"},
    )


async def test_sign_in_with_the_token_in_json(mock):
    csrf_route(mock)
    email = mock.post("/api/auth/signin-email").respond(json={"success": "Email sign in triggered"})
    otp = mock.post("/api/auth/signin-otp").respond(json={"token": TOKEN, "status": "success"})
    async with client() as c:
        await signin.start_sign_in(c, "me@example.com")
        result = await signin.verify_code(c, "me@example.com", " 9f3e2-knzol ".strip())
    assert result.token == TOKEN and result.totp_challenge is None
    sent = json.loads(email.calls.last.request.content)
    assert sent == {"email": "me@example.com", "csrfToken": "c" * 64}
    assert "__Host-next-auth.csrf-token=abc%7Cdef" in email.calls.last.request.headers["cookie"]
    assert json.loads(otp.calls.last.request.content) == {
        "email": "me@example.com",
        "otp": "9f3e2-knzol",
        "csrfToken": "c" * 64,
    }
    assert "authorization" not in otp.calls.last.request.headers


async def test_sign_in_with_the_token_only_in_set_cookie(mock):
    csrf_route(mock)
    mock.post("/api/auth/signin-email").respond(json={})
    mock.post("/api/auth/signin-otp").respond(
        json={"status": "success"},
        headers=[("set-cookie", f"__Secure-next-auth.session-token={TOKEN}; Path=/; Secure; HttpOnly"),
                 ("set-cookie", "pplx.visitor-id=v1; Path=/")],
    )  # fmt: skip
    async with client() as c:
        await signin.start_sign_in(c, "me@example.com")
        assert (await signin.verify_code(c, "me@example.com", "123456")).token == TOKEN
        assert c.cookies["pplx.visitor-id"] == "v1"


async def test_sign_in_with_a_chunked_session_cookie(mock):
    csrf_route(mock)
    mock.post("/api/auth/signin-email").respond(json={})
    mock.post("/api/auth/signin-otp").respond(
        json={"status": "success"},
        headers=[("set-cookie", f"__Secure-next-auth.session-token.1={TOKEN[30:]}; Path=/"),
                 ("set-cookie", f"__Secure-next-auth.session-token.0={TOKEN[:30]}; Path=/")],
    )  # fmt: skip
    async with client() as c:
        await signin.start_sign_in(c, "me@example.com")
        assert (await signin.verify_code(c, "me@example.com", "123456")).token == TOKEN


async def test_sign_in_through_one_redirect_hop(mock):
    csrf_route(mock)
    mock.post("/api/auth/signin-email").respond(json={})
    mock.post("/api/auth/signin-otp").respond(302, headers={"location": "/api/auth/session"})
    mock.get("/api/auth/session").respond(
        json={"user": {"id": "u"}},
        headers={"set-cookie": f"__Secure-next-auth.session-token={TOKEN}; Path=/"},
    )
    async with client() as c:
        await signin.start_sign_in(c, "me@example.com")
        assert (await signin.verify_code(c, "me@example.com", "123456")).token == TOKEN


async def test_sign_in_with_an_authenticator_challenge(mock):
    csrf_route(mock)
    mock.post("/api/auth/signin-email").respond(json={})
    mock.post("/api/auth/signin-otp").respond(
        302, headers={"location": "/auth/totp-challenge?token=CHALLENGE1"}
    )
    verify = mock.post("/api/auth/totp-challenge/verify").respond(
        json={"redirect": "/api/auth/callback/email?x=1"}
    )
    mock.get("/api/auth/callback/email").respond(
        302,
        headers={
            "location": "/",
            "set-cookie": f"__Secure-next-auth.session-token={TOKEN}; Path=/",
        },
    )
    mock.get("/").respond(200, text="home")
    async with client() as c:
        await signin.start_sign_in(c, "me@example.com")
        result = await signin.verify_code(c, "me@example.com", "123456")
        assert result.totp_challenge == "CHALLENGE1" and result.token is None
        assert await signin.verify_totp(c, "CHALLENGE1", "654321") == TOKEN
    assert json.loads(verify.calls.last.request.content) == {
        "token": "CHALLENGE1",
        "code": "654321",
    }


async def test_wrong_authenticator_code(mock):
    mock.post("/api/auth/totp-challenge/verify").respond(json={"error": "invalid"})
    async with client() as c:
        with pytest.raises(SignInError, match="authenticator code"):
            await signin.verify_totp(c, "CH", "000000")


@pytest.mark.parametrize(
    ("response", "error", "needle"),
    [
        (
            httpx.Response(401, json={"text": "Invalid or expired code"}),
            SignInError,
            "Invalid or expired code",
        ),
        (httpx.Response(400, json={"error_code": "OTP_EXPIRED"}), SignInError, "OTP_EXPIRED"),
        (
            httpx.Response(403, text=CHALLENGE_HTML, headers={"content-type": "text/html"}),
            ChallengeError,
            "Cloudflare",
        ),
        (httpx.Response(502, text="bad gateway"), UpstreamError, "502"),
        (
            httpx.Response(302, headers={"location": "/api/auth/error?error=Verification"}),
            SignInError,
            "expired",
        ),
        (httpx.Response(200, json={"status": "success"}), SignInError, "sent no session"),
    ],
)
async def test_code_step_failures_say_what_happened(mock, response, error, needle):
    mock.post("/api/auth/signin-otp").mock(return_value=response)
    async with client() as c:
        with pytest.raises(error, match=needle):
            await signin.verify_code(c, "me@example.com", "123456")


async def test_challenge_at_the_first_step(mock):
    mock.get("/api/auth/csrf").respond(
        403, text=CHALLENGE_HTML, headers={"content-type": "text/html", "cf-mitigated": "challenge"}
    )
    async with client() as c:
        with pytest.raises(ChallengeError):
            await signin.start_sign_in(c, "me@example.com")


async def test_unknown_email_is_refused_with_perplexitys_words(mock):
    csrf_route(mock)
    mock.post("/api/auth/signin-email").respond(400, json={"text": "No account for this email"})
    async with client() as c:
        with pytest.raises(SignInError, match="No account for this email"):
            await signin.start_sign_in(c, "nobody@example.com")


async def test_network_down(mock):
    mock.get("/api/auth/csrf").mock(side_effect=httpx.ConnectError("refused"))
    async with client() as c:
        with pytest.raises(NetworkError, match="could not reach Perplexity"):
            await signin.start_sign_in(c, "me@example.com")


async def test_session_info_signed_in_and_out(mock):
    route = mock.get("/api/auth/session")
    route.respond(
        json={
            "user": {"id": "acct-1", "email": "me@example.com", "subscription_tier": "Max"},
            "expires": "2027-01-01T00:00:00Z",
        }
    )
    async with client(cookies={"__Secure-next-auth.session-token": TOKEN}) as c:
        info = await c.session_info()
        assert (info.user_id, info.email, info.tier, info.expires) == (
            "acct-1",
            "me@example.com",
            "max",
            "2027-01-01T00:00:00Z",
        )
        assert f"__Secure-next-auth.session-token={TOKEN}" in route.calls.last.request.headers["cookie"]
        route.respond(json={})
        with pytest.raises(AuthError, match="signed out"):
            await c.session_info()


async def test_models_catalogue(mock):
    from tests.perplexity.streams import fixture

    mock.get("/rest/models/config").respond(
        content=fixture("smdex__cli-test__models-config-capture.json"),
        headers={"content-type": "application/json"},
    )
    async with client() as c:
        catalogue = await c.models()
    assert "pplx_pro" in catalogue["models"]


def ask_route(mock, *args, **kwargs):
    return mock.post("/rest/sse/perplexity_ask").respond(*args, **kwargs)


async def collect(stream):
    snapshots = [s async for s in stream]
    return snapshots


async def test_ask_sends_the_session_as_a_cookie_never_as_a_bearer(mock):
    route = ask_route(mock, content=sse(answer_stream(["Hello ", "world"])), headers=SSE)
    request = AskRequest(
        "what is x?",
        AskOptions(
            model="claude50opus",
            recency="week",
            include_domains=("a.org",),
            exclude_domains=("b.com",),
        ),
    )
    async with client(
        cookies={
            "__Secure-next-auth.session-token.0": TOKEN[:20],
            "__Secure-next-auth.session-token.1": TOKEN[20:],
            "cf_clearance": "cf",
        },
        account_id="acct-1",
    ) as c:
        stream = c.ask(request)
        snapshots = await collect(stream)
    sent = route.calls.last.request
    assert "authorization" not in sent.headers
    assert f"__Secure-next-auth.session-token={TOKEN}" in sent.headers["cookie"]
    assert "cf_clearance=cf" in sent.headers["cookie"]
    assert sent.headers["x-request-id"] == request.frontend_uuid
    assert sent.headers["x-pplx-account"] == "acct-1"
    body = json.loads(sent.content)
    assert body["query_str"] == "what is x?"
    params = body["params"]
    assert params["model_preference"] == "claude50opus" and params["mode"] == "copilot"
    assert params["is_incognito"] is True and params["query_source"] == "home"
    assert params["search_recency_filter"] == "week"
    assert params["search_domain_filter"] == ["a.org", "-b.com"]
    assert params["frontend_uuid"] == request.frontend_uuid and params["version"] == "2.18"
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "completed" and result.answer == "Hello world"
    assert len(snapshots) >= 1 and stream.cut == ""


async def test_follow_up_sends_the_thread_ids(mock):
    route = ask_route(mock, content=sse(answer_stream(["ok"])), headers=SSE)
    async with client() as c:
        await collect(c.ask(AskRequest("and then?", follow_up=FollowUp("b-prev", "rw-1"))))
    params = json.loads(route.calls.last.request.content)["params"]
    assert params["query_source"] == "followup" and params["followup_source"] == "link"
    assert params["last_backend_uuid"] == "b-prev" and params["read_write_token"] == "rw-1"
    assert "frontend_context_uuid" not in params and "dsl_query" not in params


async def test_dates_replace_recency_and_use_the_us_format(mock):
    from datetime import date

    route = ask_route(mock, content=sse(answer_stream(["ok"])), headers=SSE)
    async with client() as c:
        await collect(
            c.ask(
                AskRequest(
                    "q",
                    AskOptions(recency="day", after=date(2025, 3, 1), before=date(2025, 12, 31)),
                )
            )
        )
    params = json.loads(route.calls.last.request.content)["params"]
    assert params["search_recency_filter"] is None
    assert (params["search_after_date_filter"], params["search_before_date_filter"]) == (
        "3/1/2025",
        "12/31/2025",
    )


async def test_the_rotated_session_cookie_is_kept(mock):
    ask_route(
        mock,
        content=sse(answer_stream(["ok"])),
        headers={**SSE, "set-cookie": "__Secure-next-auth.session-token=NEW; Path=/"},
    )
    async with client(cookies={"__Secure-next-auth.session-token": TOKEN}) as c:
        await collect(c.ask(AskRequest("q")))
        assert c.cookies["__Secure-next-auth.session-token"] == "NEW"


@pytest.mark.parametrize(
    ("response", "error", "needle"),
    [
        (httpx.Response(401, json={}), AuthError, "Re-link in Settings"),
        (httpx.Response(403, json={"error_code": "FORBIDDEN"}), AuthError, "Re-link"),
        (
            httpx.Response(403, text=CHALLENGE_HTML, headers={"content-type": "text/html"}),
            ChallengeError,
            "Cloudflare",
        ),
        (
            httpx.Response(403, text="x", headers={"cf-mitigated": "challenge"}),
            ChallengeError,
            "Cloudflare",
        ),
        (httpx.Response(429, headers={"retry-after": "7"}), RateLimited, "try again in 7 s"),
        (httpx.Response(400, json={"detail": "bad"}), RequestRejected, "may need an update"),
        (httpx.Response(500, text="oops"), UpstreamError, "server error"),
        (
            httpx.Response(200, text=CHALLENGE_HTML, headers={"content-type": "text/html"}),
            ChallengeError,
            "Cloudflare",
        ),
        (
            httpx.Response(200, text="<html>maintenance</html>", headers={"content-type": "text/html"}),
            ProtocolError,
            "web page",
        ),
    ],
)
async def test_ask_faults_raise_the_sentence_a_person_sees(mock, response, error, needle):
    ask_route(mock).mock(return_value=response)
    async with client() as c:
        with pytest.raises(error, match=needle):
            await collect(c.ask(AskRequest("q")))


async def test_rate_limit_error_carries_retry_after(mock):
    ask_route(mock).mock(return_value=httpx.Response(429, headers={"retry-after": "30"}))
    async with client() as c:
        with pytest.raises(RateLimited) as info:
            await collect(c.ask(AskRequest("q")))
    assert info.value.retry_after == 30


async def test_a_socket_dropped_before_any_status_is_retried_exactly_once(mock):
    route = ask_route(mock)
    route.side_effect = [
        httpx.RemoteProtocolError("Server disconnected"),
        httpx.Response(200, content=sse(answer_stream(["ok"])), headers=SSE),
    ]
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        await collect(stream)
    assert route.call_count == 2
    assert extract(stream.snapshot, ended=True).answer == "ok"
    route.side_effect = [
        httpx.RemoteProtocolError("x"),
        httpx.RemoteProtocolError("x"),
        httpx.Response(200),
    ]
    route.reset()
    async with client() as c:
        with pytest.raises(NetworkError):
            await collect(c.ask(AskRequest("q")))
    assert route.call_count == 2


async def test_no_retry_once_a_status_arrived(mock):
    route = ask_route(mock)
    route.side_effect = [
        httpx.Response(500),
        httpx.Response(200, content=sse(answer_stream(["ok"])), headers=SSE),
    ]
    async with client() as c:
        with pytest.raises(UpstreamError):
            await collect(c.ask(AskRequest("q")))
    assert route.call_count == 1


async def test_a_connection_dropped_mid_answer_keeps_the_partial_answer(mock):
    events = answer_stream(["Hello ", "wor", "ld"], complete=False)
    body = sse(events[:4], end=False) + b'event: message\r\ndata: {"blocks": [{"intended_'
    ask_route(mock).mock(
        return_value=httpx.Response(
            200, headers=SSE, stream=PacedBody([body], then=httpx.RemoteProtocolError("peer closed"))
        )
    )
    rejoin = mock.post("/rest/sse/perplexity_ask/reconnect/b-1").respond(403, json={})
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        await collect(stream)
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "truncated" and result.answer == "Hello wor"
    assert "dropped" in stream.cut and "no longer has this answer's run" in stream.cut
    assert rejoin.call_count == 1 and json.loads(rejoin.calls.last.request.content) == {
        "reconnectInitialSnapshot": True
    }


def whole(events: list[dict], upto: int) -> dict:
    """What a rejoin's first frame is: the run so far as one snapshot, its blocks whole."""
    from pplxweb.perplexity.merge import merge_all

    snapshot = merge_all(events[:upto])
    text = snapshot.markdown("ask_text") or ""
    top = {k: v for k, v in snapshot.top.items() if k != "blocks"}
    blocks = [
        {"intended_usage": u, b.kind: b.doc} for u, b in snapshot.blocks.items() if b.kind != "markdown_block"
    ]
    blocks.append(
        {"intended_usage": "ask_text", "markdown_block": {"chunks": [text], "chunk_starting_offset": 0}}
    )
    return {**top, "status": "PENDING", "blocks": blocks}


async def test_a_connection_dropped_mid_answer_is_rejoined_once_and_ends_whole(mock):
    events = answer_stream(["Hello ", "wor", "ld"], complete=True)
    body = sse(events[:4], end=False)
    ask_route(mock).mock(
        return_value=httpx.Response(200, headers=SSE, stream=PacedBody([body], then=httpx.ReadError("reset")))
    )
    rest = [whole(events, 5), *events[5:]]
    for event in rest[1:]:  # the rest of the chunks, as the run goes on (one text chunk now)
        for block in event.get("blocks", []):
            if "markdown_block" in block and "chunk_starting_offset" in block["markdown_block"]:
                block["markdown_block"]["chunk_starting_offset"] = 1
    rejoin = mock.post("/rest/sse/perplexity_ask/reconnect/b-1").respond(headers=SSE, content=sse(rest))
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        await collect(stream)
    result = extract(stream.snapshot, ended=stream.ended)
    assert rejoin.call_count == 1 and stream.rejoined
    assert result.status == "completed" and result.answer == "Hello world" and stream.cut == ""


@pytest.mark.parametrize(
    ("reply", "sentence"),
    [
        (httpx.Response(200, headers={"content-type": "text/html"}, text="<html>hi</html>"), "web page"),
        (httpx.Response(200, headers=SSE, content=b""), "sent nothing when pplxweb rejoined"),
        (
            httpx.Response(
                200, headers=SSE, content=sse([{"backend_uuid": "someone-else", "status": "PENDING"}])
            ),
            "another answer's run",
        ),
        (httpx.ConnectError("refused"), "could not reach Perplexity"),
    ],
)
async def test_a_rejoin_that_goes_wrong_keeps_what_arrived_with_a_sentence(mock, reply, sentence):
    events = answer_stream(["Hello ", "wor", "ld"], complete=False)
    body = sse(events[:4], end=False)
    ask_route(mock).mock(
        return_value=httpx.Response(200, headers=SSE, stream=PacedBody([body], then=httpx.ReadError("reset")))
    )
    route = mock.post("/rest/sse/perplexity_ask/reconnect/b-1")
    route.mock(side_effect=[reply, reply]) if isinstance(reply, Exception) else route.mock(return_value=reply)
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        await collect(stream)
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "truncated" and result.answer == "Hello wor"
    assert "dropped" in stream.cut and sentence in stream.cut


async def test_rejoining_a_finished_run_gives_its_one_completed_frame(mock):
    events = answer_stream(["Hello ", "world"])
    final = whole(events, len(events))
    final.update(status="COMPLETED", final=True, final_sse_message=True)
    mock.post("/rest/sse/perplexity_ask/reconnect/b-1").respond(headers=SSE, content=sse([final]))
    async with client() as c:
        stream = c.rejoin(AskRequest("q"), "b-1")
        await collect(stream)
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "completed" and result.answer == "Hello world"
    with pytest.raises(RunGone):
        async with client() as c:
            await collect(c.rejoin(AskRequest("q"), "../../etc"))


async def test_a_stall_is_a_timeout_and_the_partial_answer_stays(mock):
    body = sse(answer_stream(["Hello"], complete=False), end=False)
    ask_route(mock).mock(return_value=httpx.Response(200, headers=SSE, stream=PacedBody([body], stall=5)))
    async with client(timeouts=Timeouts(read_gap=0.2)) as c:
        stream = c.ask(AskRequest("q"))
        with pytest.raises(Timeout, match="sent nothing for"):
            await collect(stream)
    assert extract(stream.snapshot).answer == "Hello"


async def test_a_stream_that_never_ends_hits_the_overall_cap(mock):
    body = sse(answer_stream(["x"], complete=False), end=False)
    chunks = [body] + [b": ping\n\n"] * 1000
    ask_route(mock).mock(return_value=httpx.Response(200, headers=SSE, stream=PacedBody(chunks, pause=0.01)))
    async with client(timeouts=Timeouts(read_gap=1, overall=0.3)) as c:
        with pytest.raises(Timeout, match="too long"):
            await collect(c.ask(AskRequest("q")))


async def test_after_completed_a_missing_end_of_stream_does_not_hang(mock):
    body = sse(answer_stream(["done"]), end=False)
    ask_route(mock).mock(return_value=httpx.Response(200, headers=SSE, stream=PacedBody([body], stall=10)))
    async with client(timeouts=Timeouts(read_gap=10, drain=0.1)) as c:
        stream = c.ask(AskRequest("q"))
        await asyncio.wait_for(collect(stream), 3)
    assert extract(stream.snapshot, ended=stream.ended).status == "completed"


async def test_malformed_frames_are_skipped_and_counted(mock):
    body = b"data: {broken\n\ndata: [1]\n\n" + sse(answer_stream(["ok"]))
    ask_route(mock, content=body, headers=SSE)
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        await collect(stream)
    assert stream.skipped == 2
    assert extract(stream.snapshot, ended=True).answer == "ok"


async def test_an_empty_stream_is_asked_again_once_then_perplexity_sent_nothing(mock):
    route = ask_route(mock, content=b"", headers=SSE)
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        with pytest.raises(ProtocolError, match="sent nothing"):
            await collect(stream)
    assert route.call_count == 2 and stream.retried


@pytest.mark.parametrize(
    "first", [b"", sse([{"text": "Error in processing query."}])], ids=["empty", "error-frame"]
)
async def test_an_empty_stream_or_an_error_frame_then_an_answer_gives_the_answer(mock, first):
    ask_route(mock).mock(
        side_effect=[
            httpx.Response(200, headers=SSE, content=first),
            httpx.Response(200, headers=SSE, content=sse(answer_stream(["Hello"]))),
        ]
    )
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        await collect(stream)
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "completed" and result.answer == "Hello" and stream.retried


async def test_a_bare_error_frame_is_asked_again_once_then_fails_with_a_sentence(mock):
    error = sse([{"text": "Error in processing query."}])
    route = ask_route(mock, content=error, headers=SSE)
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        await collect(stream)
    result = extract(stream.snapshot, ended=stream.ended)
    assert route.call_count == 2
    assert result.status == "failed" and result.answer == ""
    assert "could not process this question" in result.error and "Error in processing query" in result.error


async def test_leaving_the_loop_closes_the_upstream_response(mock):
    body = sse(answer_stream(["a", "b", "c"]))
    upstream = PacedBody([body[:200], body[200:400], body[400:]], pause=0.01)
    ask_route(mock).mock(return_value=httpx.Response(200, headers=SSE, stream=upstream))
    async with client() as c, c.ask(AskRequest("q")) as stream:
        async for _ in stream:
            break
    assert upstream.closed


async def test_cancelling_the_task_closes_the_upstream_response(mock):
    body = sse(answer_stream(["a"], complete=False), end=False)
    upstream = PacedBody([body], stall=30)
    ask_route(mock).mock(return_value=httpx.Response(200, headers=SSE, stream=upstream))
    async with client() as c:
        task = asyncio.create_task(collect(c.ask(AskRequest("q"))))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert upstream.closed


def agent_stream() -> bytes:
    """An Agent API stream as docs/protocol.md §13.4 describes it: typed events, one per data line, no [DONE]."""
    response = {"id": "resp_1", "object": "response", "model": "openai/gpt-5.6-sol", "status": "in_progress"}
    result = {"id": 1, "title": "Paris", "url": "https://en.wikipedia.org/wiki/Paris", "date": "2025-01-01",
              "snippet": "Capital"}  # fmt: skip
    events = [
        {"type": "response.created", "response": response},
        {"type": "response.reasoning.search_results", "results": [result]},
        {"type": "response.something_new", "detail": "ignored"},
        {"type": "response.output_text.delta", "item_id": "m", "output_index": 1, "content_index": 0, "delta": "Paris is "},
        {"type": "response.output_text.delta", "item_id": "m", "output_index": 1, "content_index": 0, "delta": "the capital [1]."},
        {"type": "response.completed", "response": {**response, "status": "completed",
         "output": [{"type": "search_results", "results": [result]}]}},
    ]  # fmt: skip
    return b"".join(
        f"data: {json.dumps({**e, 'sequence_number': n})}\n\n".encode() for n, e in enumerate(events)
    )


async def test_api_key_path_streams_the_agent_api_with_search_forced():
    with respx.mock(base_url=API) as api:
        route = api.post("/v1/agent").respond(content=agent_stream(), headers=SSE)
        async with client(cookies={"__Secure-next-auth.session-token": TOKEN}) as c:
            options = AskOptions(mode="auto", recency="month", exclude_domains=("example.com",))
            stream = c.ask_api(AskRequest("capital of France?", options), "pplx-KEY123456789")
            await collect(stream)
    sent = route.calls.last.request
    assert sent.headers["authorization"] == "Bearer pplx-KEY123456789"
    assert "cookie" not in sent.headers  # the session never goes to the API host
    body = json.loads(sent.content)
    assert body["stream"] is True and body["preset"] == "fast" and body["input"] == "capital of France?"
    assert body["tool_choice"] == "required"  # grounded: the model may not skip the search
    assert body["tools"] == [{"type": "web_search", "filters": {
        "search_recency_filter": "month", "search_domain_filter": ["-example.com"], "search_language_filter": ["en"]}}]  # fmt: skip
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "completed"
    assert result.answer == "Paris is the capital [1]."
    assert [s.url for s in result.sources] == ["https://en.wikipedia.org/wiki/Paris"]
    assert result.sources[0].title == "Paris"
    assert result.model == "openai/gpt-5.6-sol"


def test_each_mode_asks_its_preset_and_no_sources_offers_no_search():
    from pplxweb.perplexity.request import agent_body

    assert [agent_body(AskRequest("q", AskOptions(mode=m)))["preset"] for m in ("auto", "pro", "research")] == [
        "fast", "low", "high"]  # fmt: skip
    assert agent_body(AskRequest("q", AskOptions(model="pplx_alpha")))["preset"] == "high"
    writing = agent_body(AskRequest("q", AskOptions(sources=())))
    assert "tools" not in writing and "tool_choice" not in writing


async def test_api_key_failure_inside_the_stream_is_a_failed_answer():
    failed = b'data: {"type": "response.failed", "sequence_number": 0, "error": {"message": "Model overloaded"}}\n\n'
    with respx.mock(base_url=API) as api:
        api.post("/v1/agent").respond(content=failed, headers=SSE)
        async with client() as c:
            stream = c.ask_api(AskRequest("q"), "pplx-KEY123456789")
            await collect(stream)
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "failed" and "Model overloaded" in result.error


async def test_api_key_refused():
    with respx.mock(base_url=API) as api:
        api.post("/v1/agent").respond(
            401, json={"error": {"message": "Invalid API key", "type": "forbidden", "code": 401}}
        )
        async with client() as c:
            with pytest.raises(AuthError):
                await collect(c.ask_api(AskRequest("q"), "pplx-bad"))


async def test_a_huge_report_is_kept_up_to_its_limit_with_a_note(mock):
    from pplxweb.perplexity.research import REPORT_LIMIT
    from tests.fake_perplexity.streams_2026 import _asset, report_text, research_events

    events = research_events(report_text(2_000), replaces=4)
    huge = "# Huge\n\n" + "x" * (7 * 1024 * 1024)  # 7 MB, in one frame (frames stop at 8 MB)
    events[-1]["text"] = json.dumps([{"step_type": "RESEARCH_ANSWER", "assets": [_asset(huge, True)]}])
    ask_route(mock, content=sse(events), headers=SSE)
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        await collect(stream)
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "completed"
    assert result.report.startswith("# Huge") and len(result.report) == REPORT_LIMIT
    assert result.report.endswith("longer than pplxweb keeps, 4,000,000 characters; the rest was left out.)*")
