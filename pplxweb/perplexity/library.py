"""A person's Perplexity library: listing their threads, reading each one whole, fresh asset links
(docs/protocol.md §11). No Django here: pplxweb's job (search/library/) paces the
calls and stores what they return.

Every call sends the account's id as `x-pplx-account` beside the app headers the client always
sends: without them Perplexity answers the listing with `200 []` and a thread with 403
VIEW_THREAD_NOT_ALLOWED (docs/protocol.md §11.1), so `library_account` checks the session first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import AuthError, PerplexityError, ProtocolError, ThreadGone
from pplxweb.perplexity.extract import Image, Source, extract
from pplxweb.perplexity.merge import Snapshot, merge
from pplxweb.perplexity.request import API_VERSION, rest_headers
from pplxweb.perplexity.responses import (
    check_apart,
    check_response,
    gone_code,
    json_body,
    read_body,
    read_limited,
)
from pplxweb.perplexity.values import MAX_DOCUMENT, MAX_PARSED, parsed_size

LIST_PATH = "/rest/thread/list_ask_threads"
LIST_LIMIT = 100  # threads per listing page (the server's cap is disputed, docs/protocol.md §11.2)
PAGE_LIMIT = 100  # turns per thread page; the web app asks for 10
SMALLER_PAGES = (10, 1)  # asked for instead when a page is larger than MAX_PAGE_BYTES
# one reply read whole and parsed: at most values.MAX_DOCUMENT (8 MB), and what parsing it holds at
# most values.MAX_PARSED (a hostile reply of tiny parts is refused before it is parsed)
MAX_LIST_BYTES = MAX_DOCUMENT
MAX_PAGE_BYTES = MAX_DOCUMENT
MAX_REPORT_BYTES = MAX_DOCUMENT
BLOCK_USES = (
    "answer_modes", "media_items", "knowledge_cards", "inline_entity_cards", "place_widgets",
    "finance_widgets", "sports_widgets", "shopping_widgets", "jobs_widgets", "search_result_widgets",
    "inline_images", "inline_assets", "placeholder_cards", "diff_blocks", "inline_knowledge_cards",
    "entity_group_v2", "refinement_filters", "canvas_mode", "maps_preview", "answer_tabs",
    "price_comparison_widgets", "preserve_latex", "in_context_suggestions", "pending_followups",
    "inline_claims", "unified_assets", "workflow_steps",
)  # fmt: skip
REPORT_TYPES = ("research_report", "doc_file", "pdf_file")


class TooLarge(PerplexityError):
    message = "Perplexity's reply was larger than pplxweb reads in one go."


def _json(body: bytes, limit: int) -> Any:
    if len(body) > limit:
        raise TooLarge(
            f"Perplexity's reply was larger than {limit // 1024 // 1024} MB; pplxweb stopped reading it."
        )
    if parsed_size(body) > MAX_PARSED:
        raise TooLarge(
            f"Perplexity's reply would take more than {MAX_PARSED // 1024 // 1024} MB to read "
            "(a very large number of small parts); pplxweb did not read it."
        )
    try:  # hostile bytes: text that is not UTF-8 is read with replacement characters
        return json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise ProtocolError("Perplexity's library answered with something that is not JSON.") from None


def _headers(client: PerplexityClient, path: str, reason: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        **rest_headers(client.base_url, path, reason, client.account_id),
    }


async def library_account(client: PerplexityClient) -> str:
    """Check the session and set the account id the library calls need; AuthError without one
    (an empty listing would then mean nothing, docs/protocol.md §11.1)."""
    info = await client.session_info()
    if not info.user_id:
        raise AuthError(
            "Perplexity's session names no account, so its library would look empty. Re-link in Settings."
        )
    client.account_id = info.user_id
    return info.user_id


async def list_threads(client: PerplexityClient, offset: int, limit: int = LIST_LIMIT) -> list[dict]:
    """One page of the listing (`list_ask_threads`), newest activity first."""
    body = {
        "limit": limit, "offset": offset, "ascending": False, "search_term": "", "exclude_asi": False,
        "include_assets": True, "send_last_entry": True, "thread_type_filter": None,
        "with_temporary_threads": False,
    }  # fmt: skip
    response, reply = await client.read_apart(
        "POST",
        f"{LIST_PATH}?version={API_VERSION}&source=default",
        content=json.dumps(body).encode(),
        headers=_headers(client, LIST_PATH, "threads-body"),
        limit=MAX_LIST_BYTES,
    )
    check_apart(response, reply)
    value = _json(reply, MAX_LIST_BYTES)
    if isinstance(value, dict):  # shapes some peers tolerate (docs/protocol.md §11.2)
        value = next(
            (value[k] for k in ("threads", "data", "entries") if isinstance(value.get(k), list)), None
        )
    if not isinstance(value, list):
        raise ProtocolError("Perplexity's library listing is not a list of threads.")
    return [item for item in value if isinstance(item, dict)]


@dataclass(frozen=True)
class ThreadPage:
    entries: list[dict]
    next_cursor: str
    has_next: bool
    metadata: dict = field(default_factory=dict)


async def thread_page(
    client: PerplexityClient, slug: str, cursor: str = "", limit: int = PAGE_LIMIT
) -> ThreadPage:
    """One page of (at most `limit`) turns of a thread, oldest first; the next page is by
    `next_cursor` (offset is ignored upstream, docs/protocol.md §11.4). ThreadGone when Perplexity
    refuses the thread; TooLarge when the page is (ask for fewer turns)."""
    params = [
        ("version", API_VERSION), ("source", "default"), ("with_schematized_response", "true"),
        ("with_parent_info", "true"), ("from_first", "true"), ("limit", str(limit)),
        *(("supported_block_use_cases", use) for use in BLOCK_USES),
    ]  # fmt: skip
    if cursor:
        params.append(("cursor", cursor))
    path = f"/rest/thread/{quote(slug, safe='')}"
    response, body = await client.read_apart(
        "GET",
        path,
        params=params,
        headers=_headers(client, path, "thread-body"),
        limit=MAX_PAGE_BYTES,
    )
    if response.status_code == 404 and not gone_code(response):
        raise ThreadGone("THREAD_NOT_FOUND")
    check_apart(response, body)  # ThreadGone for a deleted, expired or hidden thread
    value = _json(body, MAX_PAGE_BYTES)
    del body  # the page's bytes go before its entries are read
    if not isinstance(value, dict):
        raise ProtocolError("Perplexity's thread answer is not a thread.")
    entries = value.get("entries")
    cursor = value.get("next_cursor") or value.get("end_cursor") or ""
    metadata = value.get("thread_metadata")
    return ThreadPage(
        entries=[e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else [],
        next_cursor=cursor if isinstance(cursor, str) else "",
        has_next=bool(value.get("has_next_page", value.get("has_next"))),
        metadata=metadata if isinstance(metadata, dict) else {},
    )


async def fresh_asset_url(client: PerplexityClient, asset_uuid: str) -> str:
    """A newly signed link to an asset (`/rest/assets/<uuid>/data`, docs/protocol.md §8.2), or ""."""
    path = f"/rest/assets/{quote(asset_uuid, safe='')}/data"
    response = await client._call(
        "GET", f"{path}?version={API_VERSION}&source=default", headers=_headers(client, path, "asset-data")
    )
    if response.status_code == 404:
        return ""
    check_response(response)
    data = json_body(response).get("asset_data")
    return _asset_url(data) if isinstance(data, dict) else ""


# Perplexity's own CloudFront distribution for report and asset files: the one host the sources
# name (docs/protocol.md §8.3). Any other *.cloudfront.net host is anybody's: a CloudFront
# distribution costs nothing to make.
REPORT_HOSTS = ("d2z0o16i8xm8ak.cloudfront.net", "ppl-ai-file-upload.s3.amazonaws.com")


def report_url_allowed(url: str, base_url: str) -> bool:
    """A report is fetched only over https from Perplexity's CDN host (REPORT_HOSTS, default
    port), or from Perplexity's own address."""
    try:
        parts, home = urlsplit(url), urlsplit(base_url)
        port, home_port = parts.port, home.port
    except ValueError:
        return False
    if parts.username or parts.password:
        return False
    if parts.scheme == "https" and parts.hostname in REPORT_HOSTS and port in (None, 443):
        return True
    return (parts.scheme, parts.hostname, port) == (home.scheme, home.hostname, home_port)


async def fetch_report(client: PerplexityClient, url: str) -> str | None:
    """A report's Markdown from its signed link (no cookies go with it); None when the link was
    refused (expired: ask for a fresh one)."""
    request = client._http.build_request("GET", url, headers={"Accept": "text/markdown, text/plain, */*"})
    response = await client._send(request)
    try:  # a report's bytes apart from the response (see client.read_apart)
        body = await read_body(response, MAX_REPORT_BYTES) if response.is_success else b""
        if not response.is_success:
            await read_limited(response)
    finally:
        await response.aclose()
    if response.status_code in (401, 403, 404, 410):
        return None
    check_apart(response, body)
    return body[:MAX_REPORT_BYTES].decode("utf-8", "replace")


# --- reading what the library returns ----------------------------------------------------------


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_time(value: Any) -> datetime | None:
    """Perplexity's times: naive ISO (UTC), ISO with an offset, or microseconds since the epoch."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(value / 1_000_000 if value > 1e14 else value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Listed:
    """A thread as the listing shows it."""

    key: str  # what names it for good: context_uuid, else uuid, else slug (a slug can change)
    slug: str
    title: str
    activity: str  # last_query_datetime as given (compared as text between syncs)
    count: int | None  # query_count: its number of turns
    read_write_token: str = ""
    temporary: bool = False


def parse_listed(item: dict) -> Listed | None:
    link = _str(item.get("link"))
    slug = (
        _str(item.get("slug"))
        or (link.rstrip("/").rsplit("/", 1)[-1] if link else "")
        or _str(item.get("uuid"))
    )
    if not slug:
        return None
    count = item.get("query_count")
    return Listed(
        key=(_str(item.get("context_uuid")) or _str(item.get("uuid")) or slug)[:200],
        slug=slug[:200],
        title=(_str(item.get("title")) or _str(item.get("query_str")))[:300],
        activity=(_str(item.get("last_query_datetime")) or _str(item.get("updated_datetime")))[:40],
        count=count if isinstance(count, int) and count >= 0 else None,
        read_write_token=_str(item.get("read_write_token"))[:200],
        temporary=bool(item.get("expiry_time")),
    )


@dataclass(frozen=True)
class Turn:
    """One stored turn (question and answer) of a thread."""

    backend_uuid: str
    question: str
    answer: str
    report: str = ""
    sources: list[Source] = field(default_factory=list)
    related: list[str] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    model: str = ""
    mode: str = ""
    created: datetime | None = None
    context_uuid: str = ""
    read_write_token: str = ""
    slug: str = ""
    title: str = ""
    status: str = "completed"  # or "failed": Perplexity kept no answer
    report_asset: tuple[str, str] | None = None  # (asset uuid, its stored link) of a report file
    clarifying: tuple = ()  # a research turn's clarifying steps (research.Asked)


def parse_turn(raw: dict) -> Turn:
    """A stored entry read the way a live answer is: its blocks, or its `text`, or a bare field."""
    result = extract(merge(Snapshot(), raw))
    status = _str(raw.get("status")).upper()
    answer = result.answer
    return Turn(
        backend_uuid=(_str(raw.get("backend_uuid")) or _str(raw.get("uuid")))[:200],
        question=_str(raw.get("query_str")),
        answer=answer,
        report=_str(getattr(result, "report", "")),
        sources=result.sources,
        related=result.related,
        images=result.images,
        model=(_str(raw.get("display_model")) or _str(raw.get("user_selected_model")))[:80],
        mode=(_str(raw.get("search_mode")) or _str(raw.get("mode"))).lower()[:20],
        created=_turn_time(raw),
        context_uuid=_str(raw.get("context_uuid"))[:200],
        read_write_token=_str(raw.get("read_write_token"))[:200],
        slug=_str(raw.get("thread_url_slug"))[:200],
        title=_str(raw.get("thread_title"))[:300],
        status="failed" if status == "FAILED" or not answer.strip() else "completed",
        report_asset=_report_asset(raw),
        clarifying=result.clarifying,
    )


TURN_TIMES = (
    "entry_created_datetime",
    "created_us",
    "entry_updated_datetime",
    "updated_datetime",
    "updated_us",
)


def _turn_time(raw: dict) -> datetime | None:
    return next(filter(None, (parse_time(raw.get(key)) for key in TURN_TIMES)), None)


def _asset_url(asset: dict) -> str:
    for info in asset.get("download_info") or []:
        if isinstance(info, dict) and (_str(info.get("url")) or _str(info.get("s3_url"))):
            return _str(info.get("url")) or _str(info.get("s3_url"))
    for kind in REPORT_TYPES:
        if isinstance(asset.get(kind), dict) and _str(asset[kind].get("url")):
            return asset[kind]["url"]
    return ""


def _report_asset(raw: dict) -> tuple[str, str] | None:
    """The research report file among the turn's assets (unified_assets or plan steps)."""
    assets: list = []
    for block in raw.get("blocks") or []:
        if not isinstance(block, dict):
            continue
        unified = block.get("unified_assets_block")
        if isinstance(unified, dict) and isinstance(unified.get("assets"), list):
            assets += unified["assets"]
        plan = block.get("plan_block")
        for step in plan.get("steps") or [] if isinstance(plan, dict) else []:
            if isinstance(step, dict) and isinstance(step.get("assets"), list):
                assets += step["assets"]
    for asset in assets:
        if not isinstance(asset, dict):
            continue
        kind = _str(asset.get("asset_type")).lower()
        if kind in REPORT_TYPES or isinstance(asset.get("research_report"), dict):
            return _str(asset.get("uuid"))[:200], _asset_url(asset)
    return None
