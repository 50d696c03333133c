"""Files in the history's exports and back in by import (search.history.export, search.history.imports)."""

from __future__ import annotations

import os
import secrets
import shutil
import zipfile

from django.conf import settings

from search.attachments import (
    CHUNK,
    KINDS,
    Refused,
    folder,
    judge,
    max_bytes,
    path_of,
    shown_name,
    upstream_name,
)
from search.models import Attachment, Entry


def zip_name(entry: Entry, attachment: Attachment) -> str | None:
    """Where a kept file goes in the history zip (None: it is not on this server)."""
    if path_of(attachment) is None:
        return None
    return f"attachments/{entry.pk}-{attachment.pk}-{upstream_name(attachment)}"


def listed(entry: Entry) -> list[dict]:
    """An entry's files for its JSON (`file`: the place in the zip; a thread's own JSON has none)."""
    return [
        {
            "name": a.name,
            "kind": a.kind,
            "size": a.size,
            "cited": a.cited,
            "file": zip_name(entry, a),
        }
        for a in entry.attachments.all()
    ]


def markdown_lines(entry: Entry, in_zip: bool) -> list[str]:
    lines = []
    for a in entry.attachments.all():
        name = zip_name(entry, a) if in_zip else None
        label = a.name.replace("[", "\\[").replace("]", "\\]")
        lines.append(f"- Attached: [{label}](../{name})" if name else f"- Attached: {label}")
    return [*lines, ""] if lines else []


def write(archive: zipfile.ZipFile, entry: Entry) -> None:
    for a in entry.attachments.all():
        if name := zip_name(entry, a):
            archive.write(path_of(a), name, zipfile.ZIP_STORED)


def bring_back(user, entry: Entry, items, archive: zipfile.ZipFile | None) -> int:
    """An imported entry's files, copied from the zip and judged again as on upload (a listed
    file that is missing, too large or not an accepted kind is left out). Returns how many."""
    if archive is None or not isinstance(items, list):
        return 0
    count = 0
    for item in items[: settings.ATTACHMENTS_PER_QUESTION]:
        name = item.get("file") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name.startswith("attachments/"):
            continue
        try:
            info = archive.getinfo(name)
        except KeyError:
            continue
        if not 0 < info.file_size <= max_bytes():
            continue
        token = secrets.token_hex(16)
        partial = folder() / f"{token}.partial"
        shown = shown_name(item.get("name") or name.rsplit("/", 1)[-1])
        try:
            with (
                archive.open(info) as source,
                os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out,
            ):
                shutil.copyfileobj(source, out, CHUNK)
            kind = judge(partial, shown)
            stored = f"{token}.{KINDS[kind][2]}"
            os.replace(partial, folder() / stored)
        except Refused:
            continue
        finally:
            partial.unlink(missing_ok=True)
        Attachment.objects.create(
            user=user, entry=entry, name=shown, stored=stored, size=info.file_size, kind=kind,
            cited=item.get("cited") is True,
        )  # fmt: skip
        count += 1
    return count
