"""A fetched library thread saved as a pplxweb conversation a page at a time (runner.py reads the
thread page by page and hands each one here, so a thread of any length is never held whole): one
transaction per page; a turn already here (its backend_uuid, for this person) is never written
twice, so a thread fetched again (after a stop, or at the next sync) goes on where it stopped.
Upstream text goes through search.saving, as on every path that saves it."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from pplxweb.perplexity.library import Turn, parse_time
from search import clarifications, images, rendered, storage
from search.models import Entry, LibraryThread, Thread
from search.saving import clean, fitted, kept

ORIGIN = "perplexity"
LOOKUP_BATCH = 500
UUID = 200  # Entry.backend_uuid's length
NO_QUESTION = "(Perplexity kept no question for this turn)"
NO_ANSWER = "Perplexity kept no answer for this question."
ALREADY = "Its questions are all here already, in another conversation."
NO_QUESTIONS = "It has no questions in it."
IMAGE_PENDING = "This image was not saved: the import stopped before it was downloaded."


@dataclass
class Saved:
    thread_id: int | None
    new: list[tuple[int, Turn]]  # (entry id, turn) of the turns written now
    already: int  # turns that were here before


def _here(user_id: int, uuids: list[str]) -> dict[str, int]:
    """backend_uuid -> thread id of this person's entries among these."""
    found: dict[str, int] = {}
    for start in range(0, len(uuids), LOOKUP_BATCH):
        rows = Entry.objects.filter(user=user_id, backend_uuid__in=uuids[start : start + LOOKUP_BATCH])
        found.update(rows.values_list("backend_uuid", "thread_id"))
    return found


def save_page(row_id: int, turns: list[Turn], reports: dict[str, str]) -> Saved:
    """Write one page's turns not here yet into the row's conversation (made with its first new
    turn); `reports`: report Markdown fetched for turns, by backend_uuid. The row stays as it
    is (finish() says how the thread ended)."""
    with transaction.atomic():
        row = LibraryThread.objects.select_for_update().get(pk=row_id)
        # a turn is known by its id as it is stored: cleaned, as everything from upstream
        unique = list({clean(t.backend_uuid, UUID): t for t in turns if t.backend_uuid}.items())
        here = _here(row.user_id, [uuid for uuid, _ in unique])
        fresh = [(uuid, t) for uuid, t in unique if uuid not in here]
        thread = Thread.objects.filter(pk=row.thread_id).first() if row.thread_id else None
        if thread is None and here:  # its turns came here another way (asked in pplxweb)
            ids = set(here.values())
            thread = Thread.objects.filter(pk__in=ids, user=row.user_id, upstream__isnull=True).first()
        if thread is None and not fresh:
            return Saved(None, [], len(here))
        if thread is None:
            thread = Thread.objects.create(user_id=row.user_id, title=_title(row, [t for _, t in unique]))
        entries = Entry.objects.bulk_create(_entry(thread, row.user_id, u, t, reports) for u, t in fresh)
        when = [t.created or parse_time(row.activity) or timezone.now() for _, t in fresh]
        for entry, moment in zip(entries, when, strict=True):
            entry.created = moment  # Perplexity's moment, not the import's (auto_now_add set it)
        if entries:
            Entry.objects.bulk_update(entries, ["created"], batch_size=LOOKUP_BATCH)
            rendered.keep_large(entries)
        _update_thread(thread, row, unique[-1][1] if unique else None, when)
        if row.thread_id != thread.pk:
            row.thread = thread
            row.save(update_fields=["thread"])
        return Saved(thread.pk, [(e.pk, t) for e, (_, t) in zip(entries, fresh, strict=True)], len(here))


def finish(row_id: int, already: int, note: str = "") -> LibraryThread:
    """The thread was read to its end (or as far as pplxweb reads one: `note` says so): `done`
    when it has a conversation here, else `skipped` with why."""
    row = LibraryThread.objects.get(pk=row_id)
    if row.thread_id is None:
        return mark(row_id, LibraryThread.State.SKIPPED, ALREADY if already else NO_QUESTIONS)
    return mark(row_id, LibraryThread.State.DONE, note)


def _title(row: LibraryThread, turns: list[Turn]) -> str:
    first = turns[0] if turns else None
    return clean(
        row.title or (first.title if first else "") or (first.question if first else "") or row.slug, 300
    )


def _entry(thread: Thread, user_id: int, uuid: str, turn: Turn, reports: dict[str, str]) -> Entry:
    report = kept(reports.get(turn.backend_uuid) or turn.report, "report")
    failed = turn.status == "failed" and not report
    fields = fitted(
        Entry,
        {
            "question": clean(turn.question).strip() or NO_QUESTION,
            "options": {"model": turn.model, "mode": turn.mode} if turn.model or turn.mode else {},
            "answer": kept(turn.answer),
            "report": report,
            "sources": [{k: v[:2000] for k, v in s.as_dict().items()} for s in turn.sources[:200]],
            "related": [q[:500] for q in turn.related[:20]],
            "clarifications": [clarifications.record(a.question, a.answers) for a in turn.clarifying],
            "images": [
                {"n": n, "error": IMAGE_PENDING} for n, _ in enumerate(turn.images[: images.MAX_PER_ENTRY])
            ],
            "model_asked": turn.model,
            "model": turn.model,
            "context_uuid": turn.context_uuid,
            "error": NO_ANSWER if failed else "",
        },
    )
    return Entry(
        thread=thread,
        user_id=user_id,
        status=Entry.Status.FAILED if failed else Entry.Status.COMPLETED,
        credential="session",
        backend_uuid=uuid,
        origin=ORIGIN,
        import_bytes=storage.text_size(fields),
        **fields,
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
        Thread.objects.filter(pk=thread.pk).update(**fitted(Thread, fields))


def save_images(entry_id: int, records: list[dict]) -> None:
    fields = {"images": records, "image_bytes": storage.image_size(records)}
    Entry.objects.filter(pk=entry_id).update(**fitted(Entry, fields))


def mark(row_id: int, state: str, reason: str = "", deleted: bool = False) -> LibraryThread:
    row = LibraryThread.objects.get(pk=row_id)
    row.state, row.reason = state, clean(reason, 300)
    row.deleted = row.deleted or deleted
    row.save(update_fields=["state", "reason", "deleted"])
    return row
