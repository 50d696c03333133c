"""/mcp: the MCP SDK's Streamable HTTP server (its public session manager, an ASGI app) served
through a Django view, so it lives at exactly /mcp under any ASGI server, behind pplxweb's checks.

search.api.views.mcp checks the token and the origin first (a refusal is OpenAI's error shape,
401 with WWW-Authenticate), then this hands the request to `StreamableHTTPSessionManager.handle_request` as
ASGI: Django has read the body already (its size limit holds), and what the SDK sends becomes a
streaming response, so a tool's progress notifications go out as they come. A client that goes
away is told to the SDK as `http.disconnect`. The manager runs stateless, in one task of the
server process started by the first request (ASGI servers such as daphne have no lifespan).
Host names are Django's ALLOWED_HOSTS' to check, browser origins search.api.auth's, so the SDK's
own DNS-rebinding check is off.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from mcp.server.transport_security import TransportSecuritySettings

from pplxweb.net import client_ip
from search.api.mcp import server
from search.api.requests import MAX_BODY

log = logging.getLogger(__name__)
HOP_BY_HOP = {"content-length", "transfer-encoding", "connection"}  # the ASGI server's own
_manager_task: asyncio.Task | None = None
_ready: asyncio.Event | None = None


async def _manager():
    """The SDK's session manager, running (started once per server process)."""
    global _manager_task, _ready
    if _ready is None:
        _ready = asyncio.Event()
        server.streamable_http_app(
            stateless_http=True,
            max_request_body_size=MAX_BODY,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        # a fresh context: the request that starts it ends long before the manager
        _manager_task = asyncio.get_running_loop().create_task(
            _run(server.session_manager, _ready), name="mcp-sessions", context=contextvars.Context()
        )
    await _ready.wait()
    return server.session_manager


async def _run(manager, ready: asyncio.Event) -> None:
    async with manager.run():
        ready.set()
        await asyncio.Event().wait()  # until the server process stops


async def serve(request: HttpRequest) -> HttpResponse:
    """The SDK's answer to an authenticated request (search.api.views.mcp checked it)."""
    manager = await _manager()
    sent: asyncio.Queue = asyncio.Queue()
    gone = asyncio.Event()
    body = request.body
    delivered = False

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def handle() -> None:
        try:
            await manager.handle_request(_scope(request), receive, sent.put)
        finally:
            await sent.put(None)

    # a fresh context, as a run's (search.live.runner.launch): the tools' database calls must
    # not go to the request's thread executor, which is gone once the response starts
    task = asyncio.get_running_loop().create_task(handle(), context=contextvars.Context())
    start = await sent.get()
    if start is None or start.get("type") != "http.response.start":
        await task
        return HttpResponse(status=500)
    response = StreamingHttpResponse(_body(sent, gone, task), status=start["status"])
    for name, value in start.get("headers", []):
        key = name.decode("latin-1")
        if key.lower() not in HOP_BY_HOP:
            response[key] = value.decode("latin-1")
    return response


async def _body(sent: asyncio.Queue, gone: asyncio.Event, task: asyncio.Task) -> AsyncIterator[bytes]:
    try:
        while (message := await sent.get()) is not None:
            if message.get("body"):
                yield message["body"]
            if not message.get("more_body", False):
                break
    finally:
        gone.set()  # the client went away, or everything was sent
        try:
            await asyncio.wait_for(asyncio.shield(task), 10)
        except TimeoutError:
            task.cancel()


def _scope(request: HttpRequest) -> dict:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "client": (client_ip(request), 0),
        "server": None,
    }
