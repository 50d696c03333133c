"""Perplexity over HTTP: session info, the model catalogue, and asking (sign-in: signin.py).

One PerplexityClient talks for one account. It keeps that account's cookies as a dict
(`client.cookies`, saved by the caller between sign-in steps and after every search since the
session cookie rotates). The session goes as the `__Secure-next-auth.session-token` cookie,
never as a bearer (docs/protocol.md §2.5).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpx

from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity.errors import (
    AuthError,
    ChallengeError,
    FollowUpRefused,
    NetworkError,
    ProtocolError,
    RunGone,
)
from pplxweb.perplexity.request import API_VERSION, AskRequest, agent_body, ask_body, ask_headers
from pplxweb.perplexity.responses import (
    ERROR_BODY_LIMIT,
    check_response,
    json_body,
    looks_like_challenge,
    read_body,
    read_limited,
)
from pplxweb.perplexity.stream import AskStream, Timeouts
from pplxweb.perplexity.transport import make_transport

CLARIFY_PATH = "/rest/sse/handle_perplexity_research_clarifying_answers"
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")  # a backend_uuid, as it goes into the rejoin's path
RETRY_BEFORE_STATUS = (
    httpx.ConnectError,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


@dataclass(frozen=True)
class SessionInfo:
    user_id: str
    email: str
    tier: str  # "pro", "max", "free", "enterprise" or "" when Perplexity does not say
    expires: str  # ISO 8601


class PerplexityClient:
    """Calls to Perplexity for one account (or for nobody, during sign-in)."""

    def __init__(
        self,
        base_url: str = "https://www.perplexity.ai",
        api_url: str = "https://api.perplexity.ai",
        *,
        impersonate: str = "chrome",
        cookies: dict[str, str] | None = None,
        user_agent: str = "",
        account_id: str = "",
        csrf_token: str = "",
        transport: httpx.AsyncBaseTransport | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self.timeouts = timeouts or Timeouts()
        self.base_url = base_url.rstrip("/")
        self.api_url = api_url.rstrip("/")
        self.cookies: dict[str, str] = dict(cookies or {})
        self.csrf_token = csrf_token  # between sign-in steps; the caller keeps it with the cookies
        self.account_id = account_id
        headers = {"User-Agent": user_agent} if user_agent else {}
        self._http = httpx.AsyncClient(
            transport=transport or make_transport(impersonate, keep=account_id),
            headers=headers,
            timeout=httpx.Timeout(
                connect=self.timeouts.connect, read=self.timeouts.read_gap, write=10.0, pool=10.0
            ),
            follow_redirects=False,
        )

    async def __aenter__(self) -> PerplexityClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def remember_cookies(self, response: httpx.Response) -> None:
        jar.update_from_response(self.cookies, response)

    # --- plumbing ------------------------------------------------------------------------------

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Origin": self.base_url,
            "Referer": f"{self.base_url}/",
            "X-App-ApiClient": "default",
            "X-App-ApiVersion": API_VERSION,
        }
        if self.cookies:
            headers["Cookie"] = jar.header(self.cookies)
        return {**headers, **(extra or {})}

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send, streaming; retried once, only when the socket drops before any status."""
        for attempt in (1, 2):
            try:
                return await self._http.send(request, stream=True)
            except RETRY_BEFORE_STATUS:
                if attempt == 2:
                    raise NetworkError() from None
            except httpx.TimeoutException:
                raise NetworkError(
                    "Perplexity did not answer in time. Check this server's internet connection."
                ) from None
            except httpx.HTTPError:
                raise NetworkError() from None
        raise AssertionError("unreachable")

    async def _call(
        self, method: str, path: str, *, limit: int = ERROR_BODY_LIMIT, **kwargs: Any
    ) -> httpx.Response:
        """A small JSON call: the body is read, at most `limit` bytes (the library's replies are
        larger, pplxweb.perplexity.library asks for more)."""
        headers = self._headers(kwargs.pop("headers", None))
        request = self._http.build_request(
            method, urljoin(self.base_url + "/", path.lstrip("/")), headers=headers, **kwargs
        )
        response = await self._send(request)
        try:
            await read_limited(response, limit)
        finally:
            await response.aclose()
        self.remember_cookies(response)
        return response

    async def read_apart(
        self, method: str, path: str, *, limit: int, **kwargs: Any
    ) -> tuple[httpx.Response, bytes]:
        """A call with a large reply (the library's): (the response, the body of a success, at
        most `limit` bytes, read into bytes of its own). A refusal's body is read as _call reads
        it (small) and the bytes are b"" (check both with responses.check_apart). The response
        keeps none of a large body: an httpx response and its stream refer to each other, so what
        a response holds waits for a full garbage collection, which the server runs rarely
        (pplxweb/collector.py); a library import would pile its pages up there."""
        headers = self._headers(kwargs.pop("headers", None))
        request = self._http.build_request(
            method, urljoin(self.base_url + "/", path.lstrip("/")), headers=headers, **kwargs
        )
        response = await self._send(request)
        try:
            body = await read_body(response, limit) if response.is_success else b""
            if not response.is_success:
                await read_limited(response)
        finally:
            await response.aclose()
        self.remember_cookies(response)
        return response, body

    # --- account -------------------------------------------------------------------------------

    async def session_info(self) -> SessionInfo:
        """Who the stored session belongs to and when it expires; AuthError when signed out."""
        response = await self._call("GET", "/api/auth/session")
        check_response(response)
        body = json_body(response)
        user = body.get("user")
        if not isinstance(user, dict) or not user:
            raise AuthError("Perplexity says this session is signed out. Link the account again.")
        tier = user.get("subscription_tier") or user.get("payment_tier") or ""
        return SessionInfo(
            user_id=str(user.get("id") or ""),
            email=str(user.get("email") or ""),
            tier=str(tier).lower() if isinstance(tier, str) else "",
            expires=str(body.get("expires") or ""),
        )

    async def models(self) -> dict:
        """The model catalogue (/rest/models/config, schema v1)."""
        response = await self._call(
            "GET", f"/rest/models/config?config_schema=v1&version={API_VERSION}&source=default"
        )
        check_response(response)
        body = json_body(response)
        if not isinstance(body.get("models"), dict):
            raise ProtocolError("Perplexity's model list has no models in it.")
        return body

    async def models_v2(self) -> dict:
        """The v2 model table (docs/protocol.md §4.2: the authoritative one; default model per mode)."""
        response = await self._call("GET", f"/rest/models/config/v2?version={API_VERSION}&source=default")
        check_response(response)
        body = json_body(response)
        if not isinstance(body.get("models"), dict):
            raise ProtocolError("Perplexity's model table has no models in it.")
        return body

    async def delete_thread(self, entry_uuid: str, read_write_token: str) -> None:
        """Delete a conversation on Perplexity, named by one of its answers (docs/protocol.md §9.3).
        One already gone (404) counts as deleted."""
        response = await self._call(
            "DELETE",
            "/rest/thread/delete_thread_by_entry_uuid",
            json={"entry_uuid": entry_uuid, "read_write_token": read_write_token},
        )
        if response.status_code != 404:
            check_response(response)

    async def answer_question(self, tool_uuid: str, answers: list[tuple[str, str]]) -> None:
        """Answer a research run's clarifying questions ((question, answer) pairs; the call one
        public client sends, docs/protocol.md §8.4): the run then goes on with them."""
        response = await self._call(
            "POST",
            CLARIFY_PATH,
            json={
                "result": {
                    "tool_uuid": tool_uuid,
                    "answers": [{"question": question, "answer": answer} for question, answer in answers],
                    "submit_type": "USER_SUBMITTED",
                }
            },
            headers={"Content-Type": "application/json"},
        )
        check_response(response)

    async def terminate(self, entry_uuid: str, context_uuid: str, model_preference: str) -> None:
        """Stop a run on Perplexity's side (docs/protocol.md §9.2; the path and the reason header as
        Perplexity's own Stop button sends them). Reading the stream ended first."""
        response = await self._call(
            "POST",
            "/rest/sse/perplexity_terminate",
            json={
                "entry_uuid": entry_uuid,
                "context_uuid": context_uuid,
                "model_preference": model_preference,
                "terminate_requested_at_ms": int(time.time() * 1000),
            },
            headers={"X-Perplexity-Request-Reason": "thread-floating-footer"},
        )
        check_response(response)

    # --- asking --------------------------------------------------------------------------------

    def ask(self, request: AskRequest) -> AskStream:
        """Ask (or follow up); iterate the result for merged snapshots as they arrive."""
        return self._stream(request, lambda gap: self._open_ask(request, gap))

    def ask_api(self, request: AskRequest, api_key: str) -> AskStream:
        """Ask through the public API with an API key: the Agent API (docs/protocol.md §13.2-13.4)."""
        return self._stream(request, lambda gap: self._open_api(request, api_key, gap), api=True)

    def _stream(self, request: AskRequest, opener, api: bool = False, rejoin: str = "") -> AskStream:
        return AskStream(
            request,
            self.timeouts,
            opener,
            self._open_rejoin,
            api=api,
            rejoin=rejoin,
            after=self.remember_cookies,
        )

    async def _open_ask(self, request: AskRequest, gap: float) -> httpx.Response:
        token = jar.session_token(self.cookies)
        cookies = jar.with_session(self.cookies, token) if token else dict(self.cookies)
        headers = ask_headers(request, self.base_url, self.account_id)
        headers["Cookie"] = jar.header(cookies)
        http_request = self._http.build_request(
            "POST",
            f"{self.base_url}/rest/sse/perplexity_ask",
            headers=headers,
            content=json.dumps(ask_body(request)).encode(),
            timeout=httpx.Timeout(connect=self.timeouts.connect, read=gap, write=10.0, pool=10.0),
        )
        return await self._open_stream(http_request, follow_up=request.follow_up is not None)

    def rejoin(self, request: AskRequest, backend_uuid: str) -> AskStream:
        """Rejoin a run Perplexity goes on with after pplxweb lost its stream (a restart, a
        dropped socket; docs/protocol.md §9.1): one whole snapshot, then the usual patches."""
        return self._stream(request, lambda gap: self._open_ask(request, gap), rejoin=backend_uuid)

    async def _open_rejoin(self, backend_uuid: str, gap: float) -> httpx.Response:
        if not RUN_ID.fullmatch(backend_uuid):
            raise RunGone()
        token = jar.session_token(self.cookies)
        cookies = jar.with_session(self.cookies, token) if token else dict(self.cookies)
        headers = self._headers({"Content-Type": "application/json", "Accept": "text/event-stream"})
        headers["Cookie"] = jar.header(cookies)
        if self.account_id:
            headers["x-pplx-account"] = self.account_id
        http_request = self._http.build_request(
            "POST",
            f"{self.base_url}/rest/sse/perplexity_ask/reconnect/{backend_uuid}",
            headers=headers,
            content=b'{"reconnectInitialSnapshot": true}',
            timeout=httpx.Timeout(connect=self.timeouts.connect, read=gap, write=10.0, pool=10.0),
        )
        return await self._open_stream(http_request, rejoin=True)

    async def _open_api(self, request: AskRequest, api_key: str, gap: float) -> httpx.Response:
        http_request = self._http.build_request(
            "POST",
            f"{self.api_url}/v1/agent",
            headers={
                "Authorization": f"Bearer {api_key}",
                "Accept": "text/event-stream",
                "Content-Type": "application/json",
            },
            content=json.dumps(agent_body(request)).encode(),
            timeout=httpx.Timeout(connect=self.timeouts.connect, read=gap, write=10.0, pool=10.0),
        )
        try:
            return await self._open_stream(http_request)
        except AuthError:
            raise AuthError("Perplexity did not accept the API key. Check it in Settings.") from None

    async def _open_stream(
        self, http_request: httpx.Request, rejoin: bool = False, follow_up: bool = False
    ) -> httpx.Response:
        response = await self._send(http_request)
        content_type = response.headers.get("content-type", "").lower()
        if response.status_code >= 300 or "text/html" in content_type:
            try:
                await read_limited(response)
            finally:
                await response.aclose()
            empty = response.content.strip() in (b"{}", b"")
            if rejoin and response.status_code in (403, 404) and empty:
                raise RunGone()
            if follow_up and response.status_code == 403 and empty and not looks_like_challenge(response):
                raise FollowUpRefused()  # the thread, or the session? (docs/protocol.md §12.4)
            check_response(response)
            raise (
                ChallengeError()
                if looks_like_challenge(response)
                else ProtocolError("Perplexity answered with a web page instead of an answer.")
            )
        return response
