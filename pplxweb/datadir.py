"""The data dir is private: only the user running pplxweb can read anything in it.

It holds the database (with SQLite's WAL and shared-memory files), the secrets, the encryption
keys, attached files and kept images. On every start (settings.py calls make_private):

- the process's umask becomes 077, so whatever pplxweb or a library creates from then on (SQLite
  makes its database 0600, and its -wal, -shm and -journal files take the database's mode) is
  private; pplxweb's own files are also opened with explicit modes (private_file, private_folder);
- the folder and every folder in it are made 0700, every other file 0600, whatever an earlier
  run, a restored backup or `mkdir` left (symbolic links are followed: what they point at is
  part of the data dir);
- where that cannot hold, pplxweb refuses to start with a sentence naming the folder: something
  in it belongs to another user (who could open it again), or the filesystem does not keep modes
  and shows a file open to others after the change (vfat or SMB mounted with open modes).

A filesystem that ignores modes but shows every file private (vfat mounted with umask=077, a
FUSE mount without allow_other) is accepted: what counts is what the system enforces.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pplxweb.env import ConfigError

FOLDER_MODE = 0o700
FILE_MODE = 0o600
OPEN_TO_OTHERS = 0o077  # group and other bits
UMASK = 0o077


class NotPrivate(ConfigError):
    """The data dir cannot be made private; the message is one sentence naming the folder."""


def make_private(root: Path) -> int:
    """Set the umask, then make `root` 0700 and everything in it private (folders 0700, files
    0600). Returns how many modes were changed; raises NotPrivate when one cannot be."""
    os.umask(UMASK)
    root = Path(root)
    changed = 0
    for path, status in _entries(root):
        changed += _make_private(root, path, status)
    return changed


def _entries(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """The root and everything below it, each once (a link loop is walked once)."""
    seen: set[tuple[int, int]] = set()
    pending = [root]
    while pending:
        path = pending.pop()
        try:
            status = path.stat()
        except FileNotFoundError:  # removed meanwhile, or a dangling link: nothing to protect
            continue
        if (status.st_dev, status.st_ino) in seen:
            continue
        seen.add((status.st_dev, status.st_ino))
        yield path, status
        if stat.S_ISDIR(status.st_mode):
            with contextlib.suppress(FileNotFoundError):
                pending.extend(entry for entry in path.iterdir())


def _make_private(root: Path, path: Path, status: os.stat_result) -> int:
    if status.st_uid != os.geteuid():
        raise NotPrivate(_not_ours(root, path, status.st_uid))
    wanted = FOLDER_MODE if stat.S_ISDIR(status.st_mode) else FILE_MODE
    if stat.S_IMODE(status.st_mode) == wanted:
        return 0
    try:
        os.chmod(path, wanted)
        status = path.stat()
    except FileNotFoundError:
        return 0
    except OSError:  # EPERM, ENOSYS, EROFS: what the filesystem shows decides below
        pass
    if stat.S_IMODE(status.st_mode) & OPEN_TO_OTHERS:
        raise NotPrivate(_modes_ignored(root, path, stat.S_IMODE(status.st_mode), wanted))
    return 1


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _not_ours(root: Path, path: Path, uid: int) -> str:
    what = f"The data folder {root}" if path == root else f"{path} in the data folder {root}"
    me = _user(os.geteuid())
    return (
        f"{what} belongs to {_user(uid)}, not to {me}, who runs pplxweb, so it cannot be kept private "
        f"(its owner could open it to anyone). Give it to {me} (chown -R {me} {root}) or point "
        "PPLXWEB_DATA_DIR at a folder of that user's own."
    )


def _modes_ignored(root: Path, path: Path, shown: int, wanted: int) -> str:
    return (
        f"The data folder {root} is on a filesystem that does not keep file modes: {path} stays "
        f"{shown:04o} after a change to {wanted:04o}, so other users of this machine could read the "
        "database and keys. Put PPLXWEB_DATA_DIR on a filesystem with Unix permissions (ext4, xfs, "
        "btrfs, ...), or mount this one so that only this user can read it (for vfat: uid=, umask=077)."
    )


def private_folder(path: Path) -> Path:
    """mkdir -p with mode 0700 for each folder it makes."""
    missing = []
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another task made it a moment ago
            folder.mkdir(mode=FOLDER_MODE)
    return Path(path)


def private_file(path: Path, exclusive: bool = False) -> BinaryIO:
    """Open `path` for writing as a new 0600 file (replacing its content if it exists, unless
    `exclusive`: then FileExistsError)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, FILE_MODE)
    os.fchmod(fd, FILE_MODE)  # a file that was there keeps its mode through O_TRUNC
    return os.fdopen(fd, "wb")
