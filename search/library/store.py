"""A fetched library thread saved as a pplxweb conversation, whole or not at all: one transaction
per thread; a turn already here (its backend_uuid, for this person) is never written twice."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from pplxweb.perplexity.library import Turn, parse_time
from search import clarifications, images, rendered
from search.models import Entry, LibraryThread, Thread
from search.render import scrub
from search.saving import deep

ORIGIN = "perplexity"
MAX_ANSWER = 8 * 1024 * 1024  # characters of one imported answer (or report)
LOOKUP_BATCH = 500
NO_QUESTION = "(Perplexity kept no question for this turn)"
NO_ANSWER = "Perplexity kept no answer for this question."
CUT = "This answer was longer than pplxweb keeps ({} MB); the rest was left out."
ALREADY = "Its questions are all here already, in another conversation."
IMAGE_PENDING = "This image was not saved: the import stopped before it was downloaded."


@dataclass
class Saved:
    thread_id: int | None
    new: list[tuple[int, Turn]]  # (entry id, turn) of the turns written now
    already: int  # turns that were here before


def clean(text: str) -> str:
    """Upstream text as the database takes it: no lone surrogates, no NUL (PostgreSQL refuses it)."""
    return scrub(text).replace("\x00", "")


def _text(value: str, limit: int = MAX_ANSWER) -> tuple[str, bool]:
    value = clean(value)
    return (value[:limit], True) if len(value) > limit else (value, False)


def _here(user_id: int, uuids: list[str]) -> dict[str, int]:
    """backend_uuid -> thread id of this person's entries among these."""
    found: dict[str, int] = {}
    for start in range(0, len(uuids), LOOKUP_BATCH):
        rows = Entry.objects.filter(user=user_id, backend_uuid__in=uuids[start : start + LOOKUP_BATCH])
        found.update(rows.values_list("backend_uuid", "thread_id"))
    return found


def save_thread(row_id: int, turns: list[Turn], reports: dict[str, str]) -> Saved:
    """Write the turns not here yet into the row's conversation (made if needed); `reports`:
    report Markdown fetched for turns, by backend_uuid. The row becomes `done`."""
    with transaction.atomic():
        row = LibraryThread.objects.select_for_update().get(pk=row_id)
        unique = list({t.backend_uuid: t for t in turns if t.backend_uuid}.values())
        here = _here(row.user_id, [t.backend_uuid for t in unique])
        fresh = [t for t in unique if t.backend_uuid not in here]
        thread = Thread.objects.filter(pk=row.thread_id).first() if row.thread_id else None
        if thread is None and here:  # its turns came here another way (asked in pplxweb)
            ids = set(here.values())
            thread = Thread.objects.filter(pk__in=ids, user=row.user_id, upstream__isnull=True).first()
        if thread is None and not fresh:
            row.state = LibraryThread.State.SKIPPED
            row.reason = ALREADY if here else "It has no questions in it."
            row.save(update_fields=["state", "reason"])
            return Saved(None, [], len(here))
        last = unique[-1] if unique else None
        if thread is None:
            thread = Thread.objects.create(user_id=row.user_id, title=_title(row, unique))
        entries = Entry.objects.bulk_create(_entry(thread, row.user_id, t, reports) for t in fresh)
        when = [t.created or parse_time(row.activity) or timezone.now() for t in fresh]
        for entry, moment in zip(entries, when, strict=True):
            entry.created = moment  # Perplexity's moment, not the import's (auto_now_add set it)
        if entries:
            Entry.objects.bulk_update(entries, ["created"], batch_size=LOOKUP_BATCH)
            rendered.keep_large(entries)
        _update_thread(thread, row, last, when)
        row.thread, row.state, row.reason = thread, LibraryThread.State.DONE, ""
        row.save(update_fields=["thread", "state", "reason"])
        return Saved(thread.pk, [(e.pk, t) for e, t in zip(entries, fresh, strict=True)], len(here))


def _title(row: LibraryThread, turns: list[Turn]) -> str:
    first = turns[0] if turns else None
    return (
        clean(row.title) or (first.title if first else "") or (first.question if first else "") or row.slug
    )[:300]


def _entry(thread: Thread, user_id: int, turn: Turn, reports: dict[str, str]) -> Entry:
    answer, cut = _text(turn.answer)
    report, _ = _text(reports.get(turn.backend_uuid) or turn.report)
    failed = turn.status == "failed" and not report
    return Entry(
        thread=thread,
        user_id=user_id,
        question=clean(turn.question).strip()[:100_000] or NO_QUESTION,
        options={"model": turn.model, "mode": turn.mode} if turn.model or turn.mode else {},
        status=Entry.Status.FAILED if failed else Entry.Status.COMPLETED,
        answer=answer,
        report=report,
        sources=[{k: clean(v)[:2000] for k, v in s.as_dict().items()} for s in turn.sources[:200]],
        related=[clean(q)[:500] for q in turn.related[:20]],
        clarifications=deep([clarifications.record(a.question, a.answers) for a in turn.clarifying]),
        images=[{"n": n, "error": IMAGE_PENDING} for n, _ in enumerate(turn.images[: images.MAX_PER_ENTRY])],
        model_asked=turn.model,
        model=turn.model,
        credential="session",
        backend_uuid=turn.backend_uuid,
        context_uuid=turn.context_uuid,
        origin=ORIGIN,
        error=NO_ANSWER if failed else (CUT.format(MAX_ANSWER // 1024 // 1024) if cut else ""),
    )


def _update_thread(thread: Thread, row: LibraryThread, last: Turn | None, when: list) -> None:
    """The conversation's upstream ids (the latest turn's token and slug: a slug can change) and
    its place in time (its first and latest turns, not the import's moment)."""
    fields: dict = {}
    if last is not None:
        fields["read_write_token"] = last.read_write_token or thread.read_write_token
        fields["thread_url_slug"] = last.slug or row.slug
    if when:
        span = Entry.objects.filter(thread=thread).aggregate(first=Min("created"), latest=Max("created"))
        fields.update(created=span["first"], updated=span["latest"])
    if fields:
        Thread.objects.filter(pk=thread.pk).update(**fields)


def save_images(entry_id: int, records: list[dict]) -> None:
    Entry.objects.filter(pk=entry_id).update(images=records)


def mark(row_id: int, state: str, reason: str = "", deleted: bool = False) -> LibraryThread:
    row = LibraryThread.objects.get(pk=row_id)
    row.state, row.reason = state, clean(reason)[:300]
    row.deleted = row.deleted or deleted
    row.save(update_fields=["state", "reason", "deleted"])
    return row
