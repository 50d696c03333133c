"""The fake's Perplexity library (docs/protocol.md §11): `list_ask_threads` with offset paging, thread
detail paged by `next_cursor` (offset ignored, as upstream), expiring report links with a
fresh-link endpoint, the refusals (ENTRY_DELETED, ENTRY_EXPIRED, VIEW_THREAD_NOT_ALLOWED), a 429
with Retry-After, and `[]` for a listing without the account headers.

Threads are kept as small specs and turned into stored entries (REX-fixture shape) on request,
so a generated library of thousands costs little. Tests steer it with `POST /_library` (JSON):

- `{"generate": {"threads": N, "turns": T, "answer": "..."}}`: a new library of N threads of T
  turns each, newest first;
- `{"threads": [spec, ...]}`: a library of these threads; a spec has `title`, `turns` (a count
  or turn specs: `q`, `a`, `shape` one of SHAPES, `image`, `report`, `sources`), `gone` (a
  refusal code: the thread is listed, its detail refused, as when it went between the two),
  optional `slug`, `context_uuid`;
- `{"change": {"touch": [i, ...], "rename": {"i": "title"}, "delete": [i, ...], "add": N,
  "slug": {"i": "new-slug"}}}`: thread i (in the current order) gets a new turn, a new title, is
  deleted (detail answers ENTRY_DELETED, listing leaves it out), N new threads, a new slug;
- `{"faults": {...}}`: `rate_every` (every n-th library call answers 429), `retry_after`,
  `repeat` (each listing page repeats the previous page's last thread), `endless` (the listing
  never ends), `challenge` / `unauthorized` (every library call refused), `no_account` (the
  session names no account), `empty` (the listing answers `[]`), `stuck_cursor` (a thread's
  next page is always the first);
- `GET /_library`: counts of calls by kind.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fake_perplexity import gone

BASE_TIME = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
SHAPES = ("blocks", "text", "structured", "none", "nosources")
ACCOUNT = "fake-account"
lib: dict[str, Any] = {"threads": [], "faults": {}, "calls": {}, "serial": 0, "deleted": set()}


def _serial() -> int:
    lib["serial"] += 1
    return lib["serial"]


def _naive(when: datetime) -> str:
    return when.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


def _turn(spec: Any, n: int, thread_n: int, when: datetime) -> dict:
    spec = spec if isinstance(spec, dict) else {}
    return {
        "uuid": spec.get("uuid") or f"entry-{thread_n}-{n}-{_serial()}",
        "q": spec.get("q") or f"Question {n + 1} of library thread {thread_n}",
        "a": spec.get("a")
        or f"Answer {n + 1} of library thread {thread_n}: fakelibraryword{thread_n}x{n} [1].",
        "size": int(spec.get("size") or 0),
        "shape": spec.get("shape") if spec.get("shape") in SHAPES else "blocks",
        "image": bool(spec.get("image")),
        "report": spec.get("report") or "",
        "created": _naive(when),
    }


def _thread(spec: dict, n: int, when: datetime) -> dict:
    turns = spec.get("turns", 1)
    specs = turns if isinstance(turns, list) else [{}] * int(turns)
    serial = _serial()
    context = spec.get("context_uuid") or f"ctx-{n}-{serial}"
    return {
        "context_uuid": context,
        "slug": spec.get("slug") or f"library-thread-{n}-{serial}",
        "title": spec.get("title") or f"Library thread {n}",
        "token": f"rwt-{context}",
        "gone": spec.get("gone") or "",
        "turns": [_turn(t, i, n, when - timedelta(seconds=len(specs) - i)) for i, t in enumerate(specs)],
        "updated": _naive(when),
    }


def generate(count: int, turns: int) -> list[dict]:
    return [_thread({"turns": turns}, n, BASE_TIME - timedelta(minutes=n)) for n in range(count)]


def ordered() -> list[dict]:
    return sorted(lib["threads"], key=lambda t: t["updated"], reverse=True)


def change(ops: dict) -> None:
    threads = ordered()
    now = max((t["updated"] for t in threads), default=_naive(BASE_TIME))
    later = datetime.fromisoformat(now).replace(tzinfo=UTC)
    for i in ops.get("touch", []):
        later += timedelta(seconds=1)
        thread = threads[int(i)]
        thread["turns"].append(_turn({}, len(thread["turns"]), int(i), later))
        thread["updated"] = _naive(later)
    for i, title in (ops.get("rename") or {}).items():
        threads[int(i)]["title"] = title
    for i, slug in (ops.get("slug") or {}).items():
        threads[int(i)]["slug"] = slug
    for i in ops.get("delete", []):  # gone from the listing too
        threads[int(i)].update(gone="ENTRY_DELETED", unlisted=True)
    for _ in range(int(ops.get("add", 0))):
        later += timedelta(seconds=1)
        lib["threads"].append(_thread({"turns": 1}, 10_000 + _serial(), later))


def _blocks(turn: dict, host: str) -> tuple[list[dict], dict]:
    answer = turn["a"] + ("x" * turn["size"] if turn["size"] else "")
    web = [{"name": "Fake source", "url": f"https://example.org/{turn['uuid']}", "snippet": "A fake source."}]
    extra: dict = {}
    blocks: list[dict] = []
    if turn["shape"] == "blocks" or turn["shape"] == "nosources":
        blocks.append(
            {
                "intended_usage": "ask_text_0_markdown",
                "markdown_block": {
                    "progress": "DONE",
                    "chunks": [answer],
                    "chunk_starting_offset": 0,
                    "answer": answer,
                },
            }
        )
        extra["structured_answer_block_usages"] = ["ask_text_0_markdown"]
    elif turn["shape"] == "text":
        final = {"answer": json.dumps({"answer": answer, "web_results": web}), "web_results": web}
        extra["text"] = json.dumps([{"step_type": "INITIAL_QUERY"}, {"step_type": "FINAL", "content": final}])
    elif turn["shape"] == "structured":
        structured = {"structured_answer": [{"type": "markdown", "text": answer}], "web_results": web}
        extra["text"] = json.dumps([{"step_type": "FINAL", "content": {"answer": json.dumps(structured)}}])
    if turn["shape"] in ("blocks", "structured"):
        blocks.append({"intended_usage": "web_results", "web_result_block": {"web_results": web}})
    if turn["image"]:
        url = f"http://{host}/_media/{turn['uuid']}.png?X-Amz-Expires=2084"
        asset = {
            "asset_type": "GENERATED_IMAGE",
            "generated_image": {"url": url, "image_width": 4, "image_height": 4},
        }
        blocks.append({"intended_usage": "pro_search_steps", "plan_block": {"steps": [{"assets": [asset]}]}})
    if turn["report"]:
        url = f"http://{host}/_library/asset/{turn['uuid']}?expires=0"  # already expired
        report = {
            "uuid": f"asset-{turn['uuid']}",
            "asset_type": "RESEARCH_REPORT",
            "research_report": {"url": url},
        }
        blocks.append({"intended_usage": "unified_assets", "unified_assets_block": {"assets": [report]}})
    return blocks, extra


def entry(thread: dict, turn: dict, host: str) -> dict:
    blocks, extra = _blocks(turn, host)
    return {
        "backend_uuid": turn["uuid"],
        "uuid": turn["uuid"],
        "context_uuid": thread["context_uuid"],
        "thread_url_slug": thread["slug"],
        "thread_title": thread["title"],
        "query_str": turn["q"],
        "status": "COMPLETED",
        "step_type": "FINAL",
        "mode": "COPILOT",
        "search_mode": "SEARCH",
        "display_model": "pplx_pro",
        "read_write_token": thread["token"],
        "updated_datetime": turn["created"],
        "entry_updated_datetime": turn["created"] + "+00:00",
        "related_queries": [f"Related to {turn['q']}"],
        "blocks": blocks,
        **extra,
    }


def listed(thread: dict, n: int, more: bool) -> dict:
    return {
        "thread_number": n, "slug": thread["slug"], "uuid": thread["slug"],
        "context_uuid": thread["context_uuid"], "title": thread["title"],
        "query_str": thread["turns"][0]["q"] if thread["turns"] else "", "mode": "copilot",
        "last_query_datetime": thread["updated"], "display_model": "pplx_pro",
        "query_count": len(thread["turns"]), "read_write_token": thread["token"],
        "has_next_page": more, "total_threads": 99, "status": "COMPLETED", "expiry_time": None,
    }  # fmt: skip


# --- the endpoints ------------------------------------------------------------------------------


def _count(kind: str) -> None:
    lib["calls"][kind] = lib["calls"].get(kind, 0) + 1


def _refusal(request, signed_in) -> tuple[int, Any, list] | None:
    faults = lib["faults"]
    if faults.get("challenge"):
        return 403, b"<html><title>Just a moment...</title></html>", [(b"cf-mitigated", b"challenge")]
    if faults.get("unauthorized") or not signed_in(request):
        return 401, {"error": "unauthorized"}, []
    every = int(faults.get("rate_every") or 0)
    total = sum(lib["calls"].values())
    if every and total % every == 0:
        return 429, {"error": "rate limited"}, [(b"retry-after", str(faults.get("retry_after", 1)).encode())]
    return None


def _headers_ok(request) -> bool:
    headers = request.headers
    return (
        headers.get("x-pplx-account") == ACCOUNT
        and headers.get("x-app-apiclient") == "default"
        and bool(headers.get("x-app-apiversion"))
    )


def list_ask_threads(request, signed_in) -> tuple[int, Any, list]:
    _count("list")
    refused = _refusal(request, signed_in)
    if refused:
        return refused
    if lib["faults"].get("empty") or not _headers_ok(request):
        return 200, [], []
    body = request.json()
    limit = max(1, min(int(body.get("limit") or 20), 100))
    offset = max(0, int(body.get("offset") or 0))
    threads = [t for t in ordered() if not t.get("unlisted")]
    if lib["faults"].get("endless") and threads:
        page = [threads[(offset + i) % len(threads)] for i in range(limit)]
        return 200, [listed(t, offset + i, True) for i, t in enumerate(page)], []
    if lib["faults"].get("repeat") and offset:
        offset -= 1  # the previous page's last thread again
    page = threads[offset : offset + limit]
    more = offset + limit < len(threads)
    return 200, [listed(t, offset + i, more) for i, t in enumerate(page)], []


def thread_detail(request, signed_in, slug: str) -> tuple[int, Any, list]:
    _count("thread")
    refused = _refusal(request, signed_in)
    if refused:
        return refused
    if not _headers_ok(request):
        return 403, {"detail": {"error_code": "VIEW_THREAD_NOT_ALLOWED"}}, []
    thread = next((t for t in lib["threads"] if t["slug"] == slug), None)
    if thread is None:
        return 404, {"detail": "Not Found"}, []
    if thread["gone"]:
        return *gone.refusal(thread["gone"]), []
    limit = max(1, min(int(request.query.get("limit") or 10), 100))
    start = int(request.query.get("cursor", "c0")[1:] or 0)  # offset is ignored, as upstream
    if lib["faults"].get("stuck_cursor"):  # a cursor that never moves on
        turns = thread["turns"][:limit]
        body = {
            "status": "success",
            "entries": [entry(thread, t, "h") for t in turns],
            "has_next_page": True,
            "next_cursor": "c0",
        }
        return 200, body, []
    turns = thread["turns"][start : start + limit]
    more = start + limit < len(thread["turns"])
    host = request.headers.get("host", "localhost")
    return (
        200,
        {
            "status": "success",
            "entries": [entry(thread, t, host) for t in turns],
            "has_next_page": more,
            "next_cursor": f"c{start + limit}" if more else None,
            "thread_metadata": {"title": thread["title"], "mode": "1"},
        },
        [],
    )


def asset_data(request, signed_in, uuid: str) -> tuple[int, Any, list]:
    _count("asset")
    refused = _refusal(request, signed_in)
    if refused:
        return refused
    entry_uuid = uuid.removeprefix("asset-")
    if not any(t["uuid"] == entry_uuid and t["report"] for th in lib["threads"] for t in th["turns"]):
        return 404, {"error": "ASSET_NOT_FOUND"}, []
    url = f"http://{request.headers.get('host', 'localhost')}/_library/asset/{entry_uuid}?expires=1"
    return 200, {"asset_data": {"download_info": [{"url": url, "filename": "report.md"}]}}, []


def asset_file(request, uuid: str) -> tuple[int, Any, list]:
    """A report file by its signed link: an `expires=0` link has expired (403, as CloudFront)."""
    _count("file")
    if request.query.get("expires") != "1":
        return 403, b"<Error><Code>AccessDenied</Code></Error>", [(b"content-type", b"application/xml")]
    report = next((t["report"] for th in lib["threads"] for t in th["turns"] if t["uuid"] == uuid), "")
    return (200, report.encode(), [(b"content-type", b"text/markdown")]) if report else (404, {}, [])


def control(request) -> tuple[int, Any, list]:
    data = request.json()
    if "generate" in data:
        spec = data["generate"]
        lib.update(threads=generate(int(spec.get("threads", 10)), int(spec.get("turns", 5))), calls={})
    if "threads" in data:
        base = BASE_TIME
        lib.update(
            threads=[_thread(s, n, base - timedelta(minutes=n)) for n, s in enumerate(data["threads"])]
        )
        lib["calls"] = {}
    if "change" in data:
        change(data["change"])
    if "faults" in data:
        lib["faults"] = dict(data["faults"] or {})
    return 200, {"ok": True, "threads": len(lib["threads"])}, []


def followup_refusal(request) -> tuple[int, Any, list] | None:
    """A follow-up in a thread that is gone here (named by its token or one of its turns) is
    refused as the thread's detail is (gone.refusal; docs/protocol.md §12.4)."""
    try:
        params = json.loads(request.body or b"{}").get("params") or {}
    except (ValueError, AttributeError):
        return None
    if not isinstance(params, dict) or not params.get("last_backend_uuid"):
        return None
    last, token = params["last_backend_uuid"], params.get("read_write_token")
    for thread in lib["threads"]:
        if thread["gone"] and (token == thread["token"] or any(t["uuid"] == last for t in thread["turns"])):
            return *gone.refusal(thread["gone"]), []
    return None


def thread_of(uuid: Any) -> dict | None:
    """The ids of the library thread with turn `uuid` (a follow-up continues it), else None."""
    for thread in lib["threads"]:
        if any(t["uuid"] == uuid for t in thread["turns"]):
            ids = (thread["context_uuid"], thread["token"], thread["slug"])
            return {
                **dict(zip(("context_uuid", "read_write_token", "thread_url_slug"), ids, strict=True)),
                "expires": None,
            }
    return None


def route(request, signed_in) -> tuple[int, Any, list] | None:
    """The reply to a library request, or None for a path that is not the library's."""
    method, path = request.method, request.path
    if path == "/_library":
        return (
            control(request)
            if method == "POST"
            else (200, {"calls": lib["calls"], "threads": len(lib["threads"])}, [])
        )
    if method == "POST" and path == "/rest/thread/list_ask_threads":
        return list_ask_threads(request, signed_in)
    if method == "GET" and path.startswith("/_library/asset/"):
        return asset_file(request, path.rsplit("/", 1)[-1])
    if method == "GET" and path.startswith("/rest/assets/") and path.endswith("/data"):
        return asset_data(request, signed_in, path.split("/")[3])
    if method == "GET" and path.startswith("/rest/thread/") and path.count("/") == 3:
        return thread_detail(request, signed_in, path.rsplit("/", 1)[-1])
    if method == "POST" and path == "/rest/sse/perplexity_ask":
        return followup_refusal(request)
    if (
        method == "GET"
        and path == "/api/auth/session"
        and lib["faults"].get("no_account")
        and signed_in(request)
    ):
        return 200, {"user": {"email": "fake@example.com"}, "expires": "2027-06-30T00:00:00Z"}, []
    return None


async def serve(send, request, signed_in) -> bool:
    """Answer a library request (True), or leave it to the rest of the fake (False)."""
    handled = route(request, signed_in)
    if handled is None:
        return False
    status, payload, headers = handled
    if not isinstance(payload, bytes):
        payload, headers = json.dumps(payload).encode(), [(b"content-type", b"application/json"), *headers]
    elif not any(name == b"content-type" for name, _ in headers):
        headers = [(b"content-type", b"text/html"), *headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
    return True
