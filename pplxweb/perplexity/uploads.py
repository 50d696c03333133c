"""Files for a question (docs/protocol.md §10): upload URLs, the storage upload, the processing wait.

1. `POST /rest/uploads/batch_create_upload_urls` names, for each file, a storage form (a URL
   and signed fields); the older single-file `/rest/uploads/create_upload_url` is tried when
   the batch endpoint is missing (404).
2. The file goes to that storage URL as a multipart POST (the signed fields in order, then the
   file), streamed from disk: memory stays flat whatever the size. Success is 204. Only https
   on an allowed host (or Perplexity's own address, for a local stand-in) is ever contacted,
   never with the account's cookies, and a redirect is refused, not followed.
3. `POST /rest/sse/attachment_processing/subscribe` streams `{file_uuid, success}` until each
   file is ready (or failed), bounded by PROCESSING_TIMEOUT.
4. The ask then names the files' `s3_object_url`s (request.AskRequest.attachments).

No Django here: the caller passes the allowed hosts and the client (whose cookies it keeps).
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from pplxweb.perplexity.errors import NetworkError, PerplexityError, ProtocolError
from pplxweb.perplexity.request import API_VERSION, rest_headers
from pplxweb.perplexity.responses import check_response, is_json, json_body, read_limited
from pplxweb.perplexity.sse import StreamParser
from pplxweb.perplexity.transport import make_transport

if TYPE_CHECKING:
    from pplxweb.perplexity.client import PerplexityClient

STORAGE_HOSTS = ("ppl-ai-file-upload.s3.amazonaws.com",)
PROCESSING_TIMEOUT = 120.0
STORAGE_TIMEOUT = httpx.Timeout(connect=10.0, read=60.0, write=60.0, pool=10.0)
BATCH_PATH = "/rest/uploads/batch_create_upload_urls"
SINGLE_PATH = "/rest/uploads/create_upload_url"
PROCESSING_PATH = "/rest/sse/attachment_processing/subscribe"
# why each call is made (x-perplexity-request-reason): our own labels, no capture names the web
# app's for these calls; the other headers are every /rest/ call's (request.rest_headers)
UPLOAD_REASON = "file-upload"
PROCESSING_REASON = "attachment-processing"
KEY_UUID = re.compile(r"/([0-9A-Fa-f-]{16,64})/[^/]+$")  # web/direct-files/attachments/<user>/<uuid>/<name>
MAX_FIELDS = 50


class UploadError(PerplexityError):
    """A file could not be handed to Perplexity; the message names it and says why."""

    message = "Perplexity did not take the file."


@dataclass(frozen=True)
class LocalFile:
    """A file to send: where it is on disk, the name shown, its real content type and size."""

    path: Path
    name: str
    content_type: str
    size: int


@dataclass(frozen=True)
class StorageForm:
    key: str  # the client's uuid for this file in the batch
    bucket_url: str
    object_url: str
    fields: tuple[tuple[str, str], ...]
    file_uuid: str


@dataclass(frozen=True)
class Uploaded:
    name: str
    url: str  # what the ask's `attachments` names
    file_uuid: str


def allowed(url: str, hosts: tuple[str, ...], base_url: str) -> bool:
    """https on an allowed host (default port), or exactly Perplexity's configured address."""
    try:
        parts, home = urlsplit(url), urlsplit(base_url)
        port, home_port = parts.port, home.port
    except ValueError:
        return False
    if parts.username or parts.password or not parts.hostname:
        return False
    if parts.scheme == "https" and parts.hostname in hosts and port in (None, 443):
        return True
    return (parts.scheme, parts.hostname, port) == (home.scheme, home.hostname, home_port)


def _form(key: str, result: object, name: str, hosts: tuple[str, ...], base_url: str) -> StorageForm:
    """One file's storage form from Perplexity's answer, checked before anything is sent to it."""
    if not isinstance(result, dict):
        raise UploadError(f"Perplexity did not give an upload address for “{name}”.")
    if result.get("rate_limited"):
        raise UploadError(f"Perplexity's upload limit is reached; “{name}” was not sent. Try again later.")
    if result.get("error"):
        raise UploadError(f"Perplexity refused “{name}”: {str(result['error'])[:200]}.")
    bucket, target = result.get("s3_bucket_url"), result.get("s3_object_url")
    fields = result.get("fields")
    if not isinstance(bucket, str) or not isinstance(target, str) or not isinstance(fields, dict):
        raise UploadError(
            f"Perplexity's upload address for “{name}” is incomplete; pplxweb may need an update."
        )
    for url in (bucket, target):
        if not allowed(url, hosts, base_url):
            raise UploadError(
                f"Perplexity named a storage address for “{name}” that is not an allowed file host "
                f"({urlsplit(url).scheme or 'no'} scheme, host {urlsplit(url).hostname or 'none'!s:.80}), "
                "so pplxweb sent nothing there. See PPLXWEB_UPLOAD_HOSTS."
            )
    pairs = tuple((str(k), str(v)) for k, v in list(fields.items())[:MAX_FIELDS])
    file_uuid = result.get("file_uuid")
    if not isinstance(file_uuid, str) or not file_uuid:
        found = KEY_UUID.search(str(fields.get("key") or "")) or KEY_UUID.search(urlsplit(target).path)
        file_uuid = found.group(1) if found else ""
    return StorageForm(key, bucket, target, pairs, file_uuid)


async def create_forms(
    client: PerplexityClient, files: list[LocalFile], hosts: tuple[str, ...]
) -> list[StorageForm]:
    """Step 1: a storage form for each file (the batch endpoint, else one by one)."""
    keys = [str(uuid.uuid4()) for _ in files]
    described = {
        key: {
            "filename": f.name,
            # never "": some models then ignore the file (docs/protocol.md §10.1)
            "content_type": f.content_type,
            "source": "default",
            "file_size": f.size,
            "force_image": False,
            "skip_parsing": False,
        }
        for key, f in zip(keys, files, strict=True)
    }
    query = f"?version={API_VERSION}&source=default"
    response = await client._call(
        "POST", BATCH_PATH + query, json={"files": described}, headers=_json_headers(client, BATCH_PATH)
    )
    if response.status_code == 404 and not is_json(response):
        return [
            await _single_form(client, key, described[key], f, hosts)
            for key, f in zip(keys, files, strict=True)
        ]
    _check(response)
    results = json_body(response).get("results")
    results = results if isinstance(results, dict) else {}
    return [
        _form(key, results.get(key), f.name, hosts, client.base_url)
        for key, f in zip(keys, files, strict=True)
    ]


async def _single_form(
    client: PerplexityClient, key: str, described: dict, file: LocalFile, hosts: tuple[str, ...]
) -> StorageForm:
    response = await client._call(
        "POST",
        f"{SINGLE_PATH}?version={API_VERSION}&source=default",
        json=described,
        headers=_json_headers(client, SINGLE_PATH),
    )
    _check(response)
    return _form(key, json_body(response), file.name, hosts, client.base_url)


def _json_headers(client: PerplexityClient, path: str) -> dict[str, str]:
    headers = rest_headers(client.base_url, path, UPLOAD_REASON, client.account_id)
    return {"Content-Type": "application/json", **headers}


def _check(response: httpx.Response) -> None:
    """The search's sentences for 401/403/429/Cloudflare; a page instead of JSON is a format change."""
    check_response(response)
    if not is_json(response):
        raise ProtocolError("Perplexity answered the file upload with a web page instead of an address.")


def storage_message(body: bytes) -> str:
    """The storage's XML error's <Message> (S3 style), or ''."""
    from xml.etree import ElementTree

    try:
        root = ElementTree.fromstring(body[:16_384])  # noqa: S314 (no entities are expanded by etree)
    except ElementTree.ParseError:
        return ""
    text = root.findtext("Message") or root.findtext("Code") or ""
    return " ".join(text.split())[:200]


async def send_file(
    form: StorageForm,
    file: LocalFile,
    hosts: tuple[str, ...],
    base_url: str,
    transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """Step 2: the multipart POST to the storage, the file streamed from disk."""
    if not allowed(form.bucket_url, hosts, base_url):  # checked again right where it is used
        raise UploadError(f"The storage address for “{file.name}” is not an allowed file host.")
    try:
        async with httpx.AsyncClient(
            transport=transport or make_transport("off"), timeout=STORAGE_TIMEOUT, follow_redirects=False
        ) as http:
            with file.path.open("rb") as handle:
                response = await http.post(
                    form.bucket_url,
                    data=dict(form.fields),
                    files={"file": (file.name, handle, file.content_type)},
                )
    except httpx.TimeoutException:
        raise UploadError(
            f"Perplexity's file storage did not answer in time; “{file.name}” was not sent."
        ) from None
    except httpx.HTTPError:
        raise UploadError(
            f"pplxweb could not reach Perplexity's file storage; “{file.name}” was not sent."
        ) from None
    if response.status_code in (200, 201, 204):
        return
    if response.is_redirect:
        raise UploadError(
            f"Perplexity's file storage answered “{file.name}” with a redirect; pplxweb does not follow it."
        )
    said = storage_message(response.content)
    detail = f": {said}" if said else f" (status {response.status_code})"
    raise UploadError(f"Perplexity's file storage refused “{file.name}”{detail}.")


async def wait_processed(
    client: PerplexityClient, forms: list[StorageForm], names: list[str], timeout: float = PROCESSING_TIMEOUT
) -> None:
    """Step 3: wait until Perplexity says each file is read (or which one it could not read)."""
    waiting = {f.file_uuid: name for f, name in zip(forms, names, strict=True) if f.file_uuid}
    if not waiting:
        return  # no ids to wait on (an older reply shape): the ask itself waits (ASK3's progress)
    try:
        async with asyncio.timeout(timeout):
            await _processing(client, waiting)
    except TimeoutError:
        left = ", ".join(f"“{n}”" for n in waiting.values())
        raise UploadError(
            f"Perplexity did not finish reading {left} within {int(timeout)} s; nothing was asked."
        ) from None


async def _processing(client: PerplexityClient, waiting: dict[str, str]) -> None:
    headers = client._headers(
        {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            **rest_headers(client.base_url, PROCESSING_PATH, PROCESSING_REASON, client.account_id),
        }
    )
    request = client._http.build_request(
        "POST",
        client.base_url + PROCESSING_PATH,
        headers=headers,
        content=json.dumps({"file_uuids": list(waiting)}).encode(),
        timeout=httpx.Timeout(connect=10.0, read=PROCESSING_TIMEOUT, write=10.0, pool=10.0),
    )
    response = await client._send(request)
    try:
        if response.status_code >= 300 or "text/html" in response.headers.get("content-type", "").lower():
            await read_limited(response)
            _check(response)
            raise ProtocolError("Perplexity answered the file check with a web page.")
        parser = StreamParser()
        try:
            async for chunk in response.aiter_bytes():
                for event in parser.feed(chunk):
                    _processed(event.data, waiting)
                if not waiting or parser.ended:
                    break
            else:
                for event in parser.close():
                    _processed(event.data, waiting)
        except httpx.HTTPError:
            raise NetworkError("The connection to Perplexity dropped while it read the files.") from None
    finally:
        await response.aclose()
    client.remember_cookies(response)
    if waiting:
        left = ", ".join(f"“{n}”" for n in waiting.values())
        raise UploadError(f"Perplexity stopped without saying {left} could be read; nothing was asked.")


def _processed(data: dict, waiting: dict[str, str]) -> None:
    file_uuid = data.get("file_uuid")
    if not isinstance(file_uuid, str) or file_uuid not in waiting:
        return
    if data.get("success") is True:
        del waiting[file_uuid]
    elif data.get("success") is False:
        reason = data.get("error") or data.get("message") or ""
        detail = f" ({str(reason)[:200]})" if isinstance(reason, str) and reason else ""
        raise UploadError(f"Perplexity could not read “{waiting[file_uuid]}”{detail}; nothing was asked.")


async def upload(
    client: PerplexityClient,
    files: list[LocalFile],
    hosts: tuple[str, ...] = STORAGE_HOSTS,
    timeout: float = PROCESSING_TIMEOUT,
    storage_transport: httpx.AsyncBaseTransport | None = None,
) -> list[Uploaded]:
    """All four steps but the ask: each file's URL for `AskRequest.attachments`, in order."""
    if not files:
        return []
    forms = await create_forms(client, files, hosts)
    await asyncio.gather(
        *(
            send_file(form, f, hosts, client.base_url, storage_transport)
            for form, f in zip(forms, files, strict=True)
        )
    )
    await wait_processed(client, forms, [f.name for f in files], timeout)
    return [Uploaded(f.name, form.object_url, form.file_uuid) for form, f in zip(forms, files, strict=True)]
