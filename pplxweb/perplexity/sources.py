"""Sources in a merged snapshot (docs/protocol.md §6.4): web results, deduplicated, in the answer's order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pplxweb.perplexity.merge import Snapshot
from pplxweb.perplexity.values import as_list, as_str

NON_WEB_FLAGS = (
    "is_navigational", "is_widget", "is_knowledge_card", "is_image", "is_video", "is_audio",
    "is_map", "is_memory", "is_conversation_history", "is_conversation", "is_attachment",
    "is_extra_info", "is_pro_search_table",
)  # fmt: skip


@dataclass(frozen=True)
class Source:
    title: str
    url: str
    snippet: str = ""
    date: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet, "date": self.date}


def _normal_url(url: str) -> str:
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, ""))


def web_result(item: Any) -> Source | None:
    if not isinstance(item, dict) or any(item.get(flag) for flag in NON_WEB_FLAGS):
        return None
    url = as_str(item.get("url")).strip()
    if not url:
        return None
    title = as_str(item.get("name")) or as_str(item.get("title")) or url
    return Source(
        title=title.strip(),
        url=url,
        snippet=as_str(item.get("snippet")).strip(),
        date=as_str(item.get("timestamp")) or as_str(item.get("date")),
    )


def sources(snapshot: Snapshot, final: dict | None) -> list[Source]:
    """The sources in the order the answer's citation numbers count them: the terminal FINAL
    step's web results when there are any (docs/protocol.md §6.4, §7.5), then the blocks' in their order."""
    candidates: list[Any] = list(as_list(final.get("web_results"))) if final else []
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind == "web_result_block" and isinstance(block.doc, dict):
            candidates += as_list(block.doc.get("web_results"))
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind == "sources_mode_block" and isinstance(block.doc, dict):
            candidates += as_list(block.doc.get("web_results"))
            candidates += [r.get("web_result") for r in as_list(block.doc.get("rows")) if isinstance(r, dict)]
    candidates += as_list(snapshot.top.get("sources_list"))
    seen: set[str] = set()
    sources = []
    for item in candidates:
        source = web_result(item)
        if source is None:
            continue
        key = _normal_url(source.url)
        if key not in seen:
            seen.add(key)
            sources.append(source)
    return sources


def file_hits(snapshot: Snapshot) -> list[str]:
    """The URLs of the asker's own files the answer drew on (`is_attachment` results, ASK3):
    never web sources, so kept apart (the page lists them as "your file")."""
    urls: list[str] = []
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind == "web_result_block" and isinstance(block.doc, dict):
            for item in as_list(block.doc.get("web_results")):
                url = as_str(item.get("url")).strip() if isinstance(item, dict) else ""
                if url and item.get("is_attachment") and url not in urls:
                    urls.append(url)
    return urls
