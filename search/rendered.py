"""A saved entry's HTML, rendered once: when a live answer ends (search.live.runner) or a long
imported one is saved (`keep_large`), else at the first page that shows it (a short imported
answer, an upgrade), and kept in search_rendered with a key of what
it was made from (answer, report, sources, render.RENDERER). A page load reads it back; a
change of any of these (a redo, a sync, a new renderer) renders it again, once. `manage.py
render_answers` renders every missing or stale one ahead of the pages.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass, field

from channels.db import database_sync_to_async
from django.db import DatabaseError

from search.models import Entry, Rendered
from search.render import RENDERER, render_answer, render_report

log = logging.getLogger(__name__)
AHEAD = 32 * 1024  # an imported answer this long is rendered when saved; a shorter one (tens of
# milliseconds) at the first page that shows it, so imports stay as fast as they were


@dataclass
class Html:
    answer: str = ""
    report: str = ""
    toc: list[dict] = field(default_factory=list)


def key(entry: Entry) -> str:
    """What the HTML was made from, as a digest (a 300 KB answer: well under a millisecond)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (str(RENDERER), entry.answer, entry.report, json.dumps(entry.sources, sort_keys=True)):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def source_refs(entry_id: int) -> str:
    """The start of the ids of an entry's listed sources, which its report's chips link to."""
    return f"s{entry_id}-"


def make(entry: Entry) -> Html:
    """The entry's HTML, rendered now (no database: callable from any thread)."""
    refs = source_refs(entry.pk)
    report, toc = render_report(entry.report, entry.sources, refs) if entry.report else ("", [])
    return Html(str(render_answer(entry.answer, entry.sources)), str(report), toc)


def kept(entry: Entry) -> Html | None:
    """The stored HTML when it is that of the entry as it is now."""
    try:
        row = entry.rendered
    except Rendered.DoesNotExist:
        return None
    return Html(row.answer, row.report, row.toc) if row.key == key(entry) else None


def store(entry: Entry, html: Html) -> None:
    """Keep `html` as the entry's (a failure to write is logged: the page still shows it)."""
    try:
        Rendered.objects.update_or_create(
            entry_id=entry.pk,
            defaults={"key": key(entry), "answer": html.answer, "report": html.report, "toc": html.toc},
        )
    except DatabaseError:
        log.exception("keeping the HTML of entry %s failed", entry.pk)


def html(entry: Entry) -> Html:
    """The entry's HTML for a page: stored, else rendered and stored (a running entry's is
    rendered each time: it is still changing)."""
    if entry.running:
        return make(entry)
    found = kept(entry)
    if found is None:
        found = make(entry)
        store(entry, found)
    return found


def keep_large(entries: list[Entry]) -> None:
    """Imported entries (just saved): the long ones rendered and stored now."""
    for entry in entries:
        if len(entry.answer) + len(entry.report) >= AHEAD:
            store(entry, make(entry))


async def keep(entry_id: int) -> None:
    """A finished live answer's HTML, rendered in a worker thread (the event loop goes on) and
    stored; a failure is logged (the first page renders it instead)."""
    try:
        entry = await database_sync_to_async(_finished)(entry_id)
        if entry is not None:
            made = await asyncio.to_thread(make, entry)
            await database_sync_to_async(store)(entry, made)
    except Exception:
        log.exception("rendering entry %s for keeping failed", entry_id)


def _finished(entry_id: int) -> Entry | None:
    return Entry.objects.exclude(status=Entry.Status.RUNNING).filter(pk=entry_id).first()


def render_stale(batch: int = 200) -> tuple[int, int]:
    """Render every finished entry whose stored HTML is missing or stale: (looked at, rendered)."""
    seen = done = 0
    after = 0
    while True:
        entries = list(
            Entry.objects.exclude(status=Entry.Status.RUNNING)
            .filter(pk__gt=after)
            .select_related("rendered")
            .order_by("pk")[:batch]
        )
        for entry in entries:
            seen += 1
            if kept(entry) is None:
                store(entry, make(entry))
                done += 1
        if len(entries) < batch:
            return seen, done
        after = entries[-1].pk
