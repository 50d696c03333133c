"""A local stand-in for Perplexity that speaks its web protocol (docs/protocol.md).

A plain ASGI app, served by daphne on a loopback port in tests (tests/e2e/conftest.py) and by
hand for development:

    .venv/bin/python -m daphne -b 127.0.0.1 -p 8765 tests.fake_perplexity.app:application

It serves both hosts pplxweb talks to: the web app (sign-in, session, models, the ask stream)
and the public API's Agent API, `/v1/agent` (point `PPLXWEB_PERPLEXITY_API_URL` at it too);
what it streams is built in streams.py.
The session token it accepts is TOKEN, the API key API_KEY, the e-mailed code CODE and the
authenticator code TOTP_CODE. Tests steer it with `POST /_control` (JSON) and read what pplxweb
sent with `GET /_requests`:

- `{"signin": {"delivery": D}}`: how signin-otp hands over the session, D one of DELIVERIES:
  `json` (a `token` in the JSON), `cookie` (Set-Cookie only), `chunked` (the cookie split in
  NextAuth's `.0`/`.1` chunks), `redirect` (a 302 to `/api/auth/session`, which sets the cookie),
  `totp` (a 302 to the authenticator challenge; verify answers with a token), `totp-cookie` (the
  same; verify answers with a redirect that sets the cookie). Without it, an e-mail whose local
  part starts with a delivery name picks it (`chunked@example.com`), else `json`.
- `{"ask": {...}}` for the next asks (web and API): `answer` (chunks) or `fixture` (a file of
  tests/perplexity/fixtures, `.sse`/`.txt` wire captures or `.events.jsonl`), `framing` (`crlf`:
  `event: message` + CRLF + `end_of_stream`, the real one; `lf`: bare `data:` + LF + `[DONE]`,
  the older synthetic one), `pace` (seconds between events), `model`, `fault` (one of FAULTS),
  or `stream`: one of the late-2026 streams (`research`, `thinking`, `turbo`, `error_frame`,
  `empty`; see modern_stream()), or `hostile`: an answer of any size (hostile.py). A research stream with a `question` holds after it until
  `POST /rest/sse/handle_perplexity_research_clarifying_answers` answers it. A built answer
  goes on by its schedule after its connection drops, and `POST .../reconnect/<backend_uuid>`
  rejoins it (with `"rejoin": "gone"` in the plan it answers 403 `{}`, as for a deleted thread).
  A follow-up into a thread that is gone (`thread_gone`, `gone_as`, `gone`) is refused in the forms
  gone.py describes (docs/protocol.md §12.4). Each answer is placed in its thread (threads.py: a
  follow-up keeps its thread's ids; an incognito thread expires after `incognito_lifetime`
  seconds, a day by default, and a follow-up after that is refused as expired).
  The two resets (`reset_before_status`, `reset_mid_stream`: two thirds into the events) are
  carried out by the relay in front of it (tests/fake_perplexity/proxy.py), which the fake asks
  with an `x-fake-reset` header or a marker comment: an ASGI app cannot drop its socket.
- `{"terminate": {"fault": F} | {"hang": seconds}}`: how `POST /rest/sse/perplexity_terminate`
  (Stop, docs/protocol.md §9.2) answers; it is recorded like every call (`GET /_requests`).
- `{"delete": {"fault": F}}`: how a conversation's deletion is refused (F a status fault); without
  it each entry_uuid is deleted once (listed in `GET /_requests`' DELETE bodies), then 404.

File uploads (docs/protocol.md §10) are served by uploads.py (steered with `{"uploads": {...}}`).

Generated images in a replayed fixture point at Perplexity's image host; the fake points them
at its own `/_media/...`, which answers with a small PNG (png()), so they can be downloaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from tests.fake_perplexity import gone, hostile, library, streams_2026, threads, uploads
from tests.fake_perplexity.streams import (
    DEFAULT_ANSWER,
    FIXTURES,
    agent_events,
    end_frame,
    events,
    fixture_events,
    frame,
)

TOKEN = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..FAKE-PERPLEXITY-SESSION.tag"
API_KEY = "pplx-fake-0123456789abcdef"
CODE = "123456"
TOTP_CODE = "654321"
SESSION_COOKIE = "__Secure-next-auth.session-token"
DELIVERIES = ("json", "cookie", "chunked", "redirect", "totp-cookie", "totp")
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


def fresh_state() -> dict[str, Any]:
    return {
        "ask": {},
        "signin": {},
        "requests": [],
        "delete": {},
        "deleted": [],
        "terminate": {},
        "answered": None,
        "runs": {},
        "threads": {},  # backend_uuid -> its thread's ids and expiry (threads.py)
    }


state: dict[str, Any] = fresh_state()


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    record: dict = field(default_factory=dict)  # what /_requests shows of it

    def json(self) -> dict:
        try:
            data = json.loads(self.body or b"{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def cookies(self) -> dict[str, str]:
        pairs = (part.strip().partition("=") for part in self.headers.get("cookie", "").split(";"))
        return {name: value for name, sep, value in pairs if sep}


async def application(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    received = bytearray()  # not bytes +=: a 25 MB upload in 64 KB parts would copy it 400 times
    while True:
        message = await receive()
        received += message.get("body", b"")
        if not message.get("more_body"):
            break
    body = bytes(received)
    query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    request = Request(scope["method"], scope["path"], query, headers, body)
    if not request.path.startswith("/_"):
        request.record = {
            "path": request.path,
            "query": query,
            "headers": headers,
            "body": body.decode("utf-8", "replace"),
            "peer": list(scope.get("client") or ()),  # which connection it came on
        }
        state["requests"].append(request.record)
    if request.method == "GET" and request.path.startswith("/_media/"):
        await respond(send, 200, headers=[(b"content-type", b"image/png")], raw=png(), kind=b"image/png")
        return
    if await library.serve(send, request, signed_in):  # the library's paths (library.py)
        return
    handler = ROUTES.get((request.method, request.path), not_found)
    if request.method == "POST" and request.path.startswith("/rest/sse/perplexity_ask/reconnect/"):
        handler = rejoin
    await handler(send, request)


async def respond(
    send,
    status: int,
    payload: Any = None,
    headers: list | None = None,
    raw: bytes | None = None,
    kind: bytes | None = None,
) -> None:
    content = raw if raw is not None else json.dumps(payload if payload is not None else {}).encode()
    headers = list(headers or [])
    if kind is None:
        headers.insert(0, (b"content-type", b"text/html" if raw is not None else b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


async def redirect(send, location: str, headers: list | None = None) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 302,
            "headers": [(b"location", location.encode()), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def session_cookie_headers() -> list[tuple[bytes, bytes]]:
    return [(b"set-cookie", f"{SESSION_COOKIE}={TOKEN}; Path=/; HttpOnly; Secure; SameSite=Lax".encode())]


def session_token(cookies: dict[str, str]) -> str:
    """The session the cookies carry: whole, or joined from NextAuth's numbered chunks."""
    if cookies.get(SESSION_COOKIE):
        return cookies[SESSION_COOKIE]
    chunks, n = [], 0
    while f"{SESSION_COOKIE}.{n}" in cookies:
        chunks.append(cookies[f"{SESSION_COOKIE}.{n}"])
        n += 1
    return "".join(chunks)


def signed_in(request: Request) -> bool:
    return session_token(request.cookies) == TOKEN


def delivery_for(email: str) -> str:
    chosen = (state.get("signin") or {}).get("delivery")
    if chosen:
        return chosen
    local = email.partition("@")[0]
    return next((d for d in DELIVERIES if local.startswith(d)), "json")


async def not_found(send, request: Request) -> None:
    await respond(send, 404, {"error": "not found"})


async def control(send, request: Request) -> None:
    state.update(request.json())
    await respond(send, 200, {"ok": True})


async def requests_seen(send, request: Request) -> None:
    await respond(send, 200, state["requests"])


async def reset(send, request: Request) -> None:
    state.update(fresh_state())
    state.pop("uploads", None)
    uploads.reset()
    await respond(send, 200, {"ok": True})


async def csrf(send, request: Request) -> None:
    await respond(
        send,
        200,
        {"csrfToken": "f" * 64},
        [(b"set-cookie", b"next-auth.csrf-token=fake%7Ccsrf; Path=/; HttpOnly")],
    )


async def signin_email(send, request: Request) -> None:
    data = request.json()
    if "next-auth.csrf-token" not in request.cookies or data.get("csrfToken") != "f" * 64:
        await respond(send, 403, {"text": "CSRF token mismatch"})
        return
    if data.get("email", "").startswith("unknown"):
        await respond(send, 400, {"text": "No account with this email"})
        return
    await respond(send, 200, {"success": "Email sign in triggered"})


async def signin_otp(send, request: Request) -> None:
    data = request.json()
    if data.get("otp") != CODE:
        await respond(send, 401, {"text": "Invalid code"})
        return
    delivery = state["pending_delivery"] = delivery_for(data.get("email", ""))
    state["requests"][-1]["delivery"] = delivery  # for tests: how the session was handed over
    if delivery.startswith("totp"):
        await redirect(send, "/auth/totp-challenge?token=FAKE-CHALLENGE")
    elif delivery == "cookie":
        await respond(send, 200, {"status": "success"}, session_cookie_headers())
    elif delivery == "chunked":
        half = len(TOKEN) // 2
        await respond(
            send,
            200,
            {"status": "success"},
            [
                (b"set-cookie", f"{SESSION_COOKIE}.0={TOKEN[:half]}; Path=/; HttpOnly; Secure".encode()),
                (b"set-cookie", f"{SESSION_COOKIE}.1={TOKEN[half:]}; Path=/; HttpOnly; Secure".encode()),
            ],
        )
    elif delivery == "redirect":
        await redirect(send, "/api/auth/session?signin=FAKE-PENDING")
    else:
        await respond(send, 200, {"token": TOKEN, "status": "success"})


async def totp_verify(send, request: Request) -> None:
    data = request.json()
    if data.get("token") != "FAKE-CHALLENGE" or data.get("code") != TOTP_CODE:
        await respond(send, 200, {"error": "invalid"})
        return
    if state.get("pending_delivery") == "totp-cookie":
        await respond(send, 200, {"redirect": "/api/auth/session?signin=FAKE-PENDING"})
        return
    await respond(send, 200, {"token": TOKEN})


async def session(send, request: Request) -> None:
    finishing = request.query.get("signin") == "FAKE-PENDING"  # the last hop of a sign-in
    if not signed_in(request) and not finishing:
        await respond(send, 200, {})
        return
    await respond(
        send,
        200,
        {
            "user": {"id": "fake-account", "email": "fake@example.com", "subscription_tier": "pro"},
            "expires": "2027-06-30T00:00:00Z",
        },
        session_cookie_headers() if finishing else None,
    )


async def models(send, request: Request) -> None:
    """The v1 table (`/rest/models/config?config_schema=v1`): a real snapshot (jacob-bd, 2026-07;
    pplxweb ships the same one for before the first fetch)."""
    await respond(
        send, 200, json.loads((FIXTURES / "jacob-bd__scripts__reference_model_config.json").read_text())
    )


async def models_v2(send, request: Request) -> None:
    """The v2 table: a real snapshot (escapeWu, 2026-08), trimmed by `{"models_v2": {"drop": [...]}}`."""
    table = json.loads((FIXTURES / "escapeWu__catalog__model_config_v2.json").read_text())
    for slug in (state.get("models_v2") or {}).get("drop", []):
        table["models"].pop(slug, None)
    await respond(send, 200, table)


STATUS_FAULTS = {"401": 401, "403": 403, "429": 429, "400": 400, "500": 500}
OPEN_ENDED = ("no_completed", "reset_before_status", "reset_mid_stream", "stall", "endless")


async def refuse(send, fault: str, api: bool) -> None:
    """A fault answered before the stream: the status and body each host really sends."""
    if fault == "403":  # Cloudflare's challenge page, on either host
        page = b"<html><title>Just a moment...</title></html>"
        await respond(send, 403, headers=[(b"cf-mitigated", b"challenge")], raw=page)
        return
    extra = [(b"retry-after", b"7")] if fault == "429" else []
    body = (
        {"error": {"message": f"fake {fault}", "type": "fake_error", "code": STATUS_FAULTS[fault]}}
        if api
        else {"error": fault}
    )
    await respond(send, STATUS_FAULTS[fault], body, extra)


RESET_HERE = b": fake-reset-here\n\n"  # an SSE comment; the relay drops the socket where it sees it


async def replay(
    send, frames: list[bytes], end: bytes, plan: dict, record: dict, hold: int | None = None
) -> None:
    """Send the frames on an absolute schedule (frame i at i * pace), with the plan's fault.
    A reset is asked of the relay in front (proxy.py) by a response header it acts on. The
    schedule's start goes in the request's record as `schedule_started` (time.monotonic(), one
    clock for every process on the machine: the benchmark times what came after it). After
    frame `hold` (a clarifying question) it waits for the answer, or the question's own
    countdown (`question_wait`, default 60 s), as Perplexity does."""
    fault, pace = plan.get("fault", ""), float(plan.get("pace", 0.02))
    headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
    if fault == "reset_before_status":
        headers.append((b"x-fake-reset", b"before"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if fault == "reset_before_status":
        await send({"type": "http.response.body", "body": b""})
        return
    started = record["schedule_started"] = time.monotonic()
    for index, chunk in enumerate(frames):
        if fault == "reset_mid_stream" and index == len(frames) * 2 // 3:
            await send({"type": "http.response.body", "body": RESET_HERE, "more_body": True})
            break
        # An absolute schedule, so a busy machine's timer slack does not accumulate and two
        # replays of one stream stay comparable.
        await asyncio.sleep(max(0.0, started + (index + 1) * pace - time.monotonic()))
        if fault == "malformed" and index == 2:
            await send({"type": "http.response.body", "body": b"data: {not json\r\n\r\n", "more_body": True})
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if index == hold:
            answered = state["answered"] = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(answered.wait(), float(plan.get("question_wait", 60)))
            started = time.monotonic() - (index + 1) * pace  # the schedule goes on from here
    if fault == "stall":
        await asyncio.sleep(3600)
    if fault == "endless":
        while True:
            await asyncio.sleep(pace)
            await send({"type": "http.response.body", "body": b": still here\r\n\r\n", "more_body": True})
    await send({"type": "http.response.body", "body": b"" if fault in OPEN_ENDED else end})


async def ask(send, request: Request) -> None:
    plan = dict(state.get("ask") or {})
    fault, framing = plan.get("fault", ""), plan.get("framing", "crlf")
    if not signed_in(request):
        await respond(send, 401, {"error": "unauthorized"})
        return
    if fault in STATUS_FAULTS:
        await refuse(send, fault, api=False)
        return
    if plan.get("hostile"):  # what a hostile upstream could send (hostile.py)
        await hostile.send_answer(send, plan)
        return
    refused = gone.answer(plan, request.json())  # a follow-up into a thread that is gone
    if refused is None and threads.expired(state, request.json()):  # an incognito one, expired
        expired = {**{k: v for k, v in plan.items() if k != "gone"}, "thread_gone": "expired"}
        refused = gone.answer(expired, request.json())
    if refused is not None and refused.payload is not None:
        await respond(send, refused.status, refused.payload)
        return
    model = request.json().get("params", {}).get("model_preference", "pplx_pro")
    attachments = uploads.record_ask(request.json())
    if refused is not None and refused.frames is not None:
        stream = refused.frames
    elif plan.get("fixture"):
        here = f"http://{request.headers.get('host', 'localhost')}/_media/"
        stream = json.loads(json.dumps(fixture_events(plan["fixture"])).replace(IMAGE_HOST, here))
        if fault in OPEN_ENDED:
            stream = [e for e in stream if str(e.get("status", "")).upper() != "COMPLETED"]
    elif plan.get("stream"):
        stream = modern_stream(plan)
        if fault in OPEN_ENDED:
            stream = [e for e in stream if str(e.get("status", "")).upper() != "COMPLETED"]
    else:
        answer = plan.get("answer") or DEFAULT_ANSWER
        # a reset cuts the connection, not the run: it goes on to its end (for a rejoin)
        complete = fault not in OPEN_ENDED or fault == "reset_mid_stream"
        stream = events(answer, model=plan.get("model", model), complete=complete)
        uploads.add_file_hits(stream, attachments)
        remember_run(stream, float(plan.get("pace", 0.02)))
    if refused is None or refused.frames is None:
        threads.place(state, plan, request.json(), stream)  # its thread's ids, its expiry
    if refused is not None and refused.rethread:
        gone.new_thread(stream)
    hold = next((i for i, e in enumerate(stream) if "RESEARCH_CLARIFYING_QUESTIONS" in json.dumps(e)), None)
    frames = [frame(e, framing) for e in stream]
    await replay(
        send, frames, b"" if plan.get("stream") == "empty" else end_frame(framing), plan, request.record, hold
    )


def remember_run(stream: list[dict], pace: float) -> None:
    """A built answer goes on "on Perplexity's side" whatever happens to the connection that
    asked it (docs/protocol.md §9.1): it gets its own backend_uuid, and a rejoin sends it as far as its
    schedule has come."""
    runs = state.setdefault("runs", {})
    uuid = f"fake-run-{len(runs) + 1}"
    stream[0]["backend_uuid"] = uuid
    runs[uuid] = {"events": stream, "started": time.monotonic(), "pace": pace}


def whole(events: list[dict]) -> dict:
    """The events so far as one frame, every block whole (what a rejoin sends first)."""
    top: dict = {}
    blocks: dict[str, dict] = {}
    chunks: dict[str, list[str]] = {}
    for event in events:
        top.update({k: v for k, v in event.items() if k != "blocks"})
        for block in event.get("blocks", []):
            usage, markdown = block["intended_usage"], block.get("markdown_block")
            if markdown and "chunk_starting_offset" in markdown:
                kept = chunks.setdefault(usage, [])
                del kept[markdown["chunk_starting_offset"] :]
                kept.extend(markdown["chunks"])
            else:
                blocks[usage] = block
    for usage, kept in chunks.items():
        blocks[usage] = {
            "intended_usage": usage,
            "markdown_block": {"chunks": kept, "chunk_starting_offset": 0},
        }
    return {**top, "blocks": list(blocks.values())}


async def rejoin(send, request: Request) -> None:
    """POST /rest/sse/perplexity_ask/reconnect/<backend_uuid>: the run so far as one frame, then
    the rest on its schedule; a finished run is one COMPLETED frame; an unknown one (or with the
    plan's `"rejoin": "gone"`) is 403 `{}`, as Perplexity answers for a deleted thread."""
    uuid = request.path.rsplit("/", 1)[-1]
    run = (state.get("runs") or {}).get(uuid)
    if not signed_in(request):
        await respond(send, 401, {"error": "unauthorized"})
        return
    if run is None or (state.get("ask") or {}).get("rejoin") == "gone":
        await respond(send, 403, {})
        return
    stream, pace = run["events"], run["pace"]
    done = min(len(stream), int((time.monotonic() - run["started"]) / pace) if pace else len(stream))
    frames = [frame(whole(stream[: max(done, 1)]))] + [frame(e) for e in stream[max(done, 1) :]]
    await replay(send, frames, end_frame(), {"pace": pace}, request.record)


def modern_stream(plan: dict) -> list[dict]:
    """The 2026 streams (streams_2026.py) by name: `research` (with `report_kb`, `replaces`,
    `question`: true (two questions) or question objects), `thinking`, `turbo`, `error_frame`, `empty`."""
    kind = plan["stream"]
    if kind == "research":
        question = plan.get("question")
        question = streams_2026.QUESTIONS if question is True else question or None
        report = streams_2026.report_text(int(float(plan.get("report_kb", 15)) * 1000))
        return streams_2026.research_events(report, int(plan.get("replaces", 40)), question)
    if kind == "thinking":
        return streams_2026.thinking_events()
    if kind == "turbo":
        return streams_2026.turbo_events(plan.get("answer") or DEFAULT_ANSWER)
    if kind == "error_frame":
        return [streams_2026.ERROR_FRAME]
    return []  # "empty": a 200 with nothing in it


async def clarifying_answers(send, request: Request) -> None:
    """A research run's clarifying question answered (docs/protocol.md §8.4): the held stream goes on."""
    body = request.json().get("result") or {}
    if not signed_in(request):
        await respond(send, 401, {"error": "unauthorized"})
        return
    if body.get("tool_uuid") != streams_2026.QUESTION_TOOL or not body.get("answers"):
        await respond(send, 400, {"error": "bad answer"})
        return
    if state.get("answered") is not None:
        state["answered"].set()
    await respond(send, 200, {"status": "ok"})


AGENT_PRESETS = ("fast", "low", "medium", "high", "xhigh", "wide-research")


async def agent(send, request: Request) -> None:
    """The public API path, the Agent API (`POST /v1/agent`, alias `/v1/responses`; docs/protocol.md):
    `Authorization: Bearer <key>`, a preset or a provider/model, Responses-shaped events. Search
    happens when `web_search` is offered (the fake searches whenever it is: a real model may skip
    it unless `tool_choice` is "required")."""
    plan = dict(state.get("ask") or {})
    fault = plan.get("fault", "")
    if request.headers.get("authorization") != f"Bearer {API_KEY}":
        error = {"message": "Invalid API key.", "type": "forbidden", "code": 401}
        await respond(send, 401, {"error": error})
        return
    if fault in STATUS_FAULTS:
        await refuse(send, fault, api=True)
        return
    body = request.json()
    preset, model = body.get("preset"), body.get("model")
    refusal = (
        "input is required" if not body.get("input")
        else f"Unknown preset {preset!r}." if preset is not None and preset not in AGENT_PRESETS
        else "Either preset or model is required." if not (preset or model)
        else "Unknown tool type." if any(not isinstance(t, dict) or t.get("type") not in ("web_search", "fetch_url", "function") for t in body.get("tools") or [])
        else ""
    )  # fmt: skip
    if refusal:
        await respond(send, 400, {"error": {"message": refusal, "type": "invalid_request", "code": 400}})
        return
    searched = any(t.get("type") == "web_search" for t in body.get("tools") or [])
    question = body["input"] if isinstance(body["input"], str) else json.dumps(body["input"])
    events = agent_events(
        plan.get("answer") or DEFAULT_ANSWER, question, model or "perplexity/sonar",
        complete=fault not in OPEN_ENDED, searched=searched,
    )  # fmt: skip
    frames = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
    await replay(send, frames, b"", plan, request.record)


IMAGE_HOST = "https://user-gen-media-assets.s3.amazonaws.com/"


def png(width: int = 4, height: int = 4, rgb: tuple[int, int, int] = (30, 90, 220)) -> bytes:
    """A small one-colour PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


async def delete_thread(send, request: Request) -> None:
    """DELETE /rest/thread/delete_thread_by_entry_uuid (docs/protocol.md §9.3): each entry_uuid once."""
    fault = (state.get("delete") or {}).get("fault", "")
    body = request.json()
    if not signed_in(request):
        await respond(send, 401, {"error": "unauthorized"})
    elif fault in STATUS_FAULTS:
        await refuse(send, fault, api=False)
    elif not body.get("entry_uuid") or not body.get("read_write_token"):
        await respond(send, 400, {"error": "entry_uuid and read_write_token are required"})
    elif body["entry_uuid"] in state.setdefault("deleted", []):
        await respond(send, 404, {"error": "not found"})
    else:
        state["deleted"].append(body["entry_uuid"])
        await respond(send, 200, {"status": "success"})


async def terminate(send, request: Request) -> None:
    """POST /rest/sse/perplexity_terminate (docs/protocol.md §9.2): Stop on Perplexity's side."""
    plan = state.get("terminate") or {}
    if plan.get("hang"):
        await asyncio.sleep(plan["hang"])
    body = request.json()
    if not signed_in(request):
        await respond(send, 401, {"error": "unauthorized"})
    elif plan.get("fault") in STATUS_FAULTS:
        await refuse(send, plan["fault"], api=False)
    elif not body.get("entry_uuid") or not body.get("context_uuid"):
        await respond(send, 400, {"error": "entry_uuid and context_uuid are required"})
    else:
        slug = "slug-" + body["entry_uuid"]
        await respond(
            send,
            200,
            {"status": "completed", "_response_type": "COMPLETED_RESPONSE", "thread_url_slug": slug},
        )


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
    ("GET", "/rest/models/config/v2"): models_v2,
    ("POST", "/rest/sse/perplexity_ask"): ask,
    ("POST", "/rest/sse/handle_perplexity_research_clarifying_answers"): clarifying_answers,
    ("DELETE", "/rest/thread/delete_thread_by_entry_uuid"): delete_thread,
    ("POST", "/rest/sse/perplexity_terminate"): terminate,
    ("POST", "/v1/agent"): agent,
    ("POST", "/v1/responses"): agent,
}
ROUTES.update(uploads.routes(state, respond=respond, refuse=refuse, signed_in=signed_in))
