"""A local stand-in for Perplexity that speaks its web protocol (shared/protocol.md).

A plain ASGI app, served by daphne on a loopback port in tests (tests/e2e/conftest.py) and by
hand for development:

    .venv/bin/python -m daphne -b 127.0.0.1 -p 8765 tests.fake_perplexity.app:application

The session token it accepts is TOKEN; the e-mailed code is CODE. Tests steer it with
`POST /_control` (JSON: {"ask": {...}} for the next asks) and read what pplxweb sent with
`GET /_requests`. Ask behaviour: {"answer": [chunks], "pace": seconds, "fault": name} where
fault is one of FAULTS.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

TOKEN = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..FAKE-PERPLEXITY-SESSION.tag"
CODE = "123456"
FAULTS = (
    "401",
    "403",
    "429",
    "400",
    "500",
    "reset_before_status",
    "reset_mid_stream",
    "malformed",
    "stall",
    "endless",
    "no_completed",
)
DEFAULT_ANSWER = [
    "Paris is the **capital** of France [1]. ",
    "It has about two million people [2].\n\n",
    "It lies on the Seine.",
]

state: dict[str, Any] = {"ask": {}, "requests": []}


def events(answer: list[str], model: str = "pplx_pro", complete: bool = True) -> list[dict]:
    sources = [
        {
            "name": "Paris - Wikipedia",
            "url": "https://en.wikipedia.org/wiki/Paris",
            "snippet": "Paris is the capital of France.",
            "timestamp": "",
        },
        {
            "name": "Paris population",
            "url": "https://example.org/paris",
            "snippet": "About 2.1 million.",
            "timestamp": "",
        },
    ]
    out: list[dict] = [
        {"backend_uuid": "fake-b-1", "context_uuid": "fake-c", "read_write_token": "fake-rw", "thread_url_slug": "fake-slug",
         "display_model": model, "user_selected_model": model, "status": "PENDING"},
        {"status": "PENDING", "blocks": [{"intended_usage": "pro_search_steps", "plan_block": {"goals": [{"description": "Look it up"}],
         "steps": [{"step_type": "SEARCH_WEB", "search_web_content": {"queries": [{"query": "capital of France"}]}}]}}]},
        {"status": "PENDING", "blocks": [{"intended_usage": "web_results", "web_result_block": {"web_results": sources}}]},
    ]  # fmt: skip
    for i, chunk in enumerate(answer):
        out.append(
            {
                "status": "PENDING",
                "blocks": [
                    {
                        "intended_usage": "ask_text",
                        "markdown_block": {"chunks": [chunk], "chunk_starting_offset": i},
                    }
                ],
            }
        )
    out.append({"status": "PENDING", "final": True})
    if complete:
        out.append({"status": "COMPLETED", "final": True, "final_sse_message": True, "related_queries": ["What is the population of Paris?"],
                    "blocks": [{"intended_usage": "ask_text", "markdown_block": {"chunks": answer, "chunk_starting_offset": 0, "answer": "".join(answer)}}]})  # fmt: skip
    return out


def frame(event: dict) -> bytes:
    return f"event: message\r\ndata: {json.dumps(event)}\r\n\r\n".encode()


async def application(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        return
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    path = scope["path"]
    if not path.startswith("/_"):
        state["requests"].append({"path": path, "headers": headers, "body": body.decode("utf-8", "replace")})
    handler = ROUTES.get((scope["method"], path), not_found)
    await handler(send, headers, body)


async def respond(
    send, status: int, payload: Any = None, headers: list | None = None, raw: bytes | None = None
) -> None:
    content = raw if raw is not None else json.dumps(payload if payload is not None else {}).encode()
    kind = b"text/html" if raw is not None else b"application/json"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": content})


def signed_in(headers: dict) -> bool:
    return TOKEN in headers.get("cookie", "")


async def not_found(send, headers, body) -> None:
    await respond(send, 404, {"error": "not found"})


async def control(send, headers, body) -> None:
    state.update(json.loads(body or b"{}"))
    if "requests" not in json.loads(body or b"{}"):
        pass
    await respond(send, 200, {"ok": True})


async def requests_seen(send, headers, body) -> None:
    await respond(send, 200, state["requests"])


async def reset(send, headers, body) -> None:
    state.update({"ask": {}, "requests": []})
    await respond(send, 200, {"ok": True})


async def csrf(send, headers, body) -> None:
    await respond(
        send,
        200,
        {"csrfToken": "f" * 64},
        [(b"set-cookie", b"next-auth.csrf-token=fake%7Ccsrf; Path=/; HttpOnly")],
    )


async def signin_email(send, headers, body) -> None:
    email = json.loads(body or b"{}").get("email", "")
    if email.startswith("unknown"):
        await respond(send, 400, {"text": "No account with this email"})
        return
    await respond(send, 200, {"success": "Email sign in triggered"})


async def signin_otp(send, headers, body) -> None:
    data = json.loads(body or b"{}")
    if data.get("otp") != CODE:
        await respond(send, 401, {"text": "Invalid code"})
        return
    if data.get("email", "").startswith("totp"):
        await send(
            {
                "type": "http.response.start",
                "status": 302,
                "headers": [(b"location", b"/auth/totp-challenge?token=FAKE-CHALLENGE")],
            }
        )
        await send({"type": "http.response.body", "body": b""})
        return
    await respond(send, 200, {"token": TOKEN, "status": "success"})


async def totp_verify(send, headers, body) -> None:
    data = json.loads(body or b"{}")
    if data.get("code") != "654321":
        await respond(send, 200, {"error": "invalid"})
        return
    await respond(send, 200, {"token": TOKEN})


async def session(send, headers, body) -> None:
    if not signed_in(headers):
        await respond(send, 200, {})
        return
    await respond(
        send,
        200,
        {
            "user": {"id": "fake-account", "email": "fake@example.com", "subscription_tier": "pro"},
            "expires": "2027-06-30T00:00:00Z",
        },
    )


async def models(send, headers, body) -> None:
    await respond(send, 200, {"models": {"pplx_pro": {"label": "Best", "mode": "search"}, "gpt55": {"label": "GPT-5.5", "mode": "search"}},
                              "config": [{"label": "GPT-5.5", "subscription_tier": "pro", "non_reasoning_model": "gpt55"}]})  # fmt: skip


async def ask(send, headers, body) -> None:
    plan = dict(state.get("ask") or {})
    fault = plan.get("fault", "")
    pace = float(plan.get("pace", 0.02))
    if not signed_in(headers) or fault == "401":
        await respond(send, 401, {"error": "unauthorized"})
        return
    statuses = {"403": 403, "429": 429, "400": 400, "500": 500}
    if fault in statuses:
        extra = (
            [(b"retry-after", b"7")]
            if fault == "429"
            else [(b"cf-mitigated", b"challenge")]
            if fault == "403"
            else []
        )
        page = b"<html><title>Just a moment...</title></html>" if fault == "403" else None
        if page:
            await respond(send, 403, headers=extra, raw=page)
        else:
            await respond(send, statuses[fault], {"error": fault}, extra)
        return
    if fault == "reset_before_status":
        raise ConnectionResetError("fake reset before status")
    answer = plan.get("answer") or DEFAULT_ANSWER
    model = json.loads(body or b"{}").get("params", {}).get("model_preference", "pplx_pro")
    stream = events(
        answer,
        model=plan.get("model", model),
        complete=fault not in ("no_completed", "reset_mid_stream", "stall", "endless"),
    )
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream; charset=utf-8")],
        }
    )
    started = time.monotonic()
    for index, event in enumerate(stream):
        # An absolute schedule (event i at i * pace), so a busy machine's timer slack does not
        # accumulate and two replays of one stream stay comparable.
        await asyncio.sleep(max(0.0, started + (index + 1) * pace - time.monotonic()))
        if fault == "malformed" and index == 2:
            await send({"type": "http.response.body", "body": b"data: {not json\r\n\r\n", "more_body": True})
        await send({"type": "http.response.body", "body": frame(event), "more_body": True})
    if fault == "reset_mid_stream":
        raise ConnectionResetError("fake reset mid-stream")
    if fault == "stall":
        await asyncio.sleep(3600)
    if fault == "endless":
        while True:
            await asyncio.sleep(pace)
            await send({"type": "http.response.body", "body": b": still here\r\n\r\n", "more_body": True})
    await send({"type": "http.response.body", "body": b"event: end_of_stream\r\ndata: {}\r\n\r\n"})


ROUTES = {
    ("POST", "/_control"): control,
    ("GET", "/_requests"): requests_seen,
    ("POST", "/_reset"): reset,
    ("GET", "/api/auth/csrf"): csrf,
    ("POST", "/api/auth/signin-email"): signin_email,
    ("POST", "/api/auth/signin-otp"): signin_otp,
    ("POST", "/api/auth/totp-challenge/verify"): totp_verify,
    ("GET", "/api/auth/session"): session,
    ("GET", "/rest/models/config"): models,
    ("POST", "/rest/sse/perplexity_ask"): ask,
}
