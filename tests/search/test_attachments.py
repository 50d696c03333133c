"""Files asked about: judged by their bytes, kept safely, handed to Perplexity, asked with (the
plain form and the socket's ids), downloaded by their owner only, swept when orphaned."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import stat
import time
import zipfile
from datetime import timedelta

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import QueryDict
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from search import attachments
from search.attachments import Refused
from search.live import starts
from search.models import Attachment, Entry
from tests.perplexity.streams import web_results
from tests.search.conftest import Paced, answer_stream, serve, words

pytestmark = pytest.mark.django_db(transaction=True)

STORAGE = "https://files.perplexity.test/"
UUID = "00000067-0000-4000-8000-000000000000"
OBJECT = f"{STORAGE}web/direct-files/attachments/12345678/{UUID}/statement.pdf"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n"
SSE = {"content-type": "text/event-stream; charset=utf-8"}


@pytest.fixture(autouse=True)
def hosts(settings, tmp_path):
    settings.UPLOAD_HOSTS = ("files.perplexity.test",)
    settings.DATA_DIR = tmp_path  # each test its own attachments folder


def docx() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document/>")
    return out.getvalue()


def upload(name: str, data: bytes, content_type: str = "application/octet-stream") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type)


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("statement.pdf", PDF, "pdf"),
        ("photo.png", PNG, "png"),
        ("photo.jpeg", b"\xff\xd8\xff\xe0" + b"\0" * 20, "jpeg"),
        ("clip.gif", b"GIF89a" + b"\0" * 20, "gif"),
        ("pic.webp", b"RIFF\0\0\0\0WEBPVP8 " + b"\0" * 20, "webp"),
        ("letter.docx", docx(), "docx"),
        ("notes.txt", "Grüße, three words\n".encode(), "text"),
        ("README.md", b"# Title\n\ntext\n", "markdown"),
        ("sheet.csv", b"a,b\n1,2\n", "csv"),
        ("no extension", b"plain words\n", "text"),
    ],
)
def test_each_kind_is_judged_by_its_bytes(owner, name, data, kind):
    kept = attachments.keep(owner, upload(name, data))
    assert kept.kind == kind and kept.size == len(data)
    path = attachments.path_of(kept)
    assert path.read_bytes() == data and path.parent.name == "attachments"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert name not in str(path)  # stored under pplxweb's own name


@pytest.mark.parametrize(
    ("name", "data", "words_"),
    [
        ("photo.png", b"<!DOCTYPE html><html><script>alert(1)</script></html>", "is not a PNG image"),
        ("statement.pdf", PNG, "is not a PDF: its bytes are a PNG image"),
        ("program.exe", b"MZ\x90\x00\x03" + b"\0" * 50, "is not a kind pplxweb can send"),
        ("page.html", b"<html></html>", "text of a kind pplxweb does not send"),
        ("empty.txt", b"", "is empty (0 bytes)"),
        ("broken.zip.docx", b"PK\x03\x04broken", "is not a kind"),
    ],
)
def test_bad_files_are_refused_with_a_sentence_and_leave_nothing(owner, name, data, words_):
    with pytest.raises(Refused, match=re.escape(words_)):
        attachments.keep(owner, upload(name, data))
    assert not Attachment.objects.exists()
    assert list(attachments.folder().iterdir()) == []


def test_a_file_over_the_limit_is_refused(owner, settings):
    settings.ATTACHMENT_MAX_MB = 1
    with pytest.raises(Refused, match="at most 1 MB"):
        attachments.keep(owner, upload("big.txt", b"a" * (1024 * 1024 + 1)))
    assert list(attachments.folder().iterdir()) == []


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("../../etc/passwd.txt", "passwd.txt"),
        ("dir\\sub\\notes.txt", "notes.txt"),
        ("bell\x07and\x1bescape.txt", "bell\ufffdand\ufffdescape.txt"),
        ("x" * 300 + ".txt", "x" * 187 + "….txt"),
    ],
)
def test_odd_names_are_stored_safely_and_shown_as_given(owner, given, shown):
    kept = attachments.keep(owner, upload("placeholder.txt", b"words\n"))
    assert attachments.shown_name(given) == shown
    kept.name = attachments.shown_name(given)
    assert "/" not in attachments.upstream_name(kept) and "\x07" not in attachments.upstream_name(kept)


def test_the_sweep_removes_day_old_uploads_and_files_of_deleted_entries(owner):
    old = attachments.keep(owner, upload("old.txt", b"old\n"))
    fresh = attachments.keep(owner, upload("fresh.txt", b"fresh\n"))
    Attachment.objects.filter(pk=old.pk).update(created=timezone.now() - timedelta(days=2))
    stray = attachments.folder() / ("0" * 32 + ".pdf")
    stray.write_bytes(PDF)  # an entry's file whose row went with the entry
    in_flight = attachments.folder() / ("1" * 32 + ".pdf")
    in_flight.write_bytes(PDF)  # another tab's upload, its row not written yet
    an_hour_ago = time.time() - 3600
    os.utime(stray, (an_hour_ago, an_hour_ago))
    assert attachments.sweep() == 2
    assert in_flight.exists()
    assert not stray.exists() and attachments.path_of(old) is None
    assert attachments.path_of(fresh) is not None and Attachment.objects.filter(pk=fresh.pk).exists()


# --- through the web ---------------------------------------------------------------------------


def storage_routes(mock, storage: httpx.Response | None = None, success: bool = True):
    def batch(request):
        (key,) = json.loads(request.content)["files"]
        fields = {"key": f"web/direct-files/attachments/12345678/{UUID}/statement.pdf", "policy": "p"}
        return httpx.Response(
            200,
            json={"results": {key: {"s3_bucket_url": STORAGE, "s3_object_url": OBJECT, "fields": fields}}},
        )

    mock.post("/rest/uploads/batch_create_upload_urls").mock(side_effect=batch)
    stored = mock.post(STORAGE).mock(return_value=storage or httpx.Response(204))
    frame = json.dumps({"file_uuid": UUID, "success": success, "s3_url": OBJECT})
    mock.post("/rest/sse/attachment_processing/subscribe").respond(
        200,
        headers=SSE,
        content=f"event: message\r\ndata: {frame}\r\n\r\nevent: end_of_stream\r\ndata: {{}}\r\n\r\n",
    )
    return stored


def with_file_hit(events: list[dict]) -> list[dict]:
    hit = {"name": "statement.pdf", "url": OBJECT, "snippet": "", "is_attachment": True}
    events[1]["blocks"] = [web_results(hit, *events[1]["blocks"][0]["web_result_block"]["web_results"])]
    return events


async def client_for(user) -> AsyncClient:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


async def wait_done(pk: int) -> Entry:
    for _ in range(200):
        entry = await Entry.objects.aget(pk=pk)
        if entry.status != "running":
            return entry
        await asyncio.sleep(0.05)
    raise AssertionError("still running")


async def test_the_plain_form_asks_with_a_file(owner, alinked, upstream):
    stored = storage_routes(upstream)
    ask = serve(upstream, Paced(with_file_hit(answer_stream(words(5))), pause=0.01))
    client = await client_for(owner)
    response = await client.post(
        reverse("search:ask"), {"q": "what is in it?", "files": [upload("statement.pdf", PDF, "text/html")]}
    )
    assert response.status_code == 302
    entry = await wait_done((await Entry.objects.aget()).pk)
    assert entry.status == "completed"
    assert json.loads(ask.calls.last.request.content)["params"]["attachments"] == [OBJECT]
    assert (
        b"Content-Type: application/pdf" in stored.calls.last.request.read()
    )  # judged, not the browser's word
    kept = await Attachment.objects.aget()
    assert kept.entry_id == entry.pk and kept.cited and kept.remote_url == OBJECT
    assert OBJECT not in [s["url"] for s in entry.sources]  # a file hit is not a web source
    page = (await client.get(reverse("search:thread", args=[entry.thread_id]))).content.decode()
    assert "statement.pdf" in page and "your file, cited" in page
    assert reverse("search:attachment", args=[kept.pk]) in page


async def test_every_failure_keeps_the_question_and_the_good_files(owner, alinked, upstream):
    denied = b"<Error><Code>AccessDenied</Code><Message>Policy expired</Message></Error>"
    stored = storage_routes(upstream, storage=httpx.Response(403, content=denied))
    ask = serve(upstream, Paced(answer_stream(words(5))))
    client = await client_for(owner)
    # a bad file: nothing is sent anywhere, the good one is kept for the next try
    response = await client.post(
        reverse("search:ask"),
        {"q": "keep me", "files": [upload("statement.pdf", PDF), upload("fake.png", b"<html>no</html>")]},
    )
    page = response.content.decode()
    assert response.status_code == 200 and not stored.called and not ask.called
    assert "“fake.png” is not a PNG image" in page and "keep me" in page
    kept = await Attachment.objects.aget()
    assert f'name="attachment" value="{kept.pk}" checked' in page
    # the storage refuses: its own words, and the file is still kept
    response = await client.post(reverse("search:ask"), {"q": "keep me", "attachment": [str(kept.pk)]})
    page = response.content.decode()
    assert "refused “statement.pdf”: Policy expired" in page and "keep me" in page
    assert f'name="attachment" value="{kept.pk}" checked' in page
    assert not ask.called and not await Entry.objects.aexists()
    # the next try (the storage fine again) asks with it
    upstream.post(STORAGE).mock(return_value=httpx.Response(204))
    response = await client.post(reverse("search:ask"), {"q": "keep me", "attachment": [str(kept.pk)]})
    assert response.status_code == 302
    await wait_done((await Entry.objects.aget()).pk)
    assert json.loads(ask.calls.last.request.content)["params"]["attachments"] == [OBJECT]


async def test_processing_failure_asks_nothing(owner, alinked, upstream):
    storage_routes(upstream, success=False)
    ask = serve(upstream, Paced(answer_stream(words(5))))
    client = await client_for(owner)
    response = await client.post(
        reverse("search:ask"), {"q": "read it", "files": [upload("statement.pdf", PDF)]}
    )
    assert "Perplexity could not read “statement.pdf”" in response.content.decode()
    assert not ask.called and not await Entry.objects.aexists()


async def test_the_attach_endpoint_and_the_socket_path(owner, alinked, upstream):
    storage_routes(upstream)
    client = await client_for(owner)
    response = await client.post(reverse("search:attach"), {"file": upload("statement.pdf", PDF)})
    described = response.json()
    assert response.status_code == 200 and described["ready"] and described["kind"] == "PDF"
    data = QueryDict(mutable=True)
    data.update({"q": "and now?"})
    data.setlist("attachment", [str(described["id"])])
    outcome = await sync_to_async(starts.prepare)(owner, data)
    entry, request, _ = outcome
    assert request.attachments == (OBJECT,)
    assert (await Attachment.objects.aget()).entry_id == entry.pk
    # the same file cannot be asked with twice (it belongs to its entry now)
    again = await sync_to_async(starts.prepare)(owner, data)
    assert isinstance(again, str) and "already asked with" in again


async def test_the_files_keep_the_order_they_were_attached_in(owner, alinked, upstream):
    """Two uploads finish in either order (the later one may get the lower pk): the saved
    question lists its files as the question did, on its page and when asked again."""
    storage_routes(upstream)
    client = await client_for(owner)
    ids = []
    for name, data in (("statement.pdf", PDF), ("photo.png", PNG)):
        response = await client.post(reverse("search:attach"), {"file": upload(name, data)})
        ids.append(str(response.json()["id"]))
    data = QueryDict(mutable=True)
    data.update({"q": "both?"})
    data.setlist("attachment", list(reversed(ids)))  # the photo was attached first
    entry, _, _ = await sync_to_async(starts.prepare)(owner, data)
    wanted = ["photo.png", "statement.pdf"]
    assert [a["name"] for a in attachments.listed(entry)] == wanted  # the live page
    saved = await Entry.objects.aget(pk=entry.pk)
    assert [a.name async for a in saved.attachments.all()] == wanted  # the saved page, export, retry
    copies = await sync_to_async(attachments.again)(owner, saved)  # "Edit and ask again"
    assert [a.name for a in copies] == wanted


async def test_a_file_not_on_perplexity_yet_is_refused_by_the_socket(owner, alinked):
    kept = await sync_to_async(attachments.keep)(owner, upload("notes.txt", b"words\n"))
    data = QueryDict(mutable=True)
    data.update({"q": "now", "attachment": str(kept.pk)})
    outcome = await sync_to_async(starts.prepare)(owner, data)
    assert (
        outcome
        == "“notes.txt” is not on Perplexity yet; wait for it, or remove it and attach it again. Nothing was asked."
    )


async def test_the_attach_endpoint_refuses_with_a_sentence(owner, alinked):
    client = await client_for(owner)
    response = await client.post(reverse("search:attach"), {"file": upload("photo.png", b"<html>")})
    assert response.status_code == 400 and "is not a PNG image" in response.json()["error"]


async def test_downloads_are_for_the_owner_only_and_never_inline_documents(owner, member, alinked):
    kept = await sync_to_async(attachments.keep)(owner, upload("<b>statement</b>.pdf", PDF))
    image = await sync_to_async(attachments.keep)(owner, upload("photo.png", PNG))
    client = await client_for(owner)
    response = await client.get(reverse("search:attachment", args=[kept.pk]) + "?inline=1")
    assert response.status_code == 200 and b"".join(response.streaming_content) == PDF
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Type"] == "application/octet-stream"
    response = await client.get(reverse("search:attachment", args=[image.pk]) + "?inline=1")
    assert response["Content-Type"] == "image/png" and response["Content-Disposition"].startswith("inline")
    other = await client_for(member)
    assert (await other.get(reverse("search:attachment", args=[kept.pk]))).status_code == 404
    assert (await other.post(reverse("search:remove_attachment", args=[kept.pk]))).status_code == 204
    assert await Attachment.objects.filter(pk=kept.pk).aexists()  # not theirs to remove


async def test_an_api_key_cannot_send_files(owner, upstream):
    from accounts.models import PerplexityAccount

    await sync_to_async(PerplexityAccount.objects.create)(user=owner, email="", api_key="pplx-key")
    client = await client_for(owner)
    response = await client.post(reverse("search:attach"), {"file": upload("notes.txt", b"words\n")})
    assert response.status_code == 400 and "API key cannot send files" in response.json()["error"]
    assert not await Attachment.objects.aexists()


async def test_ask_again_and_edit_and_ask_again_reuse_the_files(owner, alinked, upstream):
    stored = storage_routes(upstream)
    ask = serve(upstream, Paced(answer_stream(words(3))), Paced(answer_stream(words(3))))
    client = await client_for(owner)
    await client.post(reverse("search:ask"), {"q": "first", "files": [upload("statement.pdf", PDF)]})
    first = await wait_done((await Entry.objects.aget()).pk)
    kept = await Attachment.objects.aget()
    response = await client.post(reverse("search:redo", args=[first.pk]))
    assert response.status_code == 302
    second = await wait_done((await Entry.objects.exclude(pk=first.pk).aget()).pk)
    assert stored.call_count == 2  # uploaded afresh
    assert json.loads(ask.calls.last.request.content)["params"]["attachments"] == [OBJECT]
    # Ask again is a version of the same turn: the same row and file, never a copy
    assert await Attachment.objects.acount() == 1 and (await Attachment.objects.aget()).entry_id == first.pk
    assert attachments.path_of(kept).read_bytes() == PDF
    page = (await client.get(reverse("search:thread", args=[first.thread_id]))).content.decode()
    assert f'id="entry-{second.pk}"' in page and "statement.pdf" in page  # the version shows its turn's file
    # "Ask in a new conversation": the box comes with fresh copies, ticked
    page = (await client.get(reverse("search:home") + f"?again={first.pk}")).content.decode()
    copy = await Attachment.objects.filter(entry__isnull=True).aget()
    assert f'name="attachment" value="{copy.pk}" checked' in page and "first" in page


async def test_deleting_an_entry_removes_its_files(owner, alinked, upstream):
    storage_routes(upstream)
    serve(upstream, Paced(answer_stream(words(3))))
    client = await client_for(owner)
    await client.post(reverse("search:ask"), {"q": "first", "files": [upload("statement.pdf", PDF)]})
    entry = await wait_done((await Entry.objects.aget()).pk)
    path = attachments.path_of(await Attachment.objects.aget())
    response = await client.post(reverse("search:delete"), {"entry": [str(entry.pk)], "confirm": "1"})
    assert response.status_code == 302 and not await Attachment.objects.aexists()
    assert not path.exists()


def test_exports_carry_the_files_and_import_brings_them_back(owner, member, client):
    from search.models import Thread
    from tests.search.test_history import downloaded

    thread = Thread.objects.create(user=owner, title="my files")
    entry = Entry.objects.create(
        thread=thread, question="what is in them?", answer="Two files.", status="completed"
    )
    pdf = attachments.keep(owner, upload("statement.pdf", PDF))
    png = attachments.keep(owner, upload("photo.png", PNG))
    Attachment.objects.filter(pk__in=[pdf.pk, png.pk]).update(entry=entry)
    Attachment.objects.filter(pk=pdf.pk).update(cited=True)
    client.force_login(owner)
    zipped = downloaded(client.get(reverse("search:export_all")))
    archive = zipfile.ZipFile(io.BytesIO(zipped))
    files = sorted(n for n in archive.namelist() if n.startswith("attachments/"))
    assert [archive.read(n) for n in files] == [PDF, PNG]
    (markdown,) = [archive.read(n).decode() for n in archive.namelist() if n.endswith(".md")]
    assert f"- Attached: [statement.pdf](../{files[0]})" in markdown
    listed = json.loads(archive.read("history.json"))["threads"][0]["entries"][0]["attachments"]
    assert [(f["name"], f["kind"], f["cited"]) for f in listed] == [
        ("statement.pdf", "pdf", True),
        ("photo.png", "png", False),
    ]
    single = client.get(reverse("search:export_thread", args=[thread.pk, "md"])).content.decode()
    assert "- Attached: statement.pdf" in single
    client.force_login(member)
    response = client.post(reverse("search:import"), {"file": io.BytesIO(zipped)}, follow=True)
    assert "Imported 1 conversation." in response.content.decode()
    theirs = list(Attachment.objects.filter(user=member).order_by("pk"))
    assert [(a.name, a.kind, a.cited) for a in theirs] == [
        ("statement.pdf", "pdf", True),
        ("photo.png", "png", False),
    ]
    assert attachments.path_of(theirs[0]).read_bytes() == PDF and theirs[0].entry.user_id == member.pk
    assert theirs[0].stored == pdf.stored  # the same bytes: one file, named by its content
    Entry.objects.filter(pk=entry.pk).delete()
    attachments.remove_stored([pdf.stored, png.stored])
    assert attachments.path_of(theirs[0]).read_bytes() == PDF  # theirs stays while their rows name it


def test_an_import_judges_the_files_again(owner, client):
    history = {
        "format": "pplxweb-history/1",
        "threads": [{"title": "t", "entries": [{"question": "q", "created": "2026-01-02T03:04:05+00:00", "attachments": [
            {"name": "photo.png", "file": "attachments/1-1-photo.png"},
            {"name": "../../escape.txt", "file": "../escape.txt"},
        ]}]}],
    }  # fmt: skip
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("history.json", json.dumps(history))
        archive.writestr("attachments/1-1-photo.png", b"<html><script>alert(1)</script></html>")
        archive.writestr("../escape.txt", b"words")
    client.force_login(owner)
    response = client.post(reverse("search:import"), {"file": io.BytesIO(out.getvalue())}, follow=True)
    assert "Imported 1 conversation." in response.content.decode()
    assert not Attachment.objects.exists() and list(attachments.folder().iterdir()) == []


async def test_removing_a_chip_removes_the_upload_and_its_file(owner, alinked):
    kept = await sync_to_async(attachments.keep)(owner, upload("notes.txt", b"words\n"))
    path = attachments.path_of(kept)
    client = await client_for(owner)
    assert (await client.post(reverse("search:remove_attachment", args=[kept.pk]))).status_code == 204
    assert not await Attachment.objects.aexists() and not path.exists()


async def test_a_follow_up_takes_files_and_the_earlier_ones_stay_listed(owner, alinked, upstream):
    storage_routes(upstream)
    ask = serve(upstream, Paced(answer_stream(words(3))), Paced(answer_stream(words(3))))
    client = await client_for(owner)
    await client.post(reverse("search:ask"), {"q": "first", "files": [upload("notes.txt", b"first words\n")]})
    first = await wait_done((await Entry.objects.aget()).pk)
    response = await client.post(
        reverse("search:ask"),
        {"q": "and this one?", "thread": str(first.thread_id), "files": [upload("statement.pdf", PDF)]},
    )
    assert response.status_code == 302
    second = await wait_done((await Entry.objects.exclude(pk=first.pk).aget()).pk)
    params = json.loads(ask.calls.last.request.content)["params"]
    assert params["last_backend_uuid"] == "b-1" and params["attachments"] == [OBJECT]
    assert second.thread_id == first.thread_id
    page = (await client.get(reverse("search:thread", args=[first.thread_id]))).content.decode()
    assert page.count('class="entry-files"') == 2 and "notes.txt" in page and "statement.pdf" in page


async def test_a_running_answer_marks_its_file_hits_live(owner, alinked, upstream):
    """The answer's attachment hit marks the file "your file" in a fragment sent while the answer
    still streams (the mark the saved page shows), not only on the page after a reload."""
    from channels.layers import get_channel_layer

    storage_routes(upstream)
    serve(upstream, Paced(with_file_hit(answer_stream(words(8))), pause=0.15))
    client = await client_for(owner)
    await client.post(reverse("search:ask"), {"q": "what is in it?", "files": [upload("statement.pdf", PDF)]})
    entry = await Entry.objects.aget()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(f"entry-{entry.pk}", channel)
    sent = []
    while not sent or "status-completed" not in sent[-1]:
        sent.append((await asyncio.wait_for(layer.receive(channel), 10))["html"])
    files = [i for i, html in enumerate(sent) if f'id="entry-{entry.pk}-files" hx-swap-oob="true"' in html]
    assert len(files) == 1 and files[0] < len(sent) - 1  # once, as the hit arrived: before the end
    assert "word7" not in "".join(sent[: files[0] + 1])  # the answer was still arriving
    assert re.search(
        r'statement\.pdf</a> <span[^>]*>PDF, [^<]*</span> <span class="badge">your file, cited',
        sent[files[0]],
    )
    await wait_done(entry.pk)
    assert (await Attachment.objects.aget()).cited  # and the saved page says the same
