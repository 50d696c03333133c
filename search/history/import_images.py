"""An import's files from the zip, each member read and written at most once per import: an
imported entry's images (checked as on download: a known image kind, at most images.MAX_BYTES)
go to its image folder; a member the listing names again, or another member with the same bytes,
becomes a hard link to the file already written (one file on disk, gone with its last entry), a
copy only where the filesystem has no links. Attachments are search.attachments.archive's (named
by their content); `Members.attachments` is its record of the members already read."""

from __future__ import annotations

import hashlib
import os
import shutil
import zipfile
from pathlib import Path

from pplxweb.datadir import private_file, private_folder
from search import images

NOT_IN_FILE = "This image was not in the imported file."


class Members:
    def __init__(self, archive: zipfile.ZipFile | None) -> None:
        self.archive = archive
        self.attachments: dict = {}  # member name -> (stored, size, kind) or None
        self.by_name: dict[str, tuple[Path, str] | None] = {}  # image member -> (its file here, kind)
        self.by_content: dict[str, tuple[Path, str]] = {}  # sha256 of the bytes -> (a file of them, kind)
        self._counted = 0  # attachment members whose bytes new_file_bytes() has counted

    def new_file_bytes(self) -> int:
        """The bytes of the attachment members kept since the last call (each counted once; the
        quota counts a person's files once, however many rows name them)."""
        kept = list(self.attachments.values())[self._counted :]
        self._counted = len(self.attachments)
        return sum(member[1] for member in kept if member is not None)

    def images(self, entry_id: int, listed) -> list[dict]:
        """An imported entry's image records, their files in its image folder (`bytes`: each
        file's size, which the quota counts)."""
        records = []
        for n, item in enumerate(listed[: images.MAX_PER_ENTRY] if isinstance(listed, list) else []):
            if not isinstance(item, dict):
                continue
            record = {"n": n, "caption": str(item.get("caption") or "")[:300]}
            for side in ("width", "height"):
                value = item.get(side)
                record[side] = value if isinstance(value, int) and 0 < value < 100_000 else 0
            target = self._place(item.get("file"), images.folder(entry_id), n)
            if target is None:
                record["error"] = str(item.get("error") or "") or NOT_IN_FILE
            else:
                record.update(file=target.name, bytes=target.stat().st_size)
            records.append(record)
        return records

    def _place(self, name, folder: Path, n: int) -> Path | None:
        """The member as image `n` of an entry (`folder`): linked to the file already written of
        it (or of the same bytes), else written; None when it is not an image to keep."""
        if self.archive is None or not isinstance(name, str) or not name.startswith("images/"):
            return None
        if name in self.by_name:
            known = self.by_name[name]
            if known is None:
                return None
            return _link_or_copy(known[0], folder / f"{n}.{known[1]}")
        data = self._read(name)
        kind = images.kind_of(data[:12]) if data else None
        if kind is None:
            self.by_name[name] = None
            return None
        digest = hashlib.sha256(data).hexdigest()
        if digest in self.by_content:
            path, extension = self.by_content[digest]
            target = _link_or_copy(path, folder / f"{n}.{extension}")
        else:
            target = private_folder(folder) / f"{n}.{kind[0]}"
            with private_file(target) as out:
                out.write(data)
            self.by_content[digest] = (target, kind[0])
        self.by_name[name] = self.by_content[digest]
        return target

    def _read(self, name: str) -> bytes | None:
        """The member's bytes, at most images.MAX_BYTES (reading stops at the size it declares;
        a member holding more fails its checksum, and the import is refused as damaged)."""
        try:
            info = self.archive.getinfo(name)
        except KeyError:
            return None
        return self.archive.read(info) if info.file_size <= images.MAX_BYTES else None


def _link_or_copy(source: Path, target: Path) -> Path:
    private_folder(target.parent)
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:  # a filesystem without hard links
        with source.open("rb") as data, private_file(target) as out:
            shutil.copyfileobj(data, out)
    return target
