"""Asking for an agent and following the answer: the use-cases behind /v1/ and /mcp.

A question starts exactly as the page's do (search.live.starts.start, then runner.launch in this
process), so it is saved, counted against the person's limits, live on their open pages and in
their history. The request that asked follows its run in-process (Run.updated); an answer running
in another server process (a retry that joined it) is followed in the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db.models import Q
from django.http import QueryDict
from django.utils import timezone

from accounts.models import AgentToken, PerplexityAccount
from accounts.services import labelled, model_choices
from accounts.services.catalogue import BEST
from pplxweb import sockets
from search.api import conversations
from search.api.errors import ApiError, invalid
from search.citations import as_footnotes
from search.live import asking, runner, starts
from search.models import Entry
from search.saving import clean

RESEARCH = "deep-research"
MODES = {"quick": "auto", "auto": "auto", "pro": "pro", "research": "research"}
JOIN_WINDOW = timedelta(seconds=60)  # a retry this soon after an answer ended gets that answer
POLL = 1.0  # seconds between looks at an answer another server process runs
PARTIAL_MARK = re.compile(r"\[\d{0,3}$")  # a citation still arriving ("[1" of "[12]")
REFUSALS = {  # starts.NotStarted.kind -> (status, OpenAI's type, code)
    "invalid": (400, "invalid_request_error", "invalid_request"),
    "limit": (429, "rate_limit_error", "rate_limit_exceeded"),
    "busy": (409, "invalid_request_error", "conversation_busy"),
    "credential": (403, "permission_error", "no_perplexity_link"),
    "not_found": (404, "not_found_error", "conversation_not_found"),
    "removed": (401, "authentication_error", "person_removed"),
    "server": (500, "server_error", "not_started"),
}


@dataclass
class Asked:
    """An answer an agent asked for (or joined: the same question asked a moment before)."""

    entry_id: int
    thread_id: int
    research: bool
    joined: bool = False
    run: runner.Run | None = None


@dataclass(frozen=True)
class Progress:
    text: str  # the answer (a research run's report) so far, citations as footnote marks
    steps: tuple[str, ...] = ()
    ended: bool = False


@dataclass(frozen=True)
class Final:
    entry_id: int
    thread_id: int
    status: str
    content: str  # the reply: Markdown, citations as footnotes, the sources listed under it
    error: str = ""
    sources: list = field(default_factory=list)

    @property
    def citations(self) -> list[str]:
        return [s.get("url") for s in self.sources if isinstance(s, dict) and s.get("url")]


# --- models ---------------------------------------------------------------------------------------


def models_for(user) -> list[tuple[str, str]]:
    """(id, name) of every model an agent may name: best, deep-research, then the catalogue's."""
    tier = PerplexityAccount.objects.filter(user=user).values_list("tier", flat=True).first() or ""
    listed = [(slug, name) for slug, name in labelled(model_choices(), tier) if slug != BEST]
    return [("best", "Best"), (RESEARCH, "Deep research"), *listed]


def resolved(model: str | None, mode: str | None) -> tuple[str, str]:
    """The page's (model, mode) for an agent's model id and mode ("" = the person's default);
    ApiError 404 for a model that is not there, 400 for a mode that is not."""
    if mode is not None and mode not in MODES:
        raise invalid(f"mode is one of {', '.join(m for m in MODES if m != 'auto')}.", "invalid_mode")
    chosen = MODES.get(mode or "", "")
    if model in (None, "", "best"):
        return BEST, chosen
    if model == RESEARCH:
        return "", "research"
    if isinstance(model, str) and model in {c.slug for c in model_choices()}:
        return model, chosen or "named"  # a model named on purpose is asked for (see _start)
    raise ApiError(
        404,
        f"There is no model “{str(model)[:80]}” here; GET /v1/models lists them.",
        "not_found_error",
        "model_not_found",
    )


# --- asking ---------------------------------------------------------------------------------------


async def ask(
    token: AgentToken, question: str, model: str | None = None, mode: str | None = None, thread_id=None
) -> Asked:
    """Start the answer (or join the same question asked a moment before), tell the person's
    open pages, and return it to follow. ApiError when nothing was started."""
    started = await database_sync_to_async(_start)(token, question, model, mode, thread_id)
    if isinstance(started, Asked):
        started.run = runner.RUNS.get(started.entry_id)
        return started
    entry, request, preloaded, research = started
    run = runner.launch(entry, token.user, request, **preloaded)
    message = {"type": "person.asked", "entry": entry.pk, "thread": entry.thread_id}
    await get_channel_layer().group_send(sockets.group(token.user_id), message)
    return Asked(entry.pk, entry.thread_id, research, run=run)


def _start(token: AgentToken, question: str, model, mode, thread_id):
    user = token.user
    question = clean(question).strip()
    slug, chosen = resolved(model, mode)
    if chosen == "named":  # quick mode answers with Perplexity's own model, whatever is named
        defaults = asking.defaults_of_member(user)
        chosen = "pro" if defaults is None or defaults.mode == "auto" else ""
    joined = _joinable(token, question, thread_id)
    if joined is not None:
        return joined
    data = QueryDict(mutable=True)
    data.update({"q": question, "thread": str(thread_id or ""), "model": slug, "mode": chosen})
    try:
        entry, request, preloaded = starts.start(user, data, asked_by=token.name, exclusive=True)
    except starts.NotStarted as exc:
        status, kind, code = REFUSALS[exc.kind]
        raise ApiError(status, exc.message, kind, code, exc.retry_after) from None
    return entry, request, preloaded, request.options.research


def _joinable(token: AgentToken, question: str, thread_id) -> Asked | None:
    """The same question from the same token, running or ended a moment ago, in the same place
    (the same conversation, or a new one): a client's retry, answered by that answer rather than
    by asking (and paying) again."""
    recent = Q(status=Entry.Status.RUNNING) | Q(heartbeat__gte=timezone.now() - JOIN_WINDOW)
    same = Entry.objects.filter(user=token.user, asked_by=token.name, question=question).filter(recent)
    for entry in same.order_by("-pk")[:5]:
        first = not Entry.objects.filter(thread_id=entry.thread_id, pk__lt=entry.pk).exists()
        if (entry.thread_id == thread_id) if thread_id else first:
            research = asking.options_from_json(entry.options).research
            return Asked(entry.pk, entry.thread_id, research, joined=True)
    return None


# --- following ------------------------------------------------------------------------------------


async def progress(asked: Asked, every: float) -> AsyncIterator[Progress]:
    """The answer as it grows: after each update of its run, or at least every `every` seconds
    (the same again when nothing changed); the last has ended=True."""
    run = asked.run
    if run is None:
        async for seen in _polled(asked, every):
            yield seen
        return
    while True:
        with contextlib.suppress(TimeoutError):  # the same again: the caller's own checks go on
            await asyncio.wait_for(run.updated(), every)
        result = run.result
        ended = run.ended or run.main.done()
        text = (result.report if asked.research else result.answer) if result else ""
        steps = tuple(s.text for s in result.steps) if result else ()
        yield Progress(_shown(text, len(result.sources) if result else 0, ended), steps, ended)
        if ended:
            return


async def _polled(asked: Asked, every: float) -> AsyncIterator[Progress]:
    while True:
        row = await database_sync_to_async(
            Entry.objects.filter(pk=asked.entry_id)
            .values("status", "answer", "report", "sources", "steps")
            .first
        )()
        ended = row is None or row["status"] != Entry.Status.RUNNING
        if row is not None:
            text = row["report"] if asked.research else row["answer"]
            steps = tuple(str(s.get("text") or "") for s in row["steps"] if isinstance(s, dict))
            yield Progress(_shown(text, len(row["sources"]), ended), steps, ended)
        if ended:
            return
        await asyncio.sleep(min(every, POLL))


def _shown(text: str, sources: int, ended: bool) -> str:
    shown = as_footnotes(text or "", sources).strip()
    return shown if ended else PARTIAL_MARK.sub("", shown)


async def final(asked: Asked) -> Final:
    """The saved answer, once its run ended."""

    def read() -> Final:
        entry = Entry.objects.filter(pk=asked.entry_id).first()
        if entry is None:
            return Final(asked.entry_id, asked.thread_id, "deleted", "", "This answer was deleted meanwhile.")
        content = conversations.reply_text(entry)
        return Final(entry.pk, entry.thread_id, entry.status, content, entry.error, list(entry.sources))

    return await database_sync_to_async(read)()
