"""History back in: a history zip, its history.json, or a thread's JSON (as search.history.export
writes them) restored for a person, all or nothing.

What an import costs is bounded whatever the file: one conversation is read at a time (at most
MAX_IMPORT bytes, and refused before it is parsed when parsing it would hold more than
values.MAX_PARSED), conversations are written a batch at a time (WRITE_BATCH entries or
BATCH_BYTES of them), each zip member is written at most once, and the person's storage quota is
checked before anything is written (the files the zip could bring, by their declared sizes) and
after each batch (removed whole when it would pass it).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from collections.abc import Iterator
from datetime import datetime
from typing import IO

from django.db import connection, transaction

from pplxweb.perplexity.values import MAX_DOCUMENT, MAX_PARSED, parsed_size
from search import rendered, storage, versions
from search.attachments import archive as attachment_archive
from search.history import import_entries, import_images, import_jobs
from search.history.export import FORMAT
from search.models import Attachment, Entry, Thread
from search.saving import deep, fitted

MAX_IMPORT = MAX_DOCUMENT  # one conversation; or a whole file not in pplxweb's own layout
TOO_LARGE = f"larger than {MAX_IMPORT // 1024 // 1024} MB"
MAX_ZIP = 4 * 1024**3  # a history zip, its images included (read from the upload's file, not memory)
MAX_HISTORY = 1024**3  # history.json, as declared in the zip (or the file's size), checked before reading
MAX_MEMBERS = 100_000  # files in a zip: opening one reads its whole directory into memory
READ_BLOCK = 1024 * 1024
NOT_JSON = "That file is not valid JSON; nothing was imported."
DEEP = "That file is nested deeper than any pplxweb writes; nothing was imported."
WRITE_BATCH = 100  # entries written per transaction while importing (a pause between two)
BATCH_BYTES = MAX_DOCUMENT  # ... or conversations of this many bytes in the file, whichever comes first
# history.json's first line as export.history_zip writes it: then one conversation per line
LISTING = re.compile(rb'\{"format": "pplxweb-history/1", "exported": "[^"\\]*", "threads": \[\r?\n')
TEXT_LINE = re.compile(rb"[^\s][^\n]*")  # from a line's first non-blank byte to its end
STATUSES = {s for s, _ in Entry.Status.choices}


class ImportRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _when(value) -> datetime:
    parsed = import_entries.moment(value)
    if parsed is None:
        raise ImportRefused("A date in the file is not a date; nothing was imported.")
    return parsed


def _refuse_constant(name: str):
    raise ImportRefused(f"The file has {name} in it, which is not a JSON number; nothing was imported.")


def _parsed(raw: bytes):
    """The JSON value, every string cleaned (no NUL, no lone surrogate: the database stores
    neither). A few bytes of `{}` or `"a",` cost a hundred once parsed: what parsing would hold
    is estimated first (values.parsed_size), and a conversation too costly is refused unread."""
    if parsed_size(raw) > MAX_PARSED:
        raise ImportRefused(
            "A conversation in that file has more parts than any pplxweb writes (reading it would "
            f"take more than {MAX_PARSED // 1024 // 1024} MB); nothing was imported."
        )
    try:
        return deep(json.loads(raw, parse_constant=_refuse_constant))
    except RecursionError:
        raise ImportRefused(
            "That file is nested deeper than any pplxweb writes; nothing was imported."
        ) from None
    except ValueError:  # UnicodeDecodeError too
        raise ImportRefused(NOT_JSON) from None


def _threads_of(data) -> list:
    if isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("threads"), list):
        return data["threads"]
    if isinstance(data, dict) and isinstance(data.get("entries"), list):
        return [data]  # one exported thread
    raise ImportRefused(
        "That is not a pplxweb history export (history.json or a thread's JSON); nothing was imported."
    )


def _read_threads(stream: IO[bytes], pacer: import_jobs.Pacer | None = None) -> Iterator[tuple[dict, int]]:
    """The conversations in an export file, each checked and scrubbed as it is read, with the
    bytes it took in the file. pplxweb's history.json has one per line and is read line by line,
    whatever its size; any other layout (a thread's JSON, a file someone re-indented) is read
    whole, up to MAX_IMPORT."""
    first = stream.readline(MAX_IMPORT + 1)
    if not LISTING.fullmatch(first):
        rest = first + stream.read(MAX_IMPORT + 1 - len(first))
        if len(rest) > MAX_IMPORT:
            raise ImportRefused(
                f"That file is {TOO_LARGE} and not laid out as pplxweb writes it; nothing was imported."
            )
        for thread in _threads_of(_parsed(rest)):
            yield _checked(thread), len(rest)
        return
    pacer = pacer or import_jobs.Pacer()
    for line in _lines(stream):
        if line == b"]}":
            return
        yield _checked(_parsed(line.removesuffix(b","))), len(line)
        pacer.tick()
    raise ImportRefused("That file ends before its last conversation (cut short?); nothing was imported.")


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    """The file's lines that are not blank, stripped, read a block at a time: blank lines (any
    number of them) are skipped by the regular expression engine, not one by one in Python."""
    pending = b""
    while block := stream.read(READ_BLOCK):
        block = pending + block
        end = block.rfind(b"\n") + 1  # what follows the last newline waits for the next block
        for found in TEXT_LINE.finditer(block, 0, end):
            if found.end() - found.start() > MAX_IMPORT:
                raise ImportRefused(f"A conversation in that file is {TOO_LARGE}; nothing was imported.")
            yield found.group().strip()
        pending = block[end:]
        if len(pending) > MAX_IMPORT:
            raise ImportRefused(f"A conversation in that file is {TOO_LARGE}; nothing was imported.")
    if pending.strip():
        yield pending.strip()


def _checked(thread) -> dict:
    if not isinstance(thread, dict) or not isinstance(thread.get("entries"), list) or not thread["entries"]:
        raise ImportRefused("A conversation in the file has no entries; nothing was imported.")
    for entry in thread["entries"]:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("question"), str)
            or not entry["question"].strip()
        ):
            raise ImportRefused("An entry in the file has no question; nothing was imported.")
        status = entry.get("status", "completed")
        status = status if isinstance(status, str) else None  # a list is not even hashable
        if (
            not isinstance(status, str)
            or status not in STATUSES
            or not isinstance(entry.get("sources", []), list)
        ):
            raise ImportRefused("An entry in the file is malformed; nothing was imported.")
        entry["created"] = _when(entry.get("created"))
    return thread


def import_history(user, source: bytes | IO[bytes]) -> tuple[int, int]:
    """Restore exported threads for `user` from the file's bytes or the (seekable) file; returns
    (imported, skipped as already there). All or nothing: written WRITE_BATCH entries per
    transaction (others' searches are not held up by a large import) as one recorded job
    (search.history.import_jobs), removed whole if a later conversation is refused or the server stops."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else source
    archive, stream = _opened(handle)
    if archive is not None:  # before anything is written: the most its files could take
        files = attachment_archive.members_size(archive)
        try:
            storage.check(user.pk, files, f"The files in that zip ({storage.size_text(files)})")
        except storage.Full as exc:
            raise ImportRefused(f"{exc.message} Nothing was imported.") from None
    job = import_jobs.begin(user)
    if isinstance(job, str):
        raise ImportRefused(job)
    counts = (0, 0)
    try:
        pacer = import_jobs.Pacer()  # one for the reading and the writing: they take turns
        counts = _import(user, _read_threads(stream, pacer), archive, job, pacer)
    except (zipfile.BadZipFile, zlib.error, EOFError):
        import_jobs.end(job)
        raise ImportRefused("That zip is damaged; nothing was imported.") from None
    except BaseException:
        import_jobs.end(job)
        raise
    import_jobs.end(job, *counts, ok=True)
    return counts


def _opened(handle: IO[bytes]) -> tuple[zipfile.ZipFile | None, IO[bytes]]:
    """(the zip or None, history.json's stream), their declared sizes checked before reading."""
    size = handle.seek(0, io.SEEK_END)
    handle.seek(0)
    head = handle.read(2)
    handle.seek(0)
    if head != b"PK":
        if size > MAX_HISTORY:
            raise ImportRefused("That file is larger than 1 GB; nothing was imported.")
        return None, handle
    if size > MAX_ZIP:
        raise ImportRefused("That zip is larger than 4 GB; nothing was imported.")
    try:
        ending = zipfile._EndRecData(handle)  # the directory's size, read before the directory
        handle.seek(0)
        if ending and ending[zipfile._ECD_ENTRIES_TOTAL] > MAX_MEMBERS:
            raise ImportRefused(f"That zip has more than {MAX_MEMBERS:,} files in it; nothing was imported.")
        archive = zipfile.ZipFile(handle)
        info = archive.getinfo("history.json")
    except (zipfile.BadZipFile, KeyError, OSError, ValueError):
        raise ImportRefused("That zip has no history.json in it; nothing was imported.") from None
    if len(archive.infolist()) > MAX_MEMBERS:  # a zip64 directory counts its entries elsewhere
        raise ImportRefused(f"That zip has more than {MAX_MEMBERS:,} files in it; nothing was imported.")
    if info.file_size > MAX_HISTORY:
        raise ImportRefused("The history.json in that zip is larger than 1 GB; nothing was imported.")
    # reading stops at the declared size: a member that holds more fails its checksum ("damaged")
    return archive, archive.open(info)


def _batches(threads: Iterator[tuple[dict, int]]) -> Iterator[list[dict]]:
    """Whole conversations, about WRITE_BATCH entries or BATCH_BYTES of them at a time (a batch
    is held in memory until it is written)."""
    batch: list[dict] = []
    count = size = 0
    for thread, took in threads:
        batch.append(thread)
        count, size = count + len(thread["entries"]), size + took
        if count >= WRITE_BATCH or size >= BATCH_BYTES:
            yield batch
            batch, count, size = [], 0, 0
    if batch:
        yield batch


def _import(
    user, threads: Iterator[tuple[dict, int]], archive: zipfile.ZipFile | None, job, pacer: import_jobs.Pacer
) -> tuple[int, int]:
    imported = skipped = 0
    files = import_images.Members(archive)  # each zip member read and written once
    room, charged = storage.usage(user.pk), 0  # what the import adds to the quota, batch by batch
    for batch in _batches(threads):
        with transaction.atomic():
            if not import_jobs.held(job):  # its person was removed meanwhile
                raise ImportRefused(import_jobs.GONE)
            new, back = _sorted(user, batch)
            skipped += len(batch) - len(new) - len(back)
            rows = Thread.objects.bulk_create(
                Thread(
                    user=user,
                    import_job=job,
                    **fitted(
                        Thread,
                        {
                            "title": str(t.get("title") or t["entries"][0]["question"]),
                            "read_write_token": str(t.get("read_write_token") or ""),
                            "thread_url_slug": str(t.get("thread_url_slug") or ""),
                        },
                    ),
                )
                for t in new
            )
            charged += _write(
                user, files, [(row, t["entries"], None) for row, t in zip(rows, new, strict=True)]
                + [(Thread(pk=thread_id), items, job) for thread_id, items in back]
            )  # fmt: skip
            for row, t in zip(rows, new, strict=True):
                # its own moments, not the import's: Recent and follow-ups order by them
                row.created, row.updated = t["entries"][0]["created"], t["entries"][-1]["created"]
            if rows:
                _set(rows, "created", "updated")
            imported += len(new) + len(back)
        if room.total + charged > room.quota:  # then it is removed whole (import_history)
            raise ImportRefused(
                f"{storage.full_sentence('That import', room)} It was stopped there and removed; "
                "nothing was imported."
            )
        import_jobs.beat(job, imported, skipped)
        pacer.tick()
    return imported, skipped


def _sorted(user, batch: list[dict]) -> tuple[list[dict], list[tuple[int, list[dict]]]]:
    """The batch's conversations that are new here, and those partly here: (their conversation
    here, the entries it lacks), such as one whose answer was deleted after it was exported. An
    entry is here when a question was asked at the same moment with the same words; a
    conversation wholly here is left out."""
    moments = {item["created"] for t in batch for item in t["entries"]}
    here = {
        (question, created): thread_id
        for question, created, thread_id in Entry.objects.filter(user=user, created__in=moments).values_list(
            "question", "created", "thread_id"
        )
    }
    new, back, coming = [], [], set()
    for thread in batch:
        keys = [(item["question"], item["created"]) for item in thread["entries"]]
        found = [here[key] for key in keys if key in here]
        if keys[0] in coming:  # the same conversation twice in the file
            continue
        if not found:
            new.append(thread)
            coming.update(keys)
        elif len(found) < len(keys):
            back.append(
                (found[0], [i for i, k in zip(thread["entries"], keys, strict=True) if k not in here])
            )
    return new, back


def _write(user, files: import_images.Members, parts: list[tuple[Thread, list[dict], object]]) -> int:
    """Each conversation's entries, with their own moments, images and files; `job` set on the
    entries written into a conversation that was already here (a cut-short import removes them).
    Returns what they add to the person's storage (search.storage: their text, their images, the
    zip's files read now)."""
    items = [item for _, entries, _ in parts for item in entries]
    entries = Entry.objects.bulk_create(
        import_entries.entry(item, thread, user, job) for thread, entries, job in parts for item in entries
    )
    attached = []
    for entry, item in zip(entries, items, strict=True):
        # created is set to now on insert (auto_now_add): the file's own moment goes in after
        entry.created = item["created"]
        entry.images = files.images(entry.pk, item.get("images"))
        entry.image_bytes = storage.image_size(entry.images)
        listed = item.get("attachments")
        attached += attachment_archive.bring_back(user, entry, listed, files.archive, files.attachments)
    Attachment.objects.bulk_create(attached, batch_size=500)
    if entries:
        versions.from_file(entries, items)
        _set(entries, "created", "images", "image_bytes", "turn", "shown")
        rendered.keep_large(entries)
    return sum(e.import_bytes + e.image_bytes for e in entries) + files.new_file_bytes()


def _set(rows: list, *names: str) -> None:
    """UPDATE these fields of these rows to their values, one statement run for all the rows
    (bulk_update builds a CASE expression per row and field: most of an import's time)."""
    meta = rows[0]._meta
    fields = [meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {quote(meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "  # noqa: S608 - names from the model
            f"WHERE {quote(meta.pk.column)} = %s",
            [
                [f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields] + [row.pk]
                for row in rows
            ],
        )
