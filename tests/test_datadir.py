"""Private data stays private on disk (pplxweb/datadir.py), checked on real starts: a data dir
made open (`mkdir -m 755`, files 0644) is closed at start, so that a real second user (`nobody`,
through setpriv) who read the database before cannot after; new files, SQLite's WAL and
shared-memory files included, are created 0600; a folder of another user's, and a filesystem that
does not keep modes (vfat through fusefat, mounted open), stop the start with a sentence naming it."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent
AS_ROOT = os.geteuid() == 0 and shutil.which("setpriv") is not None
needs_root = pytest.mark.skipif(not AS_ROOT, reason="needs root and setpriv to act as another user")


def start(data: Path, code: str = "pass") -> subprocess.CompletedProcess:
    """pplxweb started on `data` in a process of its own (its settings loaded, as every start
    loads them), running `code` in it."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PPLXWEB_") and k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    environ["PPLXWEB_DATA_DIR"] = str(data)
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def as_nobody(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", *command],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=30,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_place():
    """A folder any user may enter (as a home or /srv is), for a data dir inside it: in /tmp
    itself (this process's temporary folder is the test data dir's, which nobody else enters)."""
    place = Path(tempfile.mkdtemp(prefix="pplxweb-datadir-", dir="/tmp"))
    place.chmod(0o755)
    yield place
    shutil.rmtree(place, ignore_errors=True)


def open_data_dir(place: Path) -> Path:
    """A data dir as `mkdir -m 755` and a loose umask leave it, with what a run keeps in it."""
    data = place / "data"
    data.mkdir()
    data.chmod(0o755)
    database = sqlite3.connect(data / "db.sqlite3")
    database.execute("create table django_session (session_key text, session_data text)")
    database.execute("insert into django_session values ('the-session-key-of-the-owner', 'x')")
    database.commit()
    database.close()
    files = ["db.sqlite3-wal", "db.sqlite3-shm", "db.sqlite3-journal", "secret_key",
             "attachments/0123456789abcdef0123456789abcdef.pdf", "images/3/0.png", "tmp/upload.part",
             "static/pplxweb.css"]  # fmt: skip
    for name in files:
        path = data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text("the owner's data\n")
    (data / "field_keys").write_text(Fernet.generate_key().decode() + "\n")
    for path in [data, *data.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return data


@needs_root
def test_an_open_data_dir_is_closed_at_start_and_nobody_reads_it_any_more(open_place):
    data = open_data_dir(open_place)
    before = as_nobody("cat", str(data / "db.sqlite3"))
    assert before.returncode == 0 and "the-session-key-of-the-owner" in before.stdout  # the finding
    started = start(data)
    assert started.returncode == 0, started.stderr
    for path in [data, *data.rglob("*")]:
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    for name in ("db.sqlite3", "db.sqlite3-wal", "secret_key", "field_keys", "images/3/0.png"):
        after = as_nobody("cat", str(data / name))
        assert after.returncode != 0 and "Permission denied" in after.stderr, name
    assert "the-session-key-of-the-owner" not in after.stdout


NEW_FILES = """
import os, stat
from pathlib import Path
from django.conf import settings
from django.db import connection
from search import images
with connection.cursor() as cursor:  # the database and its WAL and shared memory, held open
    cursor.execute("create table t (x)")
    cursor.execute("insert into t values (1)")
    for path in sorted(Path(settings.DATA_DIR).rglob("*")):
        print(f"{stat.S_IMODE(path.stat().st_mode):04o} {path.relative_to(settings.DATA_DIR)}")
"""


def test_new_files_are_created_private_sqlites_wal_and_shm_included(open_place):
    data = open_place / "fresh"  # made by the start itself
    started = start(data, NEW_FILES)
    assert started.returncode == 0, started.stderr
    shown = {
        m["name"]: m["mode"] for m in re.finditer(r"^(?P<mode>0[0-7]{3}) (?P<name>.+)$", started.stdout, re.M)
    }
    assert {"db.sqlite3", "db.sqlite3-wal", "db.sqlite3-shm", "secret_key", "field_keys", "tmp"} <= set(shown)
    for name, seen in shown.items():
        assert seen == ("0700" if (data / name).is_dir() else "0600"), name
    assert mode(data) == 0o700


@needs_root
def test_a_data_dir_of_another_user_stops_the_start_naming_it(open_place):
    data = open_data_dir(open_place)
    shutil.chown(data, "nobody")
    refused = start(data)
    assert refused.returncode == 2
    assert f"pplxweb: The data folder {data} belongs to nobody, not to root" in refused.stderr
    assert "Traceback" not in refused.stderr
    shutil.chown(data, "root")
    shutil.chown(data / "images" / "3" / "0.png", "nobody")
    refused = start(data)
    assert refused.returncode == 2
    assert f"{data / 'images' / '3' / '0.png'} in the data folder {data} belongs to nobody" in refused.stderr


@pytest.fixture
def open_vfat(open_place):
    """A vfat filesystem (an image file through fusefat) mounted so that every file shows 0755 and
    any user may read it: a filesystem that ignores modes."""
    if not AS_ROOT or not shutil.which("fusefat") or not shutil.which("mkfs.vfat"):
        pytest.skip("needs root, fusefat and mkfs.vfat (Debian: fusefat, dosfstools)")
    image, mount = open_place / "fat.img", open_place / "mnt"
    mount.mkdir()
    with image.open("wb") as out:
        out.truncate(16 * 1024 * 1024)
    subprocess.run(["mkfs.vfat", str(image)], check=True, capture_output=True)
    mounted = subprocess.run(
        ["fusefat", "-o", "rw+,umask=022,allow_other", str(image), str(mount)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"this machine cannot mount FUSE filesystems: {mounted.stderr!r}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_filesystem_that_ignores_modes_stops_the_start_naming_the_folder(open_vfat):
    data = open_vfat / "data"
    data.mkdir()
    (data / "secret_key").write_text("the owner's key\n")
    assert as_nobody("cat", str(data / "secret_key")).stdout == "the owner's key\n"  # what is at stake
    refused = start(data)
    assert refused.returncode == 2
    assert (
        f"pplxweb: The data folder {data} is on a filesystem that does not keep file modes" in refused.stderr
    )
    assert "Traceback" not in refused.stderr
    assert not (data / "db.sqlite3").exists()  # nothing was written there


def test_links_are_followed_once_and_dangling_ones_skipped(tmp_path):
    from pplxweb import datadir

    data = tmp_path / "data"
    (data / "inner").mkdir(parents=True)
    (data / "inner" / "loop").symlink_to(data)
    (data / "gone").symlink_to(tmp_path / "nothing-here")
    elsewhere = tmp_path / "images-elsewhere"
    elsewhere.mkdir(mode=0o755)
    (elsewhere / "0.png").write_bytes(b"png")
    (elsewhere / "0.png").chmod(0o644)
    (data / "images").symlink_to(elsewhere)
    datadir.make_private(data)
    assert mode(elsewhere) == 0o700 and mode(elsewhere / "0.png") == 0o600
    assert mode(data / "inner") == 0o700
    assert datadir.make_private(data) == 0  # nothing left to change
