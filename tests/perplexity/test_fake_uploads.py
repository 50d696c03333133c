"""The protocol client's uploads against the fake (in process, httpx's ASGI transport): the
storage checks the signed form, the processing stream, the ask's attachments and its file hit."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import ChallengeError, RateLimited
from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.request import AskRequest
from pplxweb.perplexity.uploads import LocalFile, UploadError, create_forms, send_file, upload
from tests.fake_perplexity import app as fake
from tests.fake_perplexity import uploads as fake_uploads

BASE = "https://fake.perplexity.test"
PDF = b"%PDF-1.7\n" + b"0" * 4000 + b"\n%%EOF\n"


@pytest.fixture(autouse=True)
def fresh_fake():
    fake.state.update({"ask": {"pace": 0}, "requests": [], "uploads": {"base": BASE}})
    fake_uploads.reset()
    yield
    fake.state.update({"ask": {}, "requests": []})
    fake.state.pop("uploads", None)


@pytest.fixture
def pdf(tmp_path) -> LocalFile:
    path = tmp_path / "statement.pdf"
    path.write_bytes(PDF)
    return LocalFile(path, "statement.pdf", "application/pdf", len(PDF))


def client() -> PerplexityClient:
    return PerplexityClient(
        BASE, transport=httpx.ASGITransport(app=fake.application), cookies={fake.SESSION_COOKIE: fake.TOKEN}
    )


async def send(files, **kwargs):
    async with client() as c:
        return await upload(
            c, files, (), storage_transport=httpx.ASGITransport(app=fake.application), **kwargs
        )


async def test_uploaded_processed_and_asked_about(pdf):
    (done,) = await send([pdf])
    stored = fake_uploads.seen["stored"]
    assert stored == [{"file_uuid": done.file_uuid, "problem": ""}]
    assert fake_uploads.files[done.file_uuid]["stored"] == len(PDF)
    async with client() as c:
        stream = c.ask(AskRequest("what is in it?", attachments=(done.url,)))
        async with stream:
            async for _ in stream:
                pass
    assert fake_uploads.seen["asked"] == [[done.url]]
    result = extract(stream.snapshot, ended=stream.ended)
    assert result.status == "completed"
    assert done.url not in [s.url for s in result.sources]  # the file hit is not a web source


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        (lambda fields: {**fields, "policy": "another"}, "bad signature"),
        (lambda fields: {**fields, "key": "web/x/y/unknown/statement.pdf"}, "unknown key"),
    ],
)
async def test_the_storage_checks_the_signed_form(pdf, tamper, problem):
    async with client() as c:
        (form,) = await create_forms(c, [pdf], ())
    forged = replace(form, fields=tuple(tamper(dict(form.fields)).items()))
    with pytest.raises(UploadError, match="Invalid according to Policy"):
        await send_file(forged, pdf, (), BASE, httpx.ASGITransport(app=fake.application))
    assert fake_uploads.seen["stored"][0]["problem"] == problem


async def test_the_storage_checks_the_announced_type_and_size(pdf):
    async with client() as c:
        (form,) = await create_forms(c, [pdf], ())
    other = replace(pdf, content_type="text/html")
    with pytest.raises(UploadError, match="Invalid according to Policy"):
        await send_file(form, other, (), BASE, httpx.ASGITransport(app=fake.application))
    assert fake_uploads.seen["stored"][0]["problem"] == "content type text/html is not application/pdf"


@pytest.mark.parametrize(
    ("fault", "error", "words"),
    [
        ("storage_403", UploadError, "Policy Condition failed"),
        ("processing_failed", UploadError, "could not read"),
        ("never_ready", UploadError, "stopped without saying"),
        ("redirect", UploadError, "redirect"),
        ("403", ChallengeError, "Cloudflare"),
        ("429", RateLimited, "rate limit"),
    ],
)
async def test_each_fault_is_a_sentence(pdf, fault, error, words):
    fake.state["uploads"]["fault"] = fault
    with pytest.raises(error, match=words):
        await send([pdf])


async def test_slow_processing_is_given_up(pdf):
    fake.state["uploads"].update(fault="slow", pace=5)
    with pytest.raises(UploadError, match="within 0 s"):
        await send([pdf], timeout=0.3)


async def test_a_link_local_storage_address_is_refused(pdf):
    fake.state["uploads"]["bucket"] = "http://169.254.169.254/latest/"
    with pytest.raises(UploadError, match="not an allowed file host"):
        await send([pdf])
    assert fake_uploads.seen["stored"] == []
