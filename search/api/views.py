"""The OpenAI-compatible API under /v1/: GET /v1/models, POST /v1/chat/completions.

Views decide HTTP; search.api.answers decides what is asked and followed. Each reply names the
pplxweb conversation (`conversation_id`, header X-Pplxweb-Conversation) for the next request to
continue. A client that goes away mid-answer leaves the answer going: it lands in history, as a
closed tab's does.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from channels.db import database_sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from accounts.services import agent_tokens
from search.api import answers, auth, conversations
from search.api.errors import ApiError
from search.api.requests import body_of, body_of_size, chat_request
from search.display import footnotes

TICK = 2.0  # seconds between checks that the token still stands, while an answer is followed
KEEPALIVE = 15.0  # seconds of silence in a stream before a comment line keeps it open
REVOKED = ApiError(
    401, "This agent token was revoked while the answer was arriving; the answer goes on in history.",
    "authentication_error", "token_revoked",
)  # fmt: skip
STOP = {"completed": "stop"}  # an answer cut short, failed or stopped ends with "length"


def _api(view):
    """An API view: no session, no CSRF (a bearer token, never a cookie), CORS only for the
    owner's listed origins, every refusal in OpenAI's shape."""

    @csrf_exempt
    @login_not_required
    async def wrapped(request: HttpRequest) -> HttpResponse:
        if request.method == "OPTIONS":
            return auth.preflight(request)
        try:
            response = await view(request)
        except ApiError as exc:
            response = exc.response()
        return auth.allow_origin(request, response)

    wrapped.__name__ = view.__name__
    return wrapped


def _method(request: HttpRequest, method: str) -> None:
    if request.method != method:
        raise ApiError(405, f"Use {method} here.", "invalid_request_error", "method_not_allowed")


@_api
async def models(request: HttpRequest) -> HttpResponse:
    _method(request, "GET")
    token = await database_sync_to_async(auth.authenticate)(request)
    listed = await database_sync_to_async(answers.models_for)(token.user)
    data = [{"id": i, "object": "model", "created": 0, "owned_by": "pplxweb", "name": n} for i, n in listed]
    return JsonResponse({"object": "list", "data": data})


@_api
async def chat_completions(request: HttpRequest) -> HttpResponse:
    _method(request, "POST")
    token = await database_sync_to_async(auth.authenticate)(request)
    chat = chat_request(body_of(request))
    thread_id = await database_sync_to_async(_continued)(token.user, chat)
    asked = await answers.ask(token, chat.question, chat.model, None, thread_id)
    reply = Reply(asked, chat, token.pk)
    if chat.stream:
        response = StreamingHttpResponse(reply.events(), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # a proxy passes each event on at once
    else:
        response = JsonResponse(await reply.whole())
    response["X-Pplxweb-Conversation"] = str(asked.thread_id)
    if chat.notice:
        response["X-Pplxweb-Notice"] = chat.notice
    return response


def _continued(user, chat) -> int | None:
    if chat.conversation_id is not None:
        return conversations.named(user, chat.conversation_id)
    return conversations.matching(user, chat.earlier)


class Reply:
    """One answer as OpenAI's client reads it: whole, or as server-sent chunks."""

    def __init__(self, asked: answers.Asked, chat, token_id: int) -> None:
        self.asked, self.chat, self.token_id = asked, chat, token_id
        self.id = f"chatcmpl-pplxweb-{asked.entry_id}"
        self.created = int(time.time())

    def _head(self, kind: str) -> dict:
        head = {"id": self.id, "object": kind, "created": self.created, "model": self.chat.model or "best"}
        head["conversation_id"] = str(self.asked.thread_id)
        if self.chat.notice:
            head["notice"] = self.chat.notice
        return head

    async def _followed(self) -> AsyncIterator[answers.Progress]:
        """The answer's progress; ApiError when the token is revoked meanwhile."""
        checked = time.monotonic()
        async for seen in answers.progress(self.asked, TICK):
            if time.monotonic() - checked >= TICK:
                checked = time.monotonic()
                if not await database_sync_to_async(agent_tokens.still_valid)(self.token_id):
                    raise REVOKED
            yield seen

    async def whole(self) -> dict:
        async for _ in self._followed():
            pass
        final = await answers.final(self.asked)
        if not final.content.strip() and final.status != "completed":
            raise ApiError(502, final.error or "Perplexity gave no answer.", "upstream_error", final.status)
        message = {"role": "assistant", "content": final.content}
        choice = {"index": 0, "message": message, "finish_reason": STOP.get(final.status, "length")}
        return {**self._head("chat.completion"), "choices": [choice], "citations": final.citations,
                **self._outcome(final)}  # fmt: skip

    def _outcome(self, final: answers.Final) -> dict:
        # not "error": OpenAI's clients take any chunk with an "error" key for a failed stream
        return {
            "status": final.status,
            **({"status_detail": final.error} if final.status != "completed" else {}),
        }

    def _chunk(self, delta: dict, finish: str | None = None, **extra) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {**self._head("chat.completion.chunk"), "choices": [choice], **extra}
        return f"data: {json.dumps(data)}\n\n".encode()

    async def events(self) -> AsyncIterator[bytes]:
        sent, quiet = "", time.monotonic()
        yield self._chunk({"role": "assistant", "content": ""})
        try:
            async for seen in self._followed():
                if seen.text.startswith(sent) and len(seen.text) > len(sent):
                    yield self._chunk({"content": seen.text[len(sent) :]})
                    sent, quiet = seen.text, time.monotonic()
                elif time.monotonic() - quiet >= KEEPALIVE:
                    yield b": the answer is still arriving\n\n"
                    quiet = time.monotonic()
        except ApiError as exc:
            yield f"data: {json.dumps(exc.as_dict())}\n\n".encode()
            return
        final = await answers.final(self.asked)
        if not final.content.strip() and final.status != "completed":
            error = ApiError(502, final.error or "Perplexity gave no answer.", "upstream_error", final.status)
            yield f"data: {json.dumps(error.as_dict())}\n\n".encode()
            return
        rest = final.content[len(sent) :] if final.content.startswith(sent) else _notes(final)
        if rest:
            yield self._chunk({"content": rest})
        finish = STOP.get(final.status, "length")
        yield self._chunk({}, finish, citations=final.citations, **self._outcome(final))
        yield b"data: [DONE]\n\n"


def _notes(final: answers.Final) -> str:
    """The sources' list alone, for a stream whose text Perplexity rewrote after it was sent."""
    notes = footnotes(final.sources)
    return f"\n\n{notes}" if notes else ""


@_api
async def mcp(request: HttpRequest) -> HttpResponse:
    """/mcp (search.api.mcp_http). The MCP SDK (with pydantic and starlette) costs the server
    ~29 MB, so it is loaded by the first request that brings a valid token, not at start."""
    await database_sync_to_async(auth.authenticate)(request)
    body_of_size(request)
    from search.api import mcp_http

    return await mcp_http.serve(request)
