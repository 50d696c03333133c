"""Kept files on disk: `DATA_DIR/attachments/<sha256 of the bytes>.<kind>` (owner-only modes).

A file is named by its content, so the rows (search.models.Attachment) that hold the same bytes
share one file: "Ask again", the same file attached to two questions, an import naming one
member many times. A file goes when the last row naming it goes: at once after a delete
(remove_stored), or at the next sweep (uploads never asked with, after ORPHAN_AFTER; files
whose rows went some other way, a person removed say). Files stored before content names
(32 hex digits, random) are read and swept the same way.
"""

from __future__ import annotations

import os
import re
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from search.models import Attachment

ORPHAN_AFTER = timedelta(days=1)
IN_FLIGHT = 600.0  # seconds a stored file may wait for its row before a sweep takes it
SWEEP_EVERY = 600.0  # seconds between sweeps started by uploads
STORED = re.compile(r"[0-9a-f]{32}(?:[0-9a-f]{32})?\.[a-z]{2,8}")
_swept = float("-inf")


def folder() -> Path:
    path = Path(settings.DATA_DIR) / "attachments"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def path_of(attachment: Attachment) -> Path | None:
    """The stored file (its name checked, not trusted), if it is there."""
    if not STORED.fullmatch(attachment.stored):
        return None
    path = folder() / attachment.stored
    return path if path.is_file() else None


def unreferenced(names: list[str]) -> list[str]:
    """Those of these stored names no row names any more."""
    named = set(Attachment.objects.filter(stored__in=names).values_list("stored", flat=True))
    return [name for name in dict.fromkeys(names) if name not in named]


def remove_stored(names: list[str]) -> int:
    """Delete the files of these stored names that no row names any more (their rows were just
    deleted; a file another row shares stays). Returns how many went."""
    root, count = folder(), 0
    for start in range(0, len(names), 500):  # bounded statements, however many there are
        for name in unreferenced(names[start : start + 500]):
            if STORED.fullmatch(name) and (root / name).exists():
                (root / name).unlink(missing_ok=True)
                count += 1
    return count


def stored_of_person(user_id: int) -> list[str]:
    """The stored names of a person's files (read before the person is removed)."""
    return list(Attachment.objects.filter(user=user_id).values_list("stored", flat=True).distinct())


def stored_of(entries) -> list[str]:
    """The stored names of these entries' files (a queryset of them, read before they are deleted)."""
    return list(Attachment.objects.filter(entry__in=entries).values_list("stored", flat=True))


def sweep(now=None) -> int:
    """Remove uploads never asked with after ORPHAN_AFTER, and files no row names (their entry
    deleted). Returns how many files went."""
    global _swept
    _swept = time.monotonic()
    now = now or timezone.now()
    root = folder()
    orphans = Attachment.objects.filter(entry__isnull=True, created__lt=now - ORPHAN_AFTER)
    gone = 0
    while rows := list(orphans.values_list("pk", "stored")[:500]):
        Attachment.objects.filter(pk__in=[pk for pk, _ in rows]).delete()
        gone += remove_stored([name for _, name in rows])
    on_disk = sorted(p.name for p in root.iterdir() if STORED.fullmatch(p.name))
    kept: set[str] = set()
    for start in range(0, len(on_disk), 500):  # bounded statements, whatever the folder holds
        names = on_disk[start : start + 500]
        kept.update(Attachment.objects.filter(stored__in=names).values_list("stored", flat=True))
    for name in set(on_disk) - kept:
        # a file stored a moment ago may not have its row yet (another upload, in another tab)
        try:
            if now.timestamp() - (root / name).stat().st_mtime < IN_FLIGHT:
                continue
        except FileNotFoundError:
            continue
        (root / name).unlink(missing_ok=True)
        gone += 1
    for partial in root.glob("*.partial"):  # a keep() the server died in
        if now.timestamp() - partial.stat().st_mtime > ORPHAN_AFTER.total_seconds():
            partial.unlink(missing_ok=True)
    return gone


def sweep_now_and_then() -> None:
    """sweep() at most every SWEEP_EVERY in this process (each upload calls this)."""
    if time.monotonic() - _swept > SWEEP_EVERY:
        sweep()


def keep_partial(partial: Path, stored: str) -> None:
    """A partial file, judged, kept as `stored`: moved into place, or dropped when the same
    bytes are kept already (then touched, so a sweep leaves it to the row about to name it)."""
    target = folder() / stored
    if target.exists():
        os.utime(target)
        partial.unlink(missing_ok=True)
    else:
        os.replace(partial, target)
