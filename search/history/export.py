"""History out: Markdown and JSON for a thread, and a zip of everything (search.history.imports takes
them back in)."""

from __future__ import annotations

import json
import re
import tempfile
import time
import zipfile
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from search import clarifications, images, versions
from search.attachments import archive as attachment_archive
from search.citations import as_footnotes
from search.display import carried_text, catalogue_models, model_label
from search.markdown_links import safe_links
from search.models import Entry, Thread

FORMAT = "pplxweb-history/1"
READ_BATCH = 200  # threads read per query while exporting
SEND_SIZE = 256 * 1024  # the export is sent in parts of about this size


def _demoted(report: str) -> str:
    """A report's headings three levels down, so they sit under its "### Research report"."""
    return re.sub(r"^(#{1,3})(?=[ \t])", lambda m: "#" * min(len(m.group(1)) + 3, 6), report, flags=re.M)


def _kept_images(entry: Entry) -> list[dict]:
    return [r for r in entry.images if isinstance(r, dict) and isinstance(r.get("n"), int)]


def _zip_name(entry: Entry, record: dict) -> str | None:
    """Where a saved image goes in the history zip (None: not saved)."""
    path = images.path_of(entry.pk, record)
    return f"images/{entry.pk}-{record['n']}{path.suffix}" if path else None


def thread_markdown(thread: Thread, in_zip: bool = False, models: dict | None = None) -> str:
    """The thread as Markdown, each answer's model by name as the page shows it (`models`: the
    catalogue's, read once by the caller for many threads); `in_zip`: it sits in the history
    zip's markdown/ folder, beside images/ with the saved images, and shows them."""
    models = catalogue_models() if models is None else models
    lines = [f"# {thread.title}", ""]
    for entry in versions.every(thread.entries.all()):
        model = f" · {model_label(entry.model, models)}" if entry.model else ""
        shown = f" · {versions.label(entry.place, entry.shown)}" if entry.place.of > 1 else ""
        lines += [
            f"## {entry.question}",
            "",
            f"*{entry.created:%Y-%m-%d %H:%M} · {entry.get_status_display()}{model}{shown}*",
            "",
        ]
        lines += clarifications.markdown_lines(entry.clarifications)
        if entry.carried:
            lines += [f"*{carried_text(entry.carried)}*", ""]
        lines += [as_footnotes(entry.answer, len(entry.sources)).strip() or "*(no answer)*", ""]
        if entry.report:  # its [n] count the same sources as the answer's: the footnotes below
            lines += [
                "### Research report",
                "",
                as_footnotes(_demoted(entry.report), len(entry.sources)).strip(),
                "",
            ]
        if entry.error:
            lines += [f"> {entry.error}", ""]
        lines += attachment_archive.markdown_lines(entry, in_zip)
        for record in _kept_images(entry):
            caption = re.sub(
                r"([\\\[\]])", r"\\\1", " ".join(str(record.get("caption") or "Generated image").split())
            )
            name = _zip_name(entry, record) if in_zip else None
            lines += [f"![{caption}](../{name})" if name else f"*Generated image: {caption}*", ""]
        for n, source in enumerate(entry.sources, start=1):
            lines.append(f"[^{n}]: [{source.get('title') or source.get('url')}]({source.get('url')})")
        if entry.sources:
            lines.append("")
        if entry.related:
            lines += ["**Related:**", *(f"- {q}" for q in entry.related), ""]
    return safe_links("\n".join(lines).rstrip() + "\n")  # no link but http(s)/mailto, no raw HTML


def entry_json(entry: Entry, turn: int = 1) -> dict:
    """An entry for the JSON export; `turn`: its turn's place in the conversation (1, 2, ...):
    entries of one turn are its versions, one of them `shown`."""
    return {
        "turn": turn,
        "shown": entry.shown,
        "question": entry.question,
        "created": entry.created.isoformat(),
        "status": entry.status,
        "answer": entry.answer,
        "report": entry.report,
        "clarifications": entry.clarifications,  # search/clarifications.py
        "sources": entry.sources,
        "related": entry.related,
        "steps": entry.steps,
        "options": entry.options,
        "model_asked": entry.model_asked,
        "model": entry.model,
        "error": entry.error,
        "backend_uuid": entry.backend_uuid,
        # its Perplexity thread (a conversation can span several): follow-ups go on from it
        "context_uuid": entry.context_uuid,
        "read_write_token": entry.read_write_token,
        "upstream_expires": entry.upstream_expires.isoformat() if entry.upstream_expires else None,
        "carried": entry.carried,  # why it was asked in a new Perplexity thread ("" if it was not)
        "origin": entry.origin,  # "perplexity": imported from the Perplexity library
        "asked_by": entry.asked_by,  # the agent token's name when an agent asked it
        "images": [  # "file": its place in the history zip (a thread's own JSON has no files)
            {
                "caption": str(r.get("caption") or ""),
                "width": r.get("width") or 0,
                "height": r.get("height") or 0,
                "file": _zip_name(entry, r),
                "error": str(r.get("error") or ""),
            }
            for r in _kept_images(entry)
        ],
        "attachments": attachment_archive.listed(entry),  # "file": likewise
    }


def thread_json(thread: Thread) -> dict:
    return {
        "title": thread.title,
        "created": thread.created.isoformat(),
        "read_write_token": thread.read_write_token,
        "thread_url_slug": thread.thread_url_slug,
        "entries": [
            entry_json(e, turn)
            for turn, versions_of_turn in enumerate(versions.turns(thread.entries.all()), start=1)
            for e in versions_of_turn
        ],
    }


def _threads_in_order(user) -> Iterator[Thread]:
    """The person's threads, oldest first, with their entries: READ_BATCH threads per query, so
    an export's memory does not grow with the history."""
    query = (
        Thread.objects.filter(user=user)
        .order_by("created", "pk")
        .prefetch_related("entries", "entries__attachments")
    )
    after = None
    while True:
        page = query
        if after is not None:
            page = page.filter(Q(created__gt=after.created) | Q(created=after.created, pk__gt=after.pk))
        batch = list(page[:READ_BATCH])
        yield from batch
        if len(batch) < READ_BATCH:
            return
        after = batch[-1]


class _Pipe:
    """What the zip writes goes here, for the response to take: a stream with no seek, so
    zipfile writes each member's sizes after it (any size, no going back)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0

    def write(self, data) -> int:
        self.chunks.append(bytes(data))
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def take(self, at_least: int = 0) -> bytes:
        """What was written since, once there is at least that much (b"" until then)."""
        if self.size < at_least:
            return b""
        data = b"".join(self.chunks)
        self.chunks.clear()
        self.size = 0
        return data


def history_zip(user) -> Iterator[bytes]:
    """The person's whole history as a zip, yielded as it is written: a conversation's Markdown
    (and its images) at a time. history.json lists one conversation per line (valid JSON, and
    import reads it line by line); it is gathered in a temporary file and goes last."""
    pipe = _Pipe()
    with (
        tempfile.TemporaryFile(prefix="export-", dir=settings.TEMP_DIR) as listing,
        zipfile.ZipFile(pipe, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        listing.write(json.dumps({"format": FORMAT, "exported": timezone.now().isoformat()})[:-1].encode())
        listing.write(b', "threads": [\n')
        separator = b""
        models = catalogue_models()
        for thread in _threads_in_order(user):
            slug = re.sub(r"[^\w-]+", "-", thread.title.lower()).strip("-")[:60] or "thread"
            archive.writestr(
                f"markdown/{thread.created:%Y-%m-%d}-{thread.pk}-{slug}.md",
                thread_markdown(thread, in_zip=True, models=models),
            )
            listing.write(separator + json.dumps(thread_json(thread), ensure_ascii=False).encode())
            separator = b",\n"
            for entry in thread.entries.all():
                attachment_archive.write(archive, entry)
                for record in _kept_images(entry):
                    if name := _zip_name(entry, record):
                        archive.write(images.path_of(entry.pk, record), name, zipfile.ZIP_STORED)
                        if part := pipe.take(SEND_SIZE):
                            yield part
            if part := pipe.take(SEND_SIZE):
                yield part
        listing.write(b"\n]}\n")
        member = zipfile.ZipInfo("history.json", time.localtime()[:6])
        member.compress_type = zipfile.ZIP_DEFLATED
        member.file_size = listing.tell()  # tells zipfile whether it needs ZIP64 for this one
        listing.seek(0)
        with archive.open(member, "w") as out:
            while chunk := listing.read(1024 * 1024):
                out.write(chunk)
                if part := pipe.take(SEND_SIZE):
                    yield part
    yield pipe.take()  # the zip's directory, written as it closed
