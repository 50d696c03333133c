"""The fake's file uploads (docs/protocol.md §10), mounted by app.py:

- `POST /rest/uploads/batch_create_upload_urls` (and the older single-file
  `/rest/uploads/create_upload_url`): a storage form for each file, pointing at the fake's own
  `/_storage/` (the address pplxweb is told is Perplexity's, so it is an allowed host), with
  signed fields (`signature` is an HMAC of the key and policy);
- `POST /_storage/`: checks the signed fields, that the file comes last with the content type
  and size that were announced, and answers 204 (or S3's XML 403 as a fault);
- `POST /rest/sse/attachment_processing/subscribe`: one `{file_uuid, success}` frame per file
  (the SUBSCRIBE capture's shape), then `end_of_stream`;
- the ask records its `attachments` (`GET /_requests` shows them under `attachments_asked` in
  `/_uploads`), and a built answer with attachments gets an attachment hit in its web results,
  shaped like ASK3's (`is_attachment: true`, the object URL without its signature).

Steer it with `POST /_control` `{"uploads": {...}}`: `fault` one of FAULTS (`storage_403`,
`processing_failed`, `slow` (processing takes `pace` s, default 30), `redirect` (the storage
answers 307 to the metadata address), `never_ready` (the stream ends without the file), or a
status fault for the upload-URL call: `401`, `403` (Cloudflare), `429`), or `bucket`: the storage
URL to hand out instead of the fake's own (a `file:` or link-local address, say), or `base`:
the fake's own address when it is not `http://<Host>` (an in-process https test).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from email.parser import BytesParser
from email.policy import HTTP

SECRET = b"fake-storage-secret"
USER_ID = "12345678"
FAULTS = ("storage_403", "processing_failed", "slow", "redirect", "never_ready", "401", "403", "429")
DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Invalid according to Policy: Policy Condition failed</Message>"
    b"<RequestId>FAKE</RequestId></Error>"
)
files: dict[str, dict] = {}  # by file_uuid: {name, content_type, size, stored (bytes received)}
seen: dict[str, list] = {"asked": [], "stored": []}


def reset() -> None:
    files.clear()
    seen.update({"asked": [], "stored": []})


def sign(key: str, policy: str) -> str:
    return hmac.new(SECRET, f"{key}\n{policy}".encode(), hashlib.sha256).hexdigest()


def _plan(state: dict) -> dict:
    return dict(state.get("uploads") or {})


def _form(base: str, described: dict, bucket: str | None) -> dict:
    file_uuid = str(uuid.uuid4())
    name = str(described.get("filename") or "file").replace("/", "_")
    content_type = str(described.get("content_type") or "")
    key = f"web/direct-files/attachments/{USER_ID}/{file_uuid}/{name}"
    policy = f"fake-policy-{file_uuid}"
    files[file_uuid] = {
        "name": name,
        "content_type": content_type,
        "size": described.get("file_size"),
        "stored": 0,
    }
    base = f"{base}/_storage/"
    return {
        "s3_bucket_url": bucket or base,
        "s3_object_url": base + key,
        "fields": {
            "acl": "private",
            "Content-Type": content_type,
            "x-amz-meta-is_text_only": "true" if content_type else "false",
            "key": key,
            "AWSAccessKeyId": "FAKE-ACCESS-KEY",
            "policy": policy,
            "signature": sign(key, policy),
        },
    }


def _base(plan: dict, request) -> str:
    """The fake's own address as pplxweb knows it (`base` when it is not http://<Host>)."""
    return str(plan.get("base") or f"http://{request.headers.get('host', 'localhost')}").rstrip("/")


def routes(state: dict, respond, refuse, signed_in) -> dict:
    """The handlers, given the app's state and helpers (so this module never imports app.py)."""

    async def batch(send, request) -> None:
        plan = _plan(state)
        if not signed_in(request):
            await respond(send, 401, {"error": "unauthorized"})
        elif plan.get("fault") in ("401", "403", "429"):
            await refuse(send, plan["fault"], api=False)
        else:
            described = request.json().get("files")
            if not isinstance(described, dict) or not described:
                await respond(send, 400, {"error": "files is required"})
                return
            results = {
                k: _form(_base(plan, request), v if isinstance(v, dict) else {}, plan.get("bucket"))
                for k, v in described.items()
            }
            await respond(send, 200, {"results": results})

    async def single(send, request) -> None:
        if not signed_in(request):
            await respond(send, 401, {"error": "unauthorized"})
            return
        plan = _plan(state)
        await respond(send, 200, _form(_base(plan, request), request.json(), plan.get("bucket")))

    async def storage(send, request) -> None:
        plan = _plan(state)
        if plan.get("fault") == "redirect":
            await respond(
                send, 307, headers=[(b"location", b"http://169.254.169.254/latest/meta-data/")], raw=b""
            )
            return
        problem, file_uuid = check_form(request)
        seen["stored"].append({"file_uuid": file_uuid, "problem": problem})
        if problem or plan.get("fault") == "storage_403":
            await respond(send, 403, headers=[(b"content-type", b"application/xml")], raw=DENIED, kind=b"xml")
            return
        await respond(send, 204, headers=[], raw=b"", kind=b"")

    async def processing(send, request) -> None:
        plan = _plan(state)
        if not signed_in(request):
            await respond(send, 401, {"error": "unauthorized"})
            return
        wanted = request.json().get("file_uuids") or []
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        if plan.get("fault") == "slow":
            await asyncio.sleep(float(plan.get("pace", 30)))
        for file_uuid in wanted if plan.get("fault") != "never_ready" else []:
            known = files.get(str(file_uuid))
            ok = bool(known and known["stored"]) and plan.get("fault") != "processing_failed"
            data = {"file_uuid": file_uuid, "success": ok, "final_sse_message": False}
            if known:
                data["s3_url"] = (
                    f"http://{request.headers.get('host')}/_storage/web/direct-files/attachments/{USER_ID}/{file_uuid}/{known['name']}"
                )
            frame = f"event: message\r\ndata: {json.dumps(data)}\r\n\r\n".encode()
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"event: end_of_stream\r\ndata: {}\r\n\r\n"})

    async def uploads_seen(send, request) -> None:
        await respond(send, 200, {"files": files, **seen})

    return {
        ("POST", "/rest/uploads/batch_create_upload_urls"): batch,
        ("POST", "/rest/uploads/create_upload_url"): single,
        ("POST", "/_storage/"): storage,
        ("POST", "/rest/sse/attachment_processing/subscribe"): processing,
        ("GET", "/_uploads"): uploads_seen,
    }


def parts_of(content_type: str, body: bytes) -> list[tuple[str, str, bytes]]:
    """A multipart body's parts as (name, content type, data); split in C (bytes.split), so a
    25 MB file costs the fake little."""
    boundary = next(
        (
            p.split("=", 1)[1].strip().strip('"')
            for p in content_type.split(";")
            if p.strip().startswith("boundary=")
        ),
        "",
    )
    if not boundary:
        return []
    out = []
    for chunk in body.split(b"--" + boundary.encode())[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        headers = BytesParser(policy=HTTP).parsebytes(head + b"\r\n\r\n")
        name = headers.get_param("name", header="content-disposition") or ""
        out.append(
            (name, headers.get_content_type() if headers["content-type"] else "", data.removesuffix(b"\r\n"))
        )
    return out


def check_form(request) -> tuple[str, str]:
    """What is wrong with a storage POST ('' when nothing), and the file it was for."""
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("multipart/form-data"):
        return "not multipart", ""
    parts = parts_of(content_type, request.body)
    fields = {name: data.decode("utf-8", "replace") for name, _, data in parts if name != "file"}
    key, policy = fields.get("key", ""), fields.get("policy", "")
    file_uuid = key.split("/")[-2] if key.count("/") >= 2 else ""
    known = files.get(file_uuid)
    if known is None:
        return "unknown key", file_uuid
    if not hmac.compare_digest(fields.get("signature", ""), sign(key, policy)):
        return "bad signature", file_uuid
    if not parts or parts[-1][0] != "file":
        return "the file is not the last field", file_uuid
    _, part_type, data = parts[-1]
    if part_type != known["content_type"]:
        return f"content type {part_type} is not {known['content_type']}", file_uuid
    if len(data) != known["size"]:
        return f"{len(data)} bytes, {known['size']} announced", file_uuid
    known["stored"] = len(data)
    return "", file_uuid


def record_ask(body: dict) -> list[str]:
    """The ask's attachments, remembered; returns them."""
    attachments = (body.get("params") or {}).get("attachments") or []
    attachments = [a for a in attachments if isinstance(a, str)]
    seen["asked"].append(attachments)
    return attachments


def add_file_hits(stream: list[dict], attachments: list[str]) -> None:
    """A built answer about files: the web results list them first as attachment hits (ASK3)."""
    if not attachments:
        return
    stream[0]["attachments"] = attachments
    stream[0]["attachment_processing_progress"] = (
        [{"file_url": "start", "success": True}]
        + [{"file_url": url.split("?")[0], "success": True} for url in attachments]
        + [{"file_url": "end", "success": True}]
    )
    hits = [
        {"name": url.split("?")[0].rsplit("/", 1)[-1], "snippet": "", "timestamp": "", "url": url.split("?")[0],
         "is_attachment": True, "is_image": False, "is_widget": False, "is_navigational": False}
        for url in attachments
    ]  # fmt: skip
    for event in stream:
        for block in event.get("blocks") or []:
            if block.get("intended_usage") == "web_results":
                block["web_result_block"]["web_results"] = hits + block["web_result_block"]["web_results"]
                return
