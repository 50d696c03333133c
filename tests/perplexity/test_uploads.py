"""Files for a question against respx routes shaped like docs/protocol.md §10 and the SUBSCRIBE capture."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import respx

from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import AuthError, ChallengeError, RateLimited
from pplxweb.perplexity.request import AskRequest, ask_body
from pplxweb.perplexity.uploads import LocalFile, UploadError, allowed, storage_message, upload

BASE = "https://pplx.test"
STORAGE = "https://files.pplx.test/"
HOSTS = ("files.pplx.test",)
UUID = "00000067-0000-4000-8000-000000000000"
OBJECT = f"https://files.pplx.test/web/direct-files/attachments/12345678/{UUID}/notes.txt"
SSE = {"content-type": "text/event-stream; charset=utf-8"}
DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Invalid according to Policy: Policy expired.</Message></Error>"
)


@pytest.fixture
def mock():
    with respx.mock(assert_all_called=False) as router:
        yield router


@pytest.fixture
def notes(tmp_path: Path) -> LocalFile:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"three words please\n" * 100)
    return LocalFile(path, "notes.txt", "text/plain", path.stat().st_size)


def client() -> PerplexityClient:
    return PerplexityClient(BASE, impersonate="off", cookies={"__Secure-next-auth.session-token": "tok"})


def batch_reply(request: httpx.Request, bucket: str = STORAGE, target: str = OBJECT) -> httpx.Response:
    files = json.loads(request.content)["files"]
    results = {
        key: {
            "s3_bucket_url": bucket,
            "s3_object_url": target,
            "fields": {
                "key": f"web/direct-files/attachments/12345678/{UUID}/notes.txt",
                "policy": "p",
                "signature": "s",
            },
        }
        for key in files
    }
    return httpx.Response(200, json={"results": results})


def processed(success: bool = True) -> httpx.Response:
    frame = {"file_uuid": UUID, "success": success, "s3_url": OBJECT, "final_sse_message": False}
    body = f"event: message\r\ndata: {json.dumps(frame)}\r\n\r\nevent: end_of_stream\r\ndata: {{}}\r\n\r\n"
    return httpx.Response(200, headers=SSE, content=body.encode())


def routes(mock, storage=None, processing=None, batch=None):
    mock.post(f"{BASE}/rest/uploads/batch_create_upload_urls").mock(side_effect=batch or batch_reply)
    store = mock.post(STORAGE).mock(return_value=storage or httpx.Response(204))
    sub = mock.post(f"{BASE}/rest/sse/attachment_processing/subscribe").mock(
        return_value=processing or processed()
    )
    return store, sub


async def test_the_whole_flow_names_the_files_for_the_ask(mock, notes):
    store, sub = routes(mock)
    async with client() as c:
        done = await upload(c, [notes], HOSTS)
    assert [u.url for u in done] == [OBJECT]
    batch = json.loads(mock.calls[0].request.content)["files"]
    (described,) = batch.values()
    assert described["content_type"] == "text/plain" and described["file_size"] == notes.size
    sent = store.calls.last.request
    assert "cookie" not in sent.headers  # the account's session never goes to the storage
    body = sent.read()
    assert body.index(b'name="policy"') < body.index(b'name="file"; filename="notes.txt"')
    assert b"Content-Type: text/plain" in body and b"three words please" in body
    assert json.loads(sub.calls.last.request.content) == {"file_uuids": [UUID]}
    request = AskRequest("summarize", attachments=tuple(u.url for u in done))
    assert ask_body(request)["params"]["attachments"] == [OBJECT]


@pytest.mark.parametrize(
    ("status", "headers", "body", "error"),
    [
        (401, {}, b"{}", AuthError),
        (403, {"content-type": "text/html"}, b"<title>Just a moment...</title>", ChallengeError),
        (429, {"retry-after": "9"}, b"{}", RateLimited),
    ],
)
async def test_upload_urls_refused_say_what_searches_say(mock, notes, status, headers, body, error):
    routes(mock, batch=lambda request: httpx.Response(status, headers=headers, content=body))
    async with client() as c:
        with pytest.raises(error):
            await upload(c, [notes], HOSTS)


async def test_the_storage_xml_error_is_the_sentence(mock, notes):
    routes(mock, storage=httpx.Response(403, content=DENIED, headers={"content-type": "application/xml"}))
    async with client() as c:
        with pytest.raises(
            UploadError, match=r"refused “notes.txt”: Invalid according to Policy: Policy expired"
        ):
            await upload(c, [notes], HOSTS)


async def test_a_storage_redirect_is_not_followed(mock, notes):
    routes(mock, storage=httpx.Response(307, headers={"location": "http://169.254.169.254/"}))
    metadata = mock.get("http://169.254.169.254/")
    async with client() as c:
        with pytest.raises(UploadError, match=r"redirect"):
            await upload(c, [notes], HOSTS)
    assert not metadata.called


@pytest.mark.parametrize(
    "bucket",
    ["file:///etc/passwd", "http://169.254.169.254/latest/", "http://files.pplx.test/", "https://evil.test/"],
)
async def test_a_storage_address_off_the_allowed_hosts_is_never_contacted(mock, notes, bucket):
    routes(mock, batch=lambda request: batch_reply(request, bucket=bucket))
    elsewhere = mock.route(host__in=("169.254.169.254", "evil.test"))
    async with client() as c:
        with pytest.raises(UploadError, match=r"not an allowed file host"):
            await upload(c, [notes], HOSTS)
    assert not elsewhere.called
    assert not any(call.request.url.host == "files.pplx.test" for call in mock.calls)


async def test_processing_failure_names_the_file(mock, notes):
    routes(mock, processing=processed(success=False))
    async with client() as c:
        with pytest.raises(UploadError, match=r"could not read “notes.txt”"):
            await upload(c, [notes], HOSTS)


async def test_processing_is_bounded(mock, notes):
    async def slow(request):
        import asyncio

        await asyncio.sleep(5)
        return processed()

    routes(mock)
    mock.post(f"{BASE}/rest/sse/attachment_processing/subscribe").mock(side_effect=slow)
    async with client() as c:
        with pytest.raises(UploadError, match=r"did not finish reading “notes.txt” within 0 s"):
            await upload(c, [notes], HOSTS, timeout=0.2)


async def test_a_stream_that_ends_without_the_file_is_a_failure(mock, notes):
    empty = httpx.Response(200, headers=SSE, content=b"event: end_of_stream\r\ndata: {}\r\n\r\n")
    routes(mock, processing=empty)
    async with client() as c:
        with pytest.raises(UploadError, match=r"stopped without saying “notes.txt” could be read"):
            await upload(c, [notes], HOSTS)


async def test_the_single_file_endpoint_when_the_batch_one_is_missing(mock, notes):
    routes(mock, batch=lambda request: httpx.Response(404, text="Not Found"))
    single = mock.post(f"{BASE}/rest/uploads/create_upload_url").mock(
        side_effect=lambda request: httpx.Response(
            200, json={"s3_bucket_url": STORAGE, "s3_object_url": OBJECT, "fields": {"key": f"a/b/{UUID}/n"}}
        )
    )
    async with client() as c:
        done = await upload(c, [notes], HOSTS)
    assert done[0].url == OBJECT and json.loads(single.calls.last.request.content)["filename"] == "notes.txt"


def test_allowed_hosts():
    assert allowed("https://files.pplx.test/x", HOSTS, BASE)
    assert allowed("https://pplx.test/_storage/", HOSTS, BASE)  # Perplexity's own address
    assert allowed("http://127.0.0.1:8765/_storage/", HOSTS, "http://127.0.0.1:8765")
    assert not allowed("http://files.pplx.test/x", HOSTS, BASE)
    assert not allowed("https://files.pplx.test:8443/x", HOSTS, BASE)
    assert not allowed("https://user:pw@files.pplx.test/x", HOSTS, BASE)
    assert not allowed("https://files.pplx.test.evil.test/x", HOSTS, BASE)
    assert not allowed("https://[::1", HOSTS, BASE)


def test_storage_message_reads_s3_errors_only():
    assert storage_message(DENIED) == "Invalid according to Policy: Policy expired."
    assert storage_message(b"<html>nope") == ""


REST_SET = ("x-pplx-account", "x-perplexity-request-reason", "x-perplexity-request-try-number",
            "x-perplexity-request-endpoint", "sec-fetch-dest", "sec-fetch-mode", "sec-fetch-site",
            "x-app-apiclient", "x-app-apiversion")  # fmt: skip


@pytest.mark.parametrize("batch_missing", [False, True])
async def test_upload_requests_carry_the_headers_of_every_rest_call(mock, notes, batch_missing):
    store, sub = routes(
        mock, batch=(lambda request: httpx.Response(404, text="Not Found")) if batch_missing else None
    )
    single = mock.post(f"{BASE}/rest/uploads/create_upload_url").mock(
        side_effect=lambda request: httpx.Response(
            200, json={"s3_bucket_url": STORAGE, "s3_object_url": OBJECT, "fields": {"key": f"a/b/{UUID}/n"}}
        )
    )
    cookies = {"__Secure-next-auth.session-token": "tok"}
    async with PerplexityClient(BASE, impersonate="off", cookies=cookies, account_id="acct-1") as c:
        await upload(c, [notes], HOSTS)
    path = "/rest/uploads/create_upload_url" if batch_missing else "/rest/uploads/batch_create_upload_urls"
    asked = next(call.request for call in mock.calls if call.request.url.path == path)
    processing = sub.calls.last.request
    for request, endpoint in ((asked, path), (processing, "/rest/sse/attachment_processing/subscribe")):
        assert all(name in request.headers for name in REST_SET), (endpoint, request.headers)
        assert request.headers["x-pplx-account"] == "acct-1"
        assert request.headers["x-perplexity-request-endpoint"] == BASE + endpoint
        assert request.headers["x-perplexity-request-try-number"] == "1"
        assert request.headers["sec-fetch-site"] == "same-origin"
    assert single.called is batch_missing
    stored = store.calls.last.request.headers  # the storage is not Perplexity: none of it goes there
    assert "x-pplx-account" not in stored and "cookie" not in stored
