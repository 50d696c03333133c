"""History out and back in: Markdown and JSON for a thread, a zip of everything, and import."""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import datetime
from typing import IO

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from search import images
from search.models import Entry, Thread
from search.render import scrub

FORMAT = "pplxweb-history/1"
MAX_IMPORT = 50 * 1024 * 1024  # history.json, or a thread's JSON
MAX_ZIP = 4 * 1024**3  # a history zip, its images included (read from the upload's file, not memory)
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


def _kept_images(entry: Entry) -> list[dict]:
    return [r for r in entry.images if isinstance(r, dict) and isinstance(r.get("n"), int)]


def _zip_name(entry: Entry, record: dict) -> str | None:
    """Where a saved image goes in the history zip (None: not saved)."""
    path = images.path_of(entry.pk, record)
    return f"images/{entry.pk}-{record['n']}{path.suffix}" if path else None


def thread_markdown(thread: Thread, in_zip: bool = False) -> str:
    """The thread as Markdown; `in_zip`: it sits in the history zip's markdown/ folder, beside
    images/ with the saved images, and shows them."""
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
                f"markdown/{thread.created:%Y-%m-%d}-{thread.pk}-{slug}.md",
                thread_markdown(thread, in_zip=True),
            )
            everything["threads"].append(thread_json(thread))
            for entry in thread.entries.all():
                for record in _kept_images(entry):
                    if name := _zip_name(entry, record):
                        archive.write(images.path_of(entry.pk, record), name, zipfile.ZIP_STORED)
        archive.writestr("history.json", json.dumps(everything, ensure_ascii=False, indent=1))
    return buffer.getvalue()


def _when(value) -> datetime:
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise ImportRefused("A date in the file is not a date; nothing was imported.")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


def _scrubbed(value):
    """Every string without lone surrogates: JSON can carry them, the database cannot store them."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    if isinstance(value, dict):
        return {scrub(str(k)): _scrubbed(v) for k, v in value.items()}
    return value


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


def import_history(user, source: bytes | IO[bytes]) -> tuple[int, int]:
    """Restore exported threads for `user` from the file's bytes or the (seekable) file; returns
    (imported, skipped as already there). All or nothing."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else source
    size = handle.seek(0, io.SEEK_END)
    handle.seek(0)
    head = handle.read(2)
    handle.seek(0)
    archive = None
    if head == b"PK":
        if size > MAX_ZIP:
            raise ImportRefused("That zip is larger than 4 GB; nothing was imported.")
        try:
            archive = zipfile.ZipFile(handle)
            if archive.getinfo("history.json").file_size > MAX_IMPORT:
                raise ImportRefused("That zip's history.json is larger than 50 MB; nothing was imported.")
            raw = archive.read("history.json")
        except (zipfile.BadZipFile, KeyError):
            raise ImportRefused("That zip has no history.json in it; nothing was imported.") from None
    else:
        raw = handle.read(MAX_IMPORT + 1)
        if len(raw) > MAX_IMPORT:
            raise ImportRefused("That file is larger than 50 MB; nothing was imported.")
    try:
        data = json.loads(raw)
    except ValueError:
        raise ImportRefused("That file is not valid JSON; nothing was imported.") from None
    threads = _checked(_scrubbed(data))
    written: list[int] = []  # entries whose images were written: removed again if the import fails
    try:
        return _import(user, threads, archive, written)
    except BaseException:
        images.remove(written)
        raise


def _import(
    user, threads: list[dict], archive: zipfile.ZipFile | None, written: list[int]
) -> tuple[int, int]:
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
                kept = _import_images(entry.pk, item.get("images"), archive)
                if kept:
                    written.append(entry.pk)
                Entry.objects.filter(pk=entry.pk).update(created=_when(item["created"]), images=kept)
            Thread.objects.filter(pk=new.pk).update(created=created)
            imported += 1
    return imported, skipped


def _import_images(entry_id: int, listed, archive: zipfile.ZipFile | None) -> list[dict]:
    """An imported entry's image records, their files copied from the zip into the data folder
    (checked as on download: a known image kind, at most images.MAX_BYTES)."""
    records = []
    for n, item in enumerate(listed[: images.MAX_PER_ENTRY] if isinstance(listed, list) else []):
        if not isinstance(item, dict):
            continue
        record = {
            "n": n,
            "caption": str(item.get("caption") or "")[:300],
            "width": item["width"]
            if isinstance(item.get("width"), int) and 0 < item["width"] < 100_000
            else 0,
            "height": item["height"]
            if isinstance(item.get("height"), int) and 0 < item["height"] < 100_000
            else 0,
        }
        name = item.get("file")
        data = None
        if archive is not None and isinstance(name, str) and name.startswith("images/"):
            try:
                info = archive.getinfo(name)
                data = archive.read(info) if info.file_size <= images.MAX_BYTES else None
            except KeyError:
                data = None
        kind = images.kind_of(data[:12]) if data else None
        if kind is None:
            record["error"] = str(item.get("error") or "") or "This image was not in the imported file."
        else:
            folder = images.folder(entry_id)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{n}.{kind[0]}").write_bytes(data)
            record["file"] = f"{n}.{kind[0]}"
        records.append(record)
    return records
