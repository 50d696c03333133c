"""Files in the history's exports and back in by import (search.history.export, search.history.imports)."""

from __future__ import annotations

import zipfile

from django.conf import settings

from search.attachments import CHUNK, Refused, keep_bytes, max_bytes, path_of, shown_name, upstream_name
from search.images import MAX_BYTES as IMAGE_MAX_BYTES
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


def bring_back(user, entry: Entry, items, archive: zipfile.ZipFile | None, members: dict) -> list[Attachment]:
    """An imported entry's files, read from the zip and judged again as on upload (a listed file
    that is missing, too large or not an accepted kind is left out): their rows, to be saved by
    the caller. Each member is read and kept at most once per import (`members`: what each became,
    by name; one the listing names again is a new row for the same file), and bytes already kept
    are not written again (files are named by their content)."""
    if archive is None or not isinstance(items, list):
        return []
    rows = []
    for item in items[: settings.ATTACHMENTS_PER_QUESTION]:
        name = item.get("file") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name.startswith("attachments/"):
            continue
        shown = shown_name(item.get("name") or name.rsplit("/", 1)[-1])
        if name not in members:
            members[name] = _member(archive, name, shown)
        if members[name] is None:
            continue
        stored, size, kind = members[name]
        cited = item.get("cited") is True
        row = Attachment(user=user, entry=entry, name=shown, stored=stored, size=size, kind=kind, cited=cited)
        row.position = len(rows)
        rows.append(row)
    return rows


def _member(archive: zipfile.ZipFile, name: str, shown: str) -> tuple[str, int, str] | None:
    """(stored name, size, kind) of a member kept, or None. Its size is what it held: reading
    stops at the size it declares, and a member that holds more fails its checksum (the zip is
    then refused as damaged)."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        return None
    if not 0 < info.file_size <= max_bytes():
        return None
    try:
        with archive.open(info) as source:
            return keep_bytes(iter(lambda: source.read(CHUNK), b""), shown)
    except Refused:
        return None


def members_size(archive: zipfile.ZipFile) -> int:
    """What an import of this zip could write of its files at most: each member under
    attachments/ and images/ once, by the size it declares, if under its kind's cap (others are
    never written)."""
    caps = {"attachments/": max_bytes(), "images/": IMAGE_MAX_BYTES}
    sizes = {}
    for info in archive.infolist():
        cap = next((c for prefix, c in caps.items() if info.filename.startswith(prefix)), 0)
        if 0 < info.file_size <= cap:
            sizes[info.filename] = info.file_size  # a name listed twice is read once (the last)
    return sum(sizes.values())
