"""Generated images: saved while the answer runs (their links expire), shown from pplxweb's copy
to their owner only, fenced against hostile links and bytes, deleted, exported and imported."""

from __future__ import annotations

import io
import json
import zipfile

import httpx
import pytest
from asgiref.sync import sync_to_async

from pplxweb.perplexity.extract import Image
from search import images
from search.history import export, imports
from search.live import outcome
from search.models import Entry
from tests.fake_perplexity.app import png
from tests.search.conftest import BASE, Paced, answer_stream, serve
from tests.search.test_consumer import ask

PNG = png()


@pytest.fixture(autouse=True)
def _images_of_this_test_only(settings, tmp_path):
    """Entry ids repeat between tests (rolled back); their image folders must not."""
    settings.DATA_DIR = tmp_path


def with_image(url: str, caption: str = "A blue square") -> list[dict]:
    events = answer_stream(["Here it is."])
    step = {
        "step_type": "GENERATE_IMAGE_RESULTS",
        "assets": [
            {
                "asset_type": "GENERATED_IMAGE",
                "generated_image": {"url": url, "image_width": 64, "image_height": 48},
                "download_info": [{"filename": caption}],
            }
        ],
    }
    events.insert(
        2,
        {
            "status": "PENDING",
            "blocks": [{"intended_usage": "pro_search_steps", "plan_block": {"steps": [step]}}],
        },
    )
    return events


@pytest.mark.django_db(transaction=True)
async def test_a_generated_image_is_saved_while_the_answer_runs_and_shown_from_pplxweb(
    owner, member, alinked, upstream, client
):
    picture = upstream.get("/media/square.png").respond(
        200, content=PNG, headers={"content-type": "image/png"}
    )
    serve(upstream, Paced(with_image(f"{BASE}/media/square.png?X-Amz-Signature=abc")))
    messages = await ask(owner, {"q": "draw a blue square"}, "status-completed")
    entry = await Entry.objects.aget()
    assert picture.call_count == 1
    assert "cookie" not in picture.calls[0].request.headers  # the session never goes with it
    assert entry.images == [
        {"n": 0, "caption": "A blue square", "width": 64, "height": 48, "file": "0.png", "bytes": len(PNG)}
    ]
    assert entry.image_bytes == len(PNG)  # what the quota counts
    assert (images.folder(entry.pk) / "0.png").read_bytes() == PNG
    src = f'src="/entry/{entry.pk}/image/0/"'
    assert any(src in m for m in messages)  # shown live, before or with the final update
    assert "X-Amz-Signature" not in "".join(messages)  # the page never points at Perplexity's link

    await sync_to_async(client.force_login)(owner)
    page = await sync_to_async(client.get)(f"/thread/{entry.thread_id}/")
    assert src in page.content.decode() and 'alt="A blue square"' in page.content.decode()
    response = await sync_to_async(client.get)(f"/entry/{entry.pk}/image/0/")
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert b"".join(response.streaming_content) == PNG
    assert (await sync_to_async(client.get)(f"/entry/{entry.pk}/image/1/")).status_code == 404
    await sync_to_async(client.force_login)(member)
    assert (await sync_to_async(client.get)(f"/entry/{entry.pk}/image/0/")).status_code == 404


@pytest.mark.parametrize(
    ("url", "response", "sentence"),
    [
        ("https://evil.example/x.png", None, "not Perplexity's image host"),
        ("http://user-gen-media-assets.s3.amazonaws.com/x.png", None, "not Perplexity's image host"),
        ("https://user:pw@perplexity.test/x.png", None, "not Perplexity's image host"),
        (f"{BASE}/x.png", httpx.Response(403), "link to it had expired"),
        (f"{BASE}/x.png", httpx.Response(500), "answered 500"),
        (f"{BASE}/x.png", httpx.Response(302, headers={"location": "http://127.0.0.1/"}), "answered 302"),
        (
            f"{BASE}/x.png",
            httpx.Response(200, content=b"<svg onload=alert(1)>", headers={"content-type": "image/png"}),
            "not a PNG, JPEG, GIF or WebP",
        ),
        (f"{BASE}/x.png", httpx.ConnectError("refused"), "connection to the image host did not work"),
        (f"{BASE}/x.png", httpx.Response(200, content=PNG + b"\0" * 2048), "larger than 0 MB"),
    ],
)
async def test_a_hostile_or_failed_image_gets_a_sentence_and_leaves_no_file(
    upstream, monkeypatch, url, response, sentence
):
    if "larger" in sentence:
        monkeypatch.setattr(images, "MAX_BYTES", 1024)
    route = upstream.get("/x.png").mock(side_effect=[response] if response is not None else [])
    record = await images.keep(7, 0, Image(url, "cap", 10, 10))
    assert sentence in record["error"] and "file" not in record
    assert record["error"].startswith("This image could not be saved.")
    assert route.call_count == (0 if response is None else 1)
    assert not any(images.folder(7).glob("*")) if images.folder(7).exists() else True


async def test_each_kind_of_image_is_kept_with_its_own_extension(upstream):
    kinds = {
        "gif": b"GIF89a" + b"\0" * 20,
        "jpg": b"\xff\xd8\xff\xe0" + b"\0" * 20,
        "webp": b"RIFF\0\0\0\0WEBPVP8 " + b"\0" * 20,
    }
    for n, (extension, body) in enumerate(kinds.items()):
        upstream.get(f"/{extension}").respond(200, content=body, headers={"content-type": "text/html"})
        record = await images.keep(3, n, Image(f"{BASE}/{extension}", "lone \ud800 surrogate"))
        assert record["file"] == f"{n}.{extension}"
        assert record["caption"] == "lone ? surrogate"  # JSON columns cannot store a lone one


@pytest.mark.django_db
def test_deleting_an_entry_or_removing_a_person_removes_their_images(
    owner, member, owner_client, django_capture_on_commit_callbacks
):
    from search.members import remove_member
    from search.models import Thread

    mine, theirs = (
        Entry.objects.create(
            thread=Thread.objects.create(user=user, title="t"), question="q", status="completed"
        )
        for user in (owner, member)
    )
    for entry in (mine, theirs):
        images.folder(entry.pk).mkdir(parents=True)
        (images.folder(entry.pk) / "0.png").write_bytes(PNG)
    with django_capture_on_commit_callbacks(execute=True):  # the removal waits for the commit
        owner_client.post("/history/delete/", {"entry": mine.pk, "confirm": "1"})
    assert not images.folder(mine.pk).exists() and images.folder(theirs.pk).exists()
    with django_capture_on_commit_callbacks(execute=True):
        remove_member(owner, member.pk, keep_history=False)
    assert not images.folder(theirs.pk).exists()
    orphan = images.folder(999_999)
    orphan.mkdir(parents=True)
    assert images.sweep() == 1 and not orphan.exists()


@pytest.mark.django_db
def test_the_history_zip_carries_the_images_and_importing_it_restores_them(owner, member):
    from search.models import Thread

    thread = Thread.objects.create(user=owner, title="Squares")
    entry = Entry.objects.create(
        thread=thread,
        question="draw",
        status="completed",
        answer="Here.",
        images=[
            {"n": 0, "caption": "A [blue] square", "width": 64, "height": 48, "file": "0.png"},
            {"n": 1, "caption": "Lost", "error": "This image could not be saved. It is larger than 20 MB."},
        ],
    )
    images.folder(entry.pk).mkdir(parents=True)
    (images.folder(entry.pk) / "0.png").write_bytes(PNG)
    archive = zipfile.ZipFile(io.BytesIO(b"".join(export.history_zip(owner))))
    assert archive.read(f"images/{entry.pk}-0.png") == PNG
    [markdown] = [n for n in archive.namelist() if n.startswith("markdown/")]
    text = archive.read(markdown).decode()
    assert f"![A \\[blue\\] square](../images/{entry.pk}-0.png)" in text and "*Generated image: Lost*" in text
    listed = json.loads(archive.read("history.json"))["threads"][0]["entries"][0]["images"]
    assert [i["file"] for i in listed] == [f"images/{entry.pk}-0.png", None]

    assert imports.import_history(member, b"".join(export.history_zip(owner))) == (1, 0)
    copy = Entry.objects.get(user=member)
    assert copy.images[0] == {
        "n": 0,
        "caption": "A [blue] square",
        "width": 64,
        "height": 48,
        "file": "0.png",
        "bytes": len(PNG),
    }
    assert copy.images[1]["error"].endswith("It is larger than 20 MB.")
    assert copy.image_bytes == len(PNG) and copy.import_bytes > 0
    assert (images.folder(copy.pk) / "0.png").read_bytes() == PNG

    # a zip whose image is not an image: the entry comes in, the file does not
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as forged:
        data = json.loads(archive.read("history.json"))
        data["threads"][0]["entries"][0]["question"] = "forged"
        forged.writestr("history.json", json.dumps(data))
        forged.writestr(f"images/{entry.pk}-0.png", b"<script>alert(1)</script>")
    imports.import_history(member, buffer.getvalue())
    forged_entry = Entry.objects.get(user=member, question="forged")
    assert "file" not in forged_entry.images[0] and not images.folder(forged_entry.pk).exists()


@pytest.mark.django_db
def test_a_history_zip_is_imported_from_the_upload_and_the_size_limits_hold(owner, owner_client, monkeypatch):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from search.models import Thread

    entry = Entry.objects.create(
        thread=Thread.objects.create(user=owner, title="t"), question="q", status="completed",
        images=[{"n": 0, "caption": "c", "file": "0.png"}],
    )  # fmt: skip
    images.folder(entry.pk).mkdir(parents=True)
    (images.folder(entry.pk) / "0.png").write_bytes(PNG)
    archive = b"".join(export.history_zip(owner))
    Entry.objects.all().delete()
    images.remove([entry.pk])
    upload = SimpleUploadedFile("history.zip", archive, content_type="application/zip")
    response = owner_client.post("/history/import/", {"file": upload}, follow=True)
    assert "Imported 1 conversation." in response.content.decode()
    copy = Entry.objects.get()
    assert (images.folder(copy.pk) / "0.png").read_bytes() == PNG

    monkeypatch.setattr(imports, "MAX_ZIP", len(archive) - 1)
    with pytest.raises(imports.ImportRefused, match="zip is larger than 4 GB"):
        imports.import_history(owner, archive)
    monkeypatch.setattr(imports, "MAX_IMPORT", 10)
    with pytest.raises(imports.ImportRefused, match="file is larger than 8 MB"):
        imports.import_history(owner, b"{" + b" " * 20 + b"}")


@pytest.mark.django_db
def test_images_kept_for_an_entry_deleted_while_it_ran_go_at_its_final_save(owner):
    from pplxweb.perplexity.request import AskRequest
    from search.live.runner import Run

    images.folder(424242).mkdir(parents=True)
    (images.folder(424242) / "0.png").write_bytes(PNG)
    outcome.save_run(Run(424242, owner, AskRequest("q")), final=False)
    assert images.folder(424242).exists()  # a progress save leaves them (the final one decides)
    outcome.save_run(Run(424242, owner, AskRequest("q")), final=True)
    assert not images.folder(424242).exists()


@pytest.mark.django_db
def test_a_damaged_zip_is_refused_and_what_was_written_before_is_taken_back(owner, member, monkeypatch):
    from search.models import Thread

    monkeypatch.setattr(imports, "WRITE_BATCH", 1)  # the first conversation is in before the fault shows
    for n, question in enumerate(("first", "second")):
        entry = Entry.objects.create(
            thread=Thread.objects.create(user=owner, title=question), question=question, status="completed",
            images=[{"n": 0, "caption": "c", "file": "0.png"}],
        )  # fmt: skip
        images.folder(entry.pk).mkdir(parents=True)
        (images.folder(entry.pk) / "0.png").write_bytes(PNG[:-12] + bytes([n]) * 12)
    archive = b"".join(export.history_zip(owner))
    assert imports.import_history(member, archive) == (2, 0)  # whole, it imports
    images.remove(Entry.objects.filter(user=member).values_list("pk", flat=True))
    Thread.objects.filter(user=member).delete()
    damaged = archive.replace(bytes([1]) * 12, bytes([2]) * 12)  # the second image: its CRC no longer matches
    with pytest.raises(imports.ImportRefused, match="That zip is damaged; nothing was imported"):
        imports.import_history(member, damaged)
    assert not Thread.objects.filter(user=member).exists()
    assert sorted(p.name for p in images.folder(0).parent.iterdir()) == sorted(
        str(e.pk) for e in Entry.objects.filter(user=owner)
    )  # the first copy's image went too
