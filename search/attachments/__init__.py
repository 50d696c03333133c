"""Files asked about: kept in the data folder beside the database, handed to Perplexity for a
question (pplxweb.perplexity.uploads), listed and downloadable on their entry.

A file is judged by its bytes, never by its name or the browser's word: PDF, PNG, JPEG, WebP,
GIF, Word (.docx), or UTF-8 text (plain, Markdown or CSV by its name). It is stored under its
content's name (search.attachments.disk: the same bytes are kept once, and shared), whatever it
was called; its name is kept only to show. Keeping files is bounded per person: KEPT_PER_MINUTE
and KEPT_PER_DAY files on every path that takes them (the page, the plain form), and their
storage quota (search.storage).
"""

from __future__ import annotations

import codecs
import hashlib
import logging
import os
import re
import secrets
import unicodedata
import zipfile
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db.models import Case, Value, When

from accounts import ratelimit
from pplxweb.ids import parse as parse_id
from search import storage
from search.attachments.disk import (
    ORPHAN_AFTER,
    folder,
    keep_partial,
    path_of,
    remove_stored,
    stored_of,
    sweep,
    sweep_now_and_then,
)
from search.images import kind_of as image_kind
from search.models import Attachment, Entry
from search.saving import clean

log = logging.getLogger(__name__)
__all__ = [
    "ORPHAN_AFTER", "folder", "path_of", "remove_stored", "stored_of", "sweep", "sweep_now_and_then",
]  # fmt: skip

UPLOADS_PER_MINUTE = 30  # files a person may hand to Perplexity in a minute
KEPT_PER_MINUTE, KEPT_PER_DAY = 30, 500  # files a person may have kept (attached) in a minute, a day
CHUNK = 256 * 1024
KINDS = {  # kind -> (label, content type, extension)
    "pdf": ("PDF", "application/pdf", "pdf"),
    "png": ("PNG image", "image/png", "png"),
    "jpeg": ("JPEG image", "image/jpeg", "jpg"),
    "webp": ("WebP image", "image/webp", "webp"),
    "gif": ("GIF image", "image/gif", "gif"),
    "docx": (
        "Word document",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "docx",
    ),
    "text": ("text", "text/plain", "txt"),
    "markdown": ("Markdown", "text/markdown", "md"),
    "csv": ("CSV", "text/csv", "csv"),
}
IMAGES = ("png", "jpeg", "webp", "gif")
TEXT_NAMES = {
    "": "text",
    "txt": "text",
    "text": "text",
    "log": "text",
    "md": "markdown",
    "markdown": "markdown",
    "csv": "csv",
}
CLAIMS = {  # what a name's extension says it is
    "pdf": "pdf", "png": "png", "jpg": "jpeg", "jpeg": "jpeg", "webp": "webp", "gif": "gif", "docx": "docx",
    **TEXT_NAMES,
}  # fmt: skip
ACCEPTED = "PDF, PNG, JPEG, WebP, GIF, Word (.docx), plain text, Markdown or CSV"


class Refused(Exception):
    """A file (or a set of them) not kept or not sent; the message is the sentence shown."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def max_bytes() -> int:
    return settings.ATTACHMENT_MAX_MB * 1024 * 1024


def size_text(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def shown_name(raw: str) -> str:
    """The name as given, made showable: no path, no control characters, at most 200 characters
    (its extension kept)."""
    name = clean(str(raw or "")).replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join("\ufffd" if unicodedata.category(c) in ("Cc", "Cf") else c for c in name).strip()
    if len(name) > 200:
        stem, dot, extension = name.rpartition(".")
        name = (
            f"{stem[: 190 - len(extension)]}….{extension}"
            if dot and len(extension) <= 8
            else name[:199] + "…"
        )
    return name or "file"


def upstream_name(attachment: Attachment) -> str:
    """The name Perplexity is told: the shown one without what a storage key must not hold."""
    name = re.sub(r"[^\w .()+-]", "_", attachment.name)[:100].strip() or "file"
    extension = KINDS[attachment.kind][2]
    return name if name.lower().endswith(f".{extension}") or "." in name else f"{name}.{extension}"


def _extension(name: str) -> str:
    stem, dot, extension = name.rpartition(".")
    return extension.lower() if dot and stem else ""


def judge(path: Path, name: str) -> str:
    """The kind of the file at `path` from its bytes (and, for text, its name); Refused if none
    fits, or if the name claims another kind. A PDF with script is kept as it is: no kept file is
    ever opened as a document from pplxweb's origin (search.served)."""
    with path.open("rb") as handle:
        head = handle.read(16)
    kind = _binary_kind(head, path)
    claim = CLAIMS.get(_extension(name))
    if kind is None:
        if not _is_text(path):
            raise Refused(f"“{name}” is not a kind pplxweb can send ({ACCEPTED}); it was not attached.")
        if claim is None or claim not in TEXT_NAMES.values():
            if claim is not None:
                raise Refused(
                    f"“{name}” is not a {KINDS[claim][0]} (its bytes are text); it was not attached."
                )
            raise Refused(
                f"“{name}” is text of a kind pplxweb does not send ({ACCEPTED}); it was not attached."
            )
        return claim
    if claim is not None and claim != kind:
        raise Refused(
            f"“{name}” is not a {KINDS[claim][0]}: its bytes are a {KINDS[kind][0]}. It was not attached."
        )
    return kind


def _binary_kind(head: bytes, path: Path) -> str | None:
    if head.startswith(b"%PDF-"):
        return "pdf"
    image = image_kind(head)
    if image is not None:
        return {"jpg": "jpeg"}.get(image[0], image[0])
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist()[:2000])
        except (zipfile.BadZipFile, OSError, ValueError):
            return None
        return "docx" if {"[Content_Types].xml", "word/document.xml"} <= names else None
    return None


def _is_text(path: Path) -> bool:
    """UTF-8 (a BOM allowed) without NUL or other control bytes but tab, line ends and form feed."""
    decoder_ok = True
    with path.open("rb") as handle:
        decoder = codecs.getincrementaldecoder("utf-8")()
        while chunk := handle.read(CHUNK):
            if re.search(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]", chunk):
                return False
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                decoder_ok = False
                break
        if decoder_ok:
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                decoder_ok = False
    return decoder_ok


def store(uploaded) -> Attachment:
    """Save an uploaded file (Django's UploadedFile, read in chunks: memory stays flat) under its
    content's name; its row, not yet saved (see record). Refused (nothing left behind) when it may
    not be kept. Only file work: callers run it off the database thread, after admit()."""
    name = shown_name(getattr(uploaded, "name", ""))
    if uploaded.size is not None and uploaded.size > max_bytes():
        raise Refused(
            f"“{name}” is {size_text(uploaded.size)}; files can be at most {settings.ATTACHMENT_MAX_MB} MB."
        )
    stored, size, kind = keep_bytes(uploaded.chunks(CHUNK), name)
    return Attachment(name=name, stored=stored, size=size, kind=kind)


def keep_bytes(chunks: Iterable[bytes], name: str) -> tuple[str, int, str]:
    """Write the chunks to a file of their own (owner-only from the first byte), judge it, and
    keep it under its content's name: bytes already kept are not kept twice. Returns (stored
    name, size, kind); Refused (nothing left behind) when it may not be kept."""
    limit = max_bytes()
    partial = folder() / f"{secrets.token_hex(16)}.partial"
    digest, size = hashlib.sha256(), 0
    try:
        # owner-only from the first byte (os.open's mode; the umask may only narrow it)
        with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            for chunk in chunks:
                size += len(chunk)
                if size > limit:
                    raise Refused(
                        f"“{name}” is larger than {settings.ATTACHMENT_MAX_MB} MB; it was not attached."
                    )
                digest.update(chunk)
                out.write(chunk)
        if size == 0:
            raise Refused(f"“{name}” is empty (0 bytes); it was not attached.")
        kind = judge(partial, name)
        stored = f"{digest.hexdigest()}.{KINDS[kind][2]}"
        keep_partial(partial, stored)
    finally:
        partial.unlink(missing_ok=True)
    return stored, size, kind


def admit(user, files: list) -> None:
    """Whether the person may have these uploads (Django's UploadedFiles) kept now: Refused with
    the sentence when they would pass the per-person limits (every path that keeps files asks
    this first) or their storage quota (by the sizes the uploads declare)."""
    if not files:
        return
    for scope, capacity, period, when in (
        ("attachment-kept", KEPT_PER_MINUTE, timedelta(minutes=1), "this minute"),
        ("attachment-kept-day", KEPT_PER_DAY, timedelta(days=1), "today"),
    ):
        verdict = ratelimit.take(scope, str(user.pk), capacity, period, cost=len(files))
        if not verdict.allowed:
            raise Refused(f"That is more than {capacity} files {when}. Try again {verdict.wait_text}.")
    size = sum(f.size or 0 for f in files)
    names = ", ".join(f"“{shown_name(getattr(f, 'name', ''))}”" for f in files[:3])
    try:
        storage.check(user.pk, size, f"{names}{' and more' if len(files) > 3 else ''} ({size_text(size)})")
    except storage.Full as exc:
        raise Refused(exc.message) from None


def record(user, stored: list[Attachment]) -> list[Attachment]:
    """The rows of files store() kept, saved as the person's (their files go if that fails and
    no other row shares them)."""
    try:
        for attachment in stored:
            attachment.user = user
            attachment.save()
    except Exception:
        remove_stored([attachment.stored for attachment in stored])
        raise
    return stored


def keep(user, uploaded) -> Attachment:
    """admit(), store() and record() in one (for callers already off the event loop)."""
    admit(user, [uploaded])
    return record(user, [store(uploaded)])[0]


def chosen(user, values: list, allow_asked: bool = False) -> list[Attachment]:
    """The person's own files named by id in `values` (in that order), not yet asked with;
    Refused when one is not theirs, is gone, or there are too many."""
    ids = []
    for value in values:
        found = parse_id(Attachment, value)
        if found is None:  # not an id, or past its column's range: like an unknown id
            raise Refused("One of the attached files was not found; remove it and attach it again.")
        if found not in ids:
            ids.append(found)
    if len(ids) > settings.ATTACHMENTS_PER_QUESTION:
        raise Refused(
            f"At most {settings.ATTACHMENTS_PER_QUESTION} files per question (there are {len(ids)})."
        )
    if not ids:
        return []
    rows = Attachment.objects.filter(pk__in=ids, user=user)
    if not allow_asked:
        rows = rows.filter(entry__isnull=True)
    found = {a.pk: a for a in rows}
    missing = [i for i in ids if i not in found]
    if missing:
        raise Refused(
            "One of the attached files was not found (removed, or already asked with); attach it again."
        )
    return [found[i] for i in ids]


def take_uploads(user, count: int) -> None:
    """The per-person limit on files handed to Perplexity (a token per file)."""
    verdict = ratelimit.take("attachment", str(user.pk), UPLOADS_PER_MINUTE, timedelta(minutes=1), cost=count)
    if not verdict.allowed:
        raise Refused(f"That is {UPLOADS_PER_MINUTE} files this minute. Try again {verdict.wait_text}.")


def link(entry: Entry, attachments: list[Attachment]) -> None:
    """The files go with their entry (in the caller's transaction), in the order they were
    attached: two uploads finish in either order, so their pks do not say it."""
    if attachments:
        places = Case(*(When(pk=a.pk, then=Value(i)) for i, a in enumerate(attachments)))
        Attachment.objects.filter(pk__in=[a.pk for a in attachments], entry__isnull=True).update(
            entry=entry, position=places
        )
    entry.attachment_list = attachments


def listed(entry: Entry) -> list[dict]:
    """What an entry shows of its files (prefetched, or just linked, or read now)."""
    rows = getattr(entry, "attachment_list", None)
    if rows is None:
        rows = list(entry.attachments.all()) if entry.pk else []
    return shown(rows)


def shown(rows, cited: set[int] | frozenset[int] = frozenset()) -> list[dict]:
    """What the files `rows` show; `cited`: pks a running answer cites (its end marks them)."""
    return [
        {
            "pk": a.pk,
            "name": a.name,
            "size": size_text(a.size),
            "kind": KINDS.get(a.kind, ("file",))[0],
            "image": a.kind in IMAGES,
            "cited": a.cited or a.pk in cited,
        }
        for a in rows
    ]


def again(user, entry: Entry) -> list[Attachment]:
    """Unasked rows for an entry's files ("Ask again", "Edit and ask again"), naming the same
    stored files (never a copy: they are uploaded to Perplexity afresh, its links expire). An
    unasked row of the person for the same file is reused, so opening "Edit and ask again" any
    number of times adds nothing."""
    out = []
    for attachment in entry.attachments.all():
        if path_of(attachment) is None:
            raise Refused(
                f"“{attachment.name}” is no longer on this server, so it cannot be asked about again."
            )
        same = {"user": user, "stored": attachment.stored, "name": attachment.name, "kind": attachment.kind}
        unasked = Attachment.objects.filter(entry__isnull=True, **same).exclude(pk__in=[a.pk for a in out])
        out.append(unasked.first() or Attachment.objects.create(size=attachment.size, **same))
    return out


def cited_by(rows, hits: list[str]) -> set[int]:
    """The pks of `rows` that the answer's attachment hits name (URLs echoed unsigned)."""
    wanted = {h.split("?", 1)[0] for h in hits}
    return {a.pk for a in rows if a.remote_url and a.remote_url.split("?", 1)[0] in wanted}


def mark_cited(entry_id: int, hits: list[str]) -> None:
    """The answer's attachment hits mark the files cited (its "your file" sources)."""
    if hits:
        cited = cited_by(Attachment.objects.filter(entry_id=entry_id, cited=False), hits)
        Attachment.objects.filter(pk__in=cited).update(cited=True)
