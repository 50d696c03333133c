"""A run's upstream stream, and a conversation that outlives Perplexity's thread.

A follow-up (or a redo of a later turn) continues a Perplexity thread. When that thread is gone
there (an incognito thread past its expiry_time, one deleted, purged or not viewable), the
question is asked in a new thread instead, carrying the conversation's last few turns as context
(search/live/carry.py), and the entry says so in one quiet line (`Entry.carried`, its reason).
Later follow-ups go on from the new thread: they continue from the entry's own ids.

No capture shows how Perplexity refuses such a follow-up; each form docs/protocol.md §12.4 holds
possible is handled:

1. a refusal before the stream naming a thread code (`ThreadGone`);
2. 403 with an empty body (`FollowUpRefused`): the thread is taken for gone only when
   `/api/auth/session` says the session is fine, else it stays the session problem it looks like;
3. a FAILED frame naming a thread code (never shown: the new thread's answer follows);
4. a stream naming another thread (context_uuid or token) than the one followed up: Perplexity
   started a new thread without the earlier turns; that run is stopped at once (terminate, §9.2)
   and asked again with them.

A thread whose expiry_time has passed is not asked at all: the new thread is started directly.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from pplxweb.perplexity.errors import GONE, AuthError, FollowUpRefused, PerplexityError, ThreadGone
from pplxweb.perplexity.merge import Snapshot
from pplxweb.perplexity.request import AskRequest, FollowUp
from search.live import carry, terminate

log = logging.getLogger(__name__)
EXPIRED = "EXPIRED"  # its expiry_time had passed: not asked there
REFUSED = "REFUSED"  # 403 {} with the session fine
NEW_THREAD = "NEW_THREAD"  # answered in another thread than the one followed up
EXPIRY_MARGIN = timedelta(minutes=1)  # a thread this close to its expiry is taken as expired
UNCHECKED = (
    "Perplexity refused to continue this conversation, and pplxweb could not check the linked "
    "session ({reason}). Try again in a moment."
)


def expired(follow_up: FollowUp | None) -> bool:
    return bool(follow_up and follow_up.expires and timezone.now() >= follow_up.expires - EXPIRY_MARGIN)


def gone_in(top: dict, follow_up: FollowUp) -> str:
    """Why a follow-up's stream is not the thread it continued ("" when it is): a FAILED frame
    naming a thread code, or another thread's ids."""
    code = top.get("error_code")
    if isinstance(code, str) and code in GONE:
        return code
    for name, known in (
        ("context_uuid", follow_up.context_uuid),
        ("read_write_token", follow_up.read_write_token),
    ):
        value = top.get(name)
        if known and isinstance(value, str) and value and value != known:
            return NEW_THREAD
    return ""


def open_stream(run, client, credential):
    """The stream a run reads: the public API, a rejoin, or an ask (a follow-up through FollowUpAsk)."""
    if credential.kind == "api_key":
        return client.ask_api(run.request, credential.api_key)
    if run.rejoin:
        return client.rejoin(run.request, run.rejoin)
    if run.request.follow_up is None:
        return client.ask(run.request)
    return FollowUpAsk(run, client)


class FollowUpAsk:
    """A follow-up's stream, as an AskStream reads (`async with`, `async for`, `snapshot`,
    `ended`, `cut`, `first_byte`): the follow-up itself, or when its thread is gone, the question
    with its context in a new thread (the run's `carried` says why)."""

    def __init__(self, run, client) -> None:
        self.run, self.client = run, client
        self.current: Any = None  # the AskStream read now
        self._gen = None

    snapshot = property(lambda self: self.current.snapshot if self.current else Snapshot())
    ended = property(lambda self: bool(self.current and self.current.ended))
    cut = property(lambda self: self.current.cut if self.current else "")
    first_byte = property(lambda self: self.current.first_byte if self.current else None)

    async def __aenter__(self) -> FollowUpAsk:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._gen is not None:
            await self._gen.aclose()

    def __aiter__(self) -> FollowUpAsk:
        return self

    async def __anext__(self) -> Snapshot:
        if self._gen is None:
            self._gen = self._snapshots()
        return await self._gen.__anext__()

    async def _snapshots(self):
        request: AskRequest = self.run.request
        reason = EXPIRED if expired(request.follow_up) else ""
        if not reason:
            stream = self.current = self.client.ask(request)
            try:
                async with stream:
                    async for snapshot in stream:
                        reason = gone_in(snapshot.top, request.follow_up)
                        if reason:
                            break
                        yield snapshot
            except ThreadGone as exc:
                reason = exc.code
            except FollowUpRefused as exc:
                reason = await self._session_fine(exc)
            if reason == NEW_THREAD:
                self._stop_elsewhere(stream.snapshot)
        if not reason:
            return
        log.info(
            "entry %s: its Perplexity thread is gone (%s); asked in a new one", self.run.entry_id, reason
        )
        self.run.carried = reason
        question = await database_sync_to_async(carry.question_for)(self.run.entry_id, request.query)
        carried = replace(request, query=question, follow_up=None, frontend_uuid=str(uuid.uuid4()))
        stream = self.current = self.client.ask(carried)
        async with stream:
            async for snapshot in stream:
                yield snapshot

    async def _session_fine(self, refused: FollowUpRefused) -> str:
        """REFUSED when the session itself is fine (the thread is what is gone); else the refusal
        stays the session problem it looks like."""
        try:
            await self.client.session_info()
        except AuthError:
            raise refused from None
        except PerplexityError as exc:
            raise PerplexityError(UNCHECKED.format(reason=exc.message.rstrip("."))) from None
        return REFUSED

    def _stop_elsewhere(self, snapshot: Snapshot) -> None:
        """The answer Perplexity began in a new thread without the earlier turns: stopped there."""
        top = snapshot.top
        uuid_, context = top.get("backend_uuid"), top.get("context_uuid")
        if isinstance(uuid_, str) and uuid_ and isinstance(context, str) and self.run.credential is not None:
            model = self.run.request.options.model
            terminate.send(self.run.entry_id, self.run.credential, uuid_, context, model)
