"""History out and back in: Markdown and JSON for a thread, a zip of everything, and import."""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from search.models import Entry, Thread

FORMAT = "pplxweb-history/1"
MAX_IMPORT = 50 * 1024 * 1024
CITATION = re.compile(r"\[(\d{1,3})\]")
STATUSES = {s for s, _ in Entry.Status.choices}


class ImportRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _answer_with_footnotes(entry: Entry) -> str:
    count = len(entry.sources)
    return CITATION.sub(
        lambda m: f"[^{m.group(1)}]" if 1 <= int(m.group(1)) <= count else m.group(0), entry.answer
    )


def thread_markdown(thread: Thread) -> str:
    lines = [f"# {thread.title}", ""]
    for entry in thread.entries.all():
        lines += [
            f"## {entry.question}",
            "",
            f"*{entry.created:%Y-%m-%d %H:%M} · {entry.get_status_display()}"
            f"{' · ' + entry.model if entry.model else ''}*",
            "",
        ]
        lines += [_answer_with_footnotes(entry).strip() or "*(no answer)*", ""]
        if entry.error:
            lines += [f"> {entry.error}", ""]
        for n, source in enumerate(entry.sources, start=1):
            lines.append(f"[^{n}]: [{source.get('title') or source.get('url')}]({source.get('url')})")
        if entry.sources:
            lines.append("")
        if entry.related:
            lines += ["**Related:**", *(f"- {q}" for q in entry.related), ""]
    return "\n".join(lines).rstrip() + "\n"


def entry_json(entry: Entry) -> dict:
    return {
        "question": entry.question,
        "created": entry.created.isoformat(),
        "status": entry.status,
        "answer": entry.answer,
        "sources": entry.sources,
        "related": entry.related,
        "steps": entry.steps,
        "options": entry.options,
        "model_asked": entry.model_asked,
        "model": entry.model,
        "error": entry.error,
        "backend_uuid": entry.backend_uuid,
    }


def thread_json(thread: Thread) -> dict:
    return {
        "title": thread.title,
        "created": thread.created.isoformat(),
        "read_write_token": thread.read_write_token,
        "thread_url_slug": thread.thread_url_slug,
        "entries": [entry_json(e) for e in thread.entries.all()],
    }


def history_zip(user) -> bytes:
    buffer = io.BytesIO()
    threads = Thread.objects.filter(user=user).prefetch_related("entries").order_by("created")
    everything = {"format": FORMAT, "exported": timezone.now().isoformat(), "threads": []}
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for thread in threads:
            slug = re.sub(r"[^\w-]+", "-", thread.title.lower()).strip("-")[:60] or "thread"
            archive.writestr(
                f"markdown/{thread.created:%Y-%m-%d}-{thread.pk}-{slug}.md", thread_markdown(thread)
            )
            everything["threads"].append(thread_json(thread))
        archive.writestr("history.json", json.dumps(everything, ensure_ascii=False, indent=1))
    return buffer.getvalue()


def _when(value) -> datetime:
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise ImportRefused("A date in the file is not a date; nothing was imported.")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


def _checked(data) -> list[dict]:
    if isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("threads"), list):
        threads = data["threads"]
    elif isinstance(data, dict) and isinstance(data.get("entries"), list):
        threads = [data]  # one exported thread
    else:
        raise ImportRefused(
            "That is not a pplxweb history export (history.json or a thread's JSON); nothing was imported."
        )
    for thread in threads:
        if (
            not isinstance(thread, dict)
            or not isinstance(thread.get("entries"), list)
            or not thread["entries"]
        ):
            raise ImportRefused("A conversation in the file has no entries; nothing was imported.")
        for entry in thread["entries"]:
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("question"), str)
                or not entry["question"].strip()
            ):
                raise ImportRefused("An entry in the file has no question; nothing was imported.")
            if entry.get("status", "completed") not in STATUSES or not isinstance(
                entry.get("sources", []), list
            ):
                raise ImportRefused("An entry in the file is malformed; nothing was imported.")
            _when(entry.get("created"))
    return threads


def import_history(user, raw: bytes) -> tuple[int, int]:
    """Restore exported threads for `user`; (imported, skipped as already there). All or nothing."""
    if len(raw) > MAX_IMPORT:
        raise ImportRefused("That file is larger than 50 MB; nothing was imported.")
    if raw[:2] == b"PK":
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                raw = archive.read("history.json")
        except (zipfile.BadZipFile, KeyError):
            raise ImportRefused("That zip has no history.json in it; nothing was imported.") from None
    try:
        data = json.loads(raw)
    except ValueError:
        raise ImportRefused("That file is not valid JSON; nothing was imported.") from None
    threads = _checked(data)
    imported = skipped = 0
    with transaction.atomic():
        for thread in threads:
            first = thread["entries"][0]
            created = _when(first["created"])
            if Entry.objects.filter(thread__user=user, question=first["question"], created=created).exists():
                skipped += 1
                continue
            new = Thread.objects.create(
                user=user,
                title=str(thread.get("title") or first["question"])[:300],
                read_write_token=str(thread.get("read_write_token") or "")[:200],
                thread_url_slug=str(thread.get("thread_url_slug") or "")[:200],
            )
            for item in thread["entries"]:
                entry = Entry.objects.create(
                    thread=new,
                    user=user,
                    question=item["question"],
                    status=item.get("status") or "completed",
                    answer=str(item.get("answer") or ""),
                    sources=item.get("sources") or [],
                    related=item.get("related") or [],
                    steps=item.get("steps") or [],
                    options=item.get("options") or {},
                    model_asked=str(item.get("model_asked") or "")[:80],
                    model=str(item.get("model") or "")[:80],
                    error=str(item.get("error") or ""),
                    backend_uuid=str(item.get("backend_uuid") or "")[:200],
                )
                Entry.objects.filter(pk=entry.pk).update(created=_when(item["created"]))
            Thread.objects.filter(pk=new.pk).update(created=created)
            imported += 1
    return imported, skipped
