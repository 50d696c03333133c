"""In Chromium: no file pplxweb keeps runs script from pplxweb's origin (search/served.py).

The detector is shown to work first: the same files served as documents by a plain server on
this machine (a PDF inline, the PNG that is also HTML as a page), opened directly or embedded in a
page, make Chromium report the script's alert. Then pplxweb's own addresses of those files, opened
directly, with `?inline=1`, and embedded by another site's page on this host (same site, so the
session cookie goes with them), only ever download, or show an image: no alert."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from pplxweb.datadir import private_file, private_folder
from search import attachments, images
from search.models import Entry, Thread
from tests import hostile_files
from tests.e2e.test_search_journey import linked_owner, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

FILES = {
    "action.pdf": hostile_files.open_action_pdf("ran:action.pdf"),
    "padded.pdf": hostile_files.object_stream_pdf("ran:padded.pdf"),
    "xfa.pdf": hostile_files.xfa_pdf("ran:xfa.pdf"),
    "page.png": hostile_files.png_html("ran:page.png"),
}
SETTLE = 4.0  # seconds a page is given to run what it would run (the controls alert within ~1 s)


class Other(BaseHTTPRequestHandler):
    """Another site on this machine: FILES as documents (`/doc/<name>`), and `/embed?<urls>`, a
    page that puts each URL in an iframe, an embed and an object."""

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path.startswith("/doc/"):
            name = path.removeprefix("/doc/")
            body, kind = FILES[name], "application/pdf" if name.endswith(".pdf") else "text/html"
        else:
            frames = "".join(
                f'<iframe src="{u}"></iframe><embed src="{u}" type="application/pdf">'
                f'<object data="{u}" type="application/pdf"></object>'
                for u in query.split("|")
            )
            body, kind = f"<!DOCTYPE html><html><body>{frames}</body></html>".encode(), "text/html"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        return


@pytest.fixture
def other_site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@sync_to_async
def kept_files(owner) -> dict[str, str]:
    """Each hostile file attached by the owner, and the PNG/HTML one also kept as a generated
    image of an answer: name -> pplxweb's address of it."""
    found = {}
    for name, data in FILES.items():
        kept = attachments.keep(owner, SimpleUploadedFile(name, data, content_type="application/pdf"))
        found[name] = f"/attachment/{kept.pk}/"
    thread = Thread.objects.create(user=owner, title="images")
    entry = Entry.objects.create(
        thread=thread,
        user=owner,
        question="draw",
        status=Entry.Status.COMPLETED,
        images=[{"n": 0, "file": "0.png"}],
    )
    with private_file(private_folder(images.folder(entry.pk)) / "0.png") as out:
        out.write(FILES["page.png"])
    found["image"] = f"/entry/{entry.pk}/image/0/"
    return found


async def settle(page, dialogs: list[str], until: str = "") -> None:
    """Give the page SETTLE seconds, or until a dialog containing `until` shows."""
    for _ in range(int(SETTLE * 10)):
        if until and any(until in d for d in dialogs):
            return
        await asyncio.sleep(0.1)


async def open_at(page, url: str) -> str:
    """Open `url`; "download" when the browser saves it instead of showing it."""
    try:
        async with page.expect_download(timeout=5000):
            try:
                await page.goto(url)
            except Exception as exc:  # Chromium aborts the navigation it turns into a download
                if "Download is starting" not in str(exc):
                    raise
        return "download"
    except Exception as exc:
        if "Timeout" not in type(exc).__name__:
            raise
        return "shown"


async def test_kept_files_never_run_script_from_pplxweb(page, pplxweb_server, other_site):
    dialogs: list[str] = []

    async def on_dialog(dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    # the controls: served as documents, the PDFs' script (but XFA's: this Chromium has no XFA)
    # and the page's script run, opened or embedded
    for name in ("action.pdf", "padded.pdf", "page.png"):
        await page.goto(f"{other_site}/doc/{name}")
        await settle(page, dialogs, until=f"ran:{name}")
        assert f"ran:{name}" in dialogs, name
    dialogs.clear()
    await page.goto(f"{other_site}/embed?{other_site}/doc/padded.pdf")
    await settle(page, dialogs)
    assert "ran:padded.pdf" in dialogs
    await page.goto("about:blank")
    dialogs.clear()

    owner = await linked_owner()
    kept = await kept_files(owner)  # the PDFs with script are kept: they never open here
    await sign_in(page, pplxweb_server)
    for name in FILES:
        for suffix in ("", "?inline=1"):
            shown = await open_at(page, f"{pplxweb_server}{kept[name]}{suffix}")
            expected = "shown" if (name, suffix) == ("page.png", "?inline=1") else "download"
            assert shown == expected, (name, suffix)
            if shown == "shown":
                await settle(page, dialogs)
    assert await open_at(page, f"{pplxweb_server}{kept['image']}") == "shown"
    assert await page.evaluate("document.contentType") == "image/png"  # an image, not a page
    await settle(page, dialogs)
    urls = "|".join(f"{pplxweb_server}{kept[name]}?inline=1" for name in FILES)
    await page.goto(f"{other_site}/embed?{urls}|{pplxweb_server}{kept['image']}")
    await settle(page, dialogs)
    assert dialogs == []
    assert not any(frame.url.startswith("chrome-extension://") for frame in page.frames)  # no PDF viewer
