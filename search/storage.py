"""What a person keeps on this server, and the quota the owner sets for it.

Counted: the files they asked about (each stored file once, however many questions share it:
search.attachments names a file by its content), the images kept beside their answers
(Entry.image_bytes), and the conversations they imported, from a history file or their
Perplexity library (their text as saved: Entry.import_bytes). The text of questions asked here
is not counted: the search rate limit and the answer cap (values.MAX_TEXT) bound it.

The quota is the owner's to set for each person (Settings; accounts.models.StorageQuota), else
settings.STORAGE_QUOTA_MB. What would pass it is refused before it is written, with a sentence
saying so: an upload, an import (its files' declared sizes first, then its text as it goes), a
kept image, a library import's next page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Q, Sum

from accounts.models import StorageQuota
from search.models import Attachment, Entry

MB = 1024 * 1024
FULL = (
    "{what} would pass your storage quota: you keep {used} of {quota} here. Delete some history "
    "(or files you asked about), or ask the owner for more room."
)
TEXT_FIELDS = ("question", "answer", "report", "error")
LIST_FIELDS = ("sources", "related", "steps", "clarifications")


class Full(Exception):
    """What would pass the person's quota; the message is the sentence shown."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def size_text(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < MB:
        return f"{size / 1024:.0f} KB"
    if size < 1024 * MB:
        return f"{size / MB:.1f} MB".replace(".0 MB", " MB")
    return f"{size / 1024 / MB:.2f} GB".replace(".00 GB", " GB")


@dataclass(frozen=True)
class Usage:
    files: int
    file_count: int
    images: int
    image_entries: int
    imported: int
    imported_entries: int
    quota: int

    @property
    def total(self) -> int:
        return self.files + self.images + self.imported

    @property
    def left(self) -> int:
        return max(self.quota - self.total, 0)

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.total / self.quota)) if self.quota else 100

    @property
    def megabytes(self) -> int:
        return self.quota // MB

    def shown(self) -> dict:
        """What Settings shows of it."""
        return {
            "total": size_text(self.total),
            "quota": size_text(self.quota),
            "percent": self.percent,
            "full": self.total >= self.quota,
            "megabytes": self.megabytes,
            "parts": [
                ("Files you asked about", size_text(self.files), _count(self.file_count, "file")),
                ("Kept images", size_text(self.images), _count(self.image_entries, "answer")),
                ("Imported conversations", size_text(self.imported), _count(self.imported_entries, "answer")),
            ],
        }


def _count(n: int, noun: str) -> str:
    """ "3 files"; "" for none (Settings then says "none")."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}" if n else ""


def set_quota(user_id: int, megabytes: int) -> None:
    StorageQuota.objects.update_or_create(user_id=user_id, defaults={"megabytes": megabytes})


def quota_of(user_id: int) -> int:
    """In bytes."""
    megabytes = StorageQuota.objects.filter(user=user_id).values_list("megabytes", flat=True).first()
    return (settings.STORAGE_QUOTA_MB if megabytes is None else megabytes) * MB


def usage(user_id: int) -> Usage:
    """Two index reads: the person's distinct files, and their entries' kept bytes."""
    # rows that share a file (the same bytes) each say its size: the file counts once
    files = Attachment.objects.filter(user=user_id).values("stored").annotate(size=Max("size"))
    sizes = [row["size"] for row in files]
    kept = Entry.objects.filter(user=user_id).aggregate(
        imported=Sum("import_bytes"),
        images=Sum("image_bytes"),
        imported_entries=Count("pk", filter=Q(import_bytes__gt=0)),
        image_entries=Count("pk", filter=Q(image_bytes__gt=0)),
    )
    return Usage(
        files=sum(sizes),
        file_count=len(sizes),
        images=kept["images"] or 0,
        image_entries=kept["image_entries"],
        imported=kept["imported"] or 0,
        imported_entries=kept["imported_entries"],
        quota=quota_of(user_id),
    )


def check(user_id: int, adding: int, what: str) -> Usage:
    """Full (with the sentence about `what`, e.g. "“a.pdf” (3 MB)") when `adding` more bytes would
    take the person past their quota; else their usage."""
    now = usage(user_id)
    if now.total + adding > now.quota:
        raise Full(full_sentence(what, now))
    return now


def require_room(user_id: int, what: str) -> Usage:
    """Full when the person's quota is used up already (before something whose size is not
    known yet: a download)."""
    now = usage(user_id)
    if now.total >= now.quota:
        raise Full(full_sentence(what, now))
    return now


def full_sentence(what: str, now: Usage) -> str:
    return FULL.format(what=what, used=size_text(now.total), quota=size_text(now.quota))


def text_size(fields: dict[str, Any]) -> int:
    """The bytes an imported entry's text takes, as the quota counts them (UTF-8 of its text,
    its lists as JSON)."""
    size = sum(len(str(fields.get(name) or "").encode("utf-8", "replace")) for name in TEXT_FIELDS)
    return size + sum(
        len(json.dumps(fields.get(name) or [], ensure_ascii=False).encode("utf-8", "replace"))
        for name in LIST_FIELDS
    )


def image_size(records: list) -> int:
    """The bytes of an entry's kept images (each record says its file's size)."""
    return sum(r["bytes"] for r in records if isinstance(r, dict) and isinstance(r.get("bytes"), int))
