"""Every file pplxweb sends from what it keeps (attached files, kept images) or makes of upstream
text (exports, reports, an answer's Markdown) follows one rule (search/served.py): a download,
except an image the page shows whose bytes are one; always under a sandbox CSP, nosniff and
same-origin CORP. The browser's side of it is tests/e2e/test_files_never_run.py."""

from __future__ import annotations

import warnings

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from pplxweb.datadir import private_file, private_folder
from search import attachments, images
from search.models import Entry, Thread
from tests import hostile_files

pytestmark = pytest.mark.django_db


def body(response) -> bytes:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "StreamingHttpResponse must consume asynchronous iterators")
        return b"".join(response) if response.streaming else response.content


def assert_fenced(response, disposition: str, content_type: str) -> None:
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith(disposition), response["Content-Disposition"]
    assert response["Content-Type"].startswith(content_type), response["Content-Type"]
    directives = {d.strip() for d in response["Content-Security-Policy"].split(";")}
    assert directives == {"sandbox", "default-src 'none'"}
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Cross-Origin-Resource-Policy"] == "same-origin"


def keep(owner, name: str, data: bytes):
    return attachments.keep(owner, SimpleUploadedFile(name, data, "application/pdf"))


def kept_image(owner, data: bytes) -> Entry:
    thread = Thread.objects.create(user=owner, title="Pictures")
    entry = Entry.objects.create(
        thread=thread, user=owner, question="draw", status=Entry.Status.COMPLETED, answer="Here [1].",
        report="# Report", images=[{"n": 0, "file": "0.png"}],
    )  # fmt: skip
    with private_file(private_folder(images.folder(entry.pk)) / "0.png") as out:
        out.write(data)
    return entry


@pytest.mark.parametrize(
    "make", [hostile_files.open_action_pdf, hostile_files.object_stream_pdf, hostile_files.xfa_pdf]
)
def test_a_pdf_with_script_is_kept_and_only_ever_a_download(owner, owner_client, make):
    data = make("ran")
    kept = keep(owner, "form.pdf", data)
    assert kept.kind == "pdf"
    for suffix in ("", "?inline=1"):
        response = owner_client.get(reverse("search:attachment", args=[kept.pk]) + suffix)
        assert_fenced(response, "attachment;", "application/octet-stream")
        assert body(response) == data


def test_a_png_that_is_also_html_is_only_ever_an_image(owner, owner_client):
    data = hostile_files.png_html("ran")
    kept = keep(owner, "photo.png", data)
    url = reverse("search:attachment", args=[kept.pk])
    assert_fenced(owner_client.get(url + "?inline=1"), "inline;", "image/png")
    assert_fenced(owner_client.get(url), "attachment;", "application/octet-stream")
    entry = kept_image(owner, data)
    response = owner_client.get(reverse("search:image", args=[entry.pk, 0]))
    assert_fenced(response, "inline;", "image/png")
    assert body(response) == data


def test_a_kept_image_whose_bytes_are_not_an_image_is_a_download(owner, owner_client):
    entry = kept_image(owner, b"<html><script>alert(1)</script></html>")  # named 0.png on disk
    response = owner_client.get(reverse("search:image", args=[entry.pk, 0]))
    assert_fenced(response, "attachment;", "application/octet-stream")


def test_exports_are_downloads_under_the_sandbox(owner, owner_client):
    entry = kept_image(owner, hostile_files.PNG)
    for name, args, kind in [
        ("search:export_thread", [entry.thread_id, "md"], "text/markdown"),
        ("search:export_thread", [entry.thread_id, "json"], "application/json"),
        ("search:export_all", [], "application/zip"),
        ("search:entry_report", [entry.pk], "text/markdown"),
        ("search:entry_markdown", [entry.pk], "text/markdown"),
    ]:
        response = owner_client.get(reverse(name, args=args))
        assert_fenced(response, "attachment;", kind)
        body(response)
