"""A run's state as it is saved: its progress every few seconds, its outcome at the end.

`RunState` is what the database learns of a run (the runner's `Run` adds the streaming); the
runner calls these functions on the database thread.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from accounts.services import Credential, record_search
from accounts.services.catalogue import stale as catalogue_stale
from pplxweb.perplexity.extract import Result, Source, Step
from pplxweb.perplexity.library import parse_time
from pplxweb.perplexity.request import AskRequest
from pplxweb.perplexity.sources import file_hits
from search import attachments, images, storage
from search.live import questions
from search.models import Entry, Thread
from search.saving import NOT_SAVED, fitted, save_outcome_failed

log = logging.getLogger(__name__)


@dataclass
class RunState:
    entry_id: int
    user: Any
    request: AskRequest
    thread_id: int = 0
    started: float = field(default_factory=time.monotonic)
    result: Result | None = None
    status: str = Entry.Status.RUNNING
    error: str = ""
    credential: Credential | None = None
    first_byte_ms: int | None = None
    first_text_ms: int | None = None
    snapshot: Any = None  # the latest merged snapshot
    drift: dict = field(default_factory=dict)  # stream shapes pplxweb did not know (drift.unknown)
    downloads: Any = field(init=False, default=None)  # images.Downloads, set by the runner
    files: tuple = ()  # the question's files (search.models.Attachment): the answer's hits mark them
    ended: bool = False  # its outcome is saved (finish_run)
    clarifications: dict = field(default_factory=dict)  # clarifying questions by key (questions.py)
    carried: str = ""  # why it was asked in a new Perplexity thread (search/live/upstream.py)
    place: Any = None  # among its turn's versions (search.versions.Place), None: the only one


def expiry(top: dict) -> datetime | None:
    """When the stream's thread expires there (an incognito one's `expiry_time`, naive UTC in the
    captures, docs/protocol.md §4.5), within the dates a database keeps."""
    moment = parse_time(top.get("expiry_time"))
    return moment if moment is not None and 2000 <= moment.year <= 9000 else None


def saved_result(entry: Entry) -> Result:
    """What an entry saved of its run, as a running result (a rejoined run starts from it)."""
    return Result(
        status="running",
        answer=entry.answer,
        report=entry.report,
        sources=[
            Source(**{k: str(s.get(k) or "") for k in ("title", "url", "snippet", "date")})
            for s in entry.sources
        ],
        steps=[Step(str(s.get("kind") or "step"), str(s.get("text") or "")) for s in entry.steps],
        backend_uuid=entry.backend_uuid,
        context_uuid=entry.context_uuid,
    )


def save_run(run: RunState, final: bool) -> None:
    """Write a run's progress (every few seconds) or its outcome (`final`) to its entry."""
    result = run.result or Result(status="running")
    kept = [record for record in run.downloads.records() if not record.get("pending")]
    fields = {
        "answer": result.answer,  # at most MAX_TEXT characters (extract cut a longer one, saying so)
        "report": result.report,
        "backend_uuid": result.backend_uuid[:200],  # as soon as they arrive (a restart reconnects)
        "context_uuid": result.context_uuid[:200],
        "read_write_token": result.read_write_token,  # its thread's, for the next follow-up
        "upstream_expires": expiry(run.snapshot.top) if run.snapshot is not None else None,
        "carried": run.carried,
        "sources": [s.as_dict() for s in result.sources],
        "steps": [{"kind": s.kind, "text": s.text} for s in result.steps],
        "heartbeat": timezone.now(),
        "first_byte_ms": run.first_byte_ms,
        "first_text_ms": run.first_text_ms,
        "images": kept,
        "image_bytes": storage.image_size(kept),  # what the person's quota counts of them
        "clarifications": questions.kept(run, final),
    }
    if final:
        fields.update(
            status=run.status,
            error=run.error,
            related=list(result.related),
            model=result.model,
            downgraded=result.downgraded,
            drift=run.drift,
            credential=run.credential.kind if run.credential else "",
            done_ms=int((time.monotonic() - run.started) * 1000),
        )
    entry = Entry.objects.filter(pk=run.entry_id)
    # upstream text: no NUL, no lone surrogate, nothing longer than its column (search.saving)
    updated = entry.update(**fitted(Entry, fields))
    if final and updated and run.request.attachments and run.snapshot is not None:
        attachments.mark_cited(run.entry_id, file_hits(run.snapshot))  # "your file" sources
    if not updated and final:  # deleted while it ran: so go its images
        images.remove([run.entry_id])
        return
    if final and (result.read_write_token or result.thread_url_slug):
        thread = Thread.objects.filter(pk=run.thread_id)
        ids = fitted(
            Thread, {"read_write_token": result.read_write_token, "thread_url_slug": result.thread_url_slug}
        )
        if ids["read_write_token"]:
            thread.filter(read_write_token="").update(read_write_token=ids["read_write_token"])
        if ids["thread_url_slug"]:
            thread.filter(thread_url_slug="").update(thread_url_slug=ids["thread_url_slug"])


def finish_run(run: RunState, searched: tuple[Credential, dict] | None) -> bool:
    """A run's end in one trip to the database thread (when many answers end together, each trip
    waits in that thread's queue and costs the event loop a hand-over): the outcome saved, then
    the search recorded against the credential it used (`searched`: with the cookies as
    Perplexity left them; None when no answer came). Returns whether the model catalogue is due
    for its daily refresh."""
    try:
        save_run(run, final=True)
    except Exception:  # never a run stuck as running: failed, with what the database takes
        log.exception("final save of entry %s failed", run.entry_id)
        run.status, run.error = Entry.Status.FAILED, NOT_SAVED
        save_outcome_failed(Entry, run.entry_id, salvage(run))
        return False
    finally:
        run.ended = True
    if searched is None:
        return False
    credential, cookies = searched
    try:
        record_search(run.user, credential, cookies)
    except Exception:  # the answer is saved; the bookkeeping never undoes that
        log.exception("recording the search of entry %s failed", run.entry_id)
        return False
    return credential.kind != "api_key" and run.status == Entry.Status.COMPLETED and catalogue_stale()


def salvage(run: RunState) -> dict[str, Any]:
    """What a run that could not be saved whole may still keep (cleaned when saved)."""
    result = run.result
    if result is None:
        return {"heartbeat": timezone.now()}
    return {
        "answer": result.answer,
        "sources": [s.as_dict() for s in result.sources],
        "steps": [{"kind": s.kind, "text": s.text} for s in result.steps],
        "related": list(result.related),
        "clarifications": questions.kept(run, final=True),
        "heartbeat": timezone.now(),
        "done_ms": int((time.monotonic() - run.started) * 1000),
    }
