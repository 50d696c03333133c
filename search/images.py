"""Generated images, kept: Perplexity's links to them expire after about 35 minutes (docs/protocol.md
§6.6), so a run downloads each one as soon as it appears, into the data folder beside the
database (`images/<entry id>/<n>.<png|jpg|gif|webp>`), and the page shows pplxweb's copy.

Upstream text is hostile, so a download is fenced: only from Perplexity's image host (or
Perplexity's own address), https only (the configured Perplexity address may be http, for a
local stand-in), no redirects, no cookies, at most MAX_BYTES, and kept only if the bytes are a
PNG, JPEG, GIF or WebP image whatever the server says they are, and if it fits in the person's
storage quota (search.storage; a record says its file's `bytes`). A failed download keeps a
sentence saying why in its place.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from channels.db import database_sync_to_async
from django.conf import settings

from pplxweb.datadir import private_file, private_folder
from pplxweb.perplexity.extract import Image
from pplxweb.perplexity.transport import make_transport
from search.saving import clean

log = logging.getLogger(__name__)

IMAGE_HOSTS = ("user-gen-media-assets.s3.amazonaws.com",)
MAX_BYTES = 20 * 1024 * 1024
TIMEOUT = 30.0
MAX_PER_ENTRY = 12
KINDS = {  # magic bytes -> (extension, content type)
    b"\x89PNG\r\n\x1a\n": ("png", "image/png"),
    b"\xff\xd8\xff": ("jpg", "image/jpeg"),
    b"GIF87a": ("gif", "image/gif"),
    b"GIF89a": ("gif", "image/gif"),
}
TYPES = {"png": "image/png", "jpg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


class NotKept(Exception):
    """The image was not saved; the message is the sentence shown in its place."""


def folder(entry_id: int) -> Path:
    return Path(settings.DATA_DIR) / "images" / str(int(entry_id))


def allowed(url: str) -> bool:
    """From Perplexity's image host over https, or from Perplexity's own address."""
    parts, home = urlsplit(url), urlsplit(settings.PERPLEXITY_URL)
    if parts.username or parts.password:
        return False
    if parts.scheme == "https" and parts.hostname in IMAGE_HOSTS and parts.port in (None, 443):
        return True
    return (parts.scheme, parts.hostname, parts.port) == (home.scheme, home.hostname, home.port)


def kind_of(head: bytes) -> tuple[str, str] | None:
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp", "image/webp"
    return next((kind for magic, kind in KINDS.items() if head.startswith(magic)), None)


async def download(url: str, target: Path) -> str:
    """Save the image at `url` as `target` plus its extension; returns the file's name."""
    if not allowed(url):
        raise NotKept("Its address is not Perplexity's image host, so pplxweb did not fetch it.")
    partial = target.with_suffix(".partial")
    private_folder(target.parent)
    try:
        async with (
            httpx.AsyncClient(transport=make_transport("off"), timeout=TIMEOUT) as client,
            client.stream("GET", url, follow_redirects=False) as response,
        ):
            if response.status_code in (401, 403):
                raise NotKept("Perplexity's link to it had expired or was refused.")
            if response.status_code != 200:
                raise NotKept(f"Perplexity's image host answered {response.status_code}.")
            head, size = b"", 0
            with private_file(partial) as out:
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_BYTES:
                        raise NotKept(f"It is larger than {MAX_BYTES // 1024 // 1024} MB.")
                    if len(head) < 12:
                        head += chunk[:12]
                    out.write(chunk)
        kind = kind_of(head)
        if kind is None:  # whatever the server said it was (an SVG or HTML page could run script)
            raise NotKept("It is not a PNG, JPEG, GIF or WebP image.")
        name = f"{target.name}.{kind[0]}"
        os.replace(partial, target.with_name(name))
        return name
    except httpx.HTTPError as exc:
        raise NotKept("The download failed: the connection to the image host did not work.") from exc
    finally:
        partial.unlink(missing_ok=True)


async def keep(entry_id: int, n: int, image: Image, user_id: int | None = None) -> dict:
    """The record an entry keeps of its image number `n`: the saved file and its size, or why
    there is none; `user_id`: whose quota it counts against."""
    record = {"n": n, "caption": clean(image.caption), "width": image.width, "height": image.height}
    try:
        if user_id is not None:
            await database_sync_to_async(_room_for)(user_id, 0)
        name = await download(image.url, folder(entry_id) / str(n))
        size = (folder(entry_id) / name).stat().st_size
        if user_id is not None:
            try:
                await database_sync_to_async(_room_for)(user_id, size)
            except NotKept:
                (folder(entry_id) / name).unlink(missing_ok=True)
                raise
        record.update(file=name, bytes=size)
    except NotKept as exc:
        record["error"] = f"This image could not be saved. {exc}"
    except OSError as exc:
        log.error("saving image %s of entry %s failed: %s", n, entry_id, exc)
        record["error"] = "This image could not be saved: writing it to the data folder failed."
    except Exception:
        log.exception("saving image %s of entry %s failed", n, entry_id)
        record["error"] = "This image could not be saved: pplxweb hit an error (the server log says more)."
    return record


def _room_for(user_id: int, size: int) -> None:
    """NotKept when the person's quota has no room left (`size` 0: before the download), or
    not for `size` more bytes."""
    from search import storage  # (it reads the models; this module is read before them)

    try:
        if size:
            storage.check(user_id, size, f"Keeping it ({storage.size_text(size)})")
        else:
            storage.require_room(user_id, "Keeping it")
    except storage.Full as exc:
        raise NotKept(exc.message) from None


class Downloads:
    """The generated images of one running answer, in the order they appeared: each is saved
    as soon as it appears (its link expires); `on_saved` is called as each one ends."""

    def __init__(self, entry_id: int, on_saved: Callable[[], None], user_id: int | None = None) -> None:
        self.entry_id = entry_id
        self.user_id = user_id
        self.on_saved = on_saved
        self.tasks: dict[str, asyncio.Task] = {}  # by Image.key
        self.given_up: dict[str, dict] = {}

    def start(self, found: list[Image]) -> None:
        for image in found[:MAX_PER_ENTRY]:
            if image.key not in self.tasks:
                task = asyncio.ensure_future(keep(self.entry_id, len(self.tasks), image, self.user_id))
                task.add_done_callback(self._ended)
                self.tasks[image.key] = task

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled():
            self.on_saved()

    def records(self) -> list[dict]:
        """What the entry keeps of its images: saved, failed, or still downloading (`pending`)."""
        out = []
        for n, (key, task) in enumerate(self.tasks.items()):
            if key in self.given_up:
                out.append(self.given_up[key])
            elif task.done() and not task.cancelled():
                out.append(task.result())
            else:
                out.append({"n": n, "pending": True})
        return out

    async def finish(self) -> None:
        """Wait for the downloads (at most TIMEOUT more); one still going is given up."""
        pending = [task for task in self.tasks.values() if not task.done()]
        if pending:
            await asyncio.wait(pending, timeout=TIMEOUT)
        for n, (key, task) in enumerate(self.tasks.items()):
            if not task.done() or task.cancelled():
                task.cancel()
                self.given_up[key] = {
                    "n": n,
                    "error": "This image could not be saved: the download took too long.",
                }


def path_of(entry_id: int, record: dict) -> Path | None:
    """The saved file of an image record, if it is there (its name is checked, not trusted)."""
    name = str(record.get("file") or "")
    stem, _, extension = name.partition(".")
    if not stem.isdigit() or extension not in TYPES:
        return None
    path = folder(entry_id) / name
    return path if path.is_file() else None


def remove(entry_ids) -> None:
    """Delete the saved images of entries that are gone."""
    for entry_id in entry_ids:
        shutil.rmtree(folder(entry_id), ignore_errors=True)


def sweep() -> int:
    """Remove image folders whose entry no longer exists (a person removed, an interrupted
    delete). Returns how many went."""
    from search.models import Entry

    root = Path(settings.DATA_DIR) / "images"
    if not root.is_dir():
        return 0
    found = {int(p.name) for p in root.iterdir() if p.is_dir() and p.name.isdigit()}
    gone = found - set(Entry.objects.filter(pk__in=found).values_list("pk", flat=True))
    remove(gone)
    return len(gone)
