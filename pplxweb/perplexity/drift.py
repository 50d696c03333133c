"""What a stream carried that pplxweb does not know (docs/protocol.md §14: the format moves monthly).

`unknown(snapshot)` lists the block usages, block kinds, step types and top-level fields of a
merged snapshot that are not in the tables below. A run logs each new kind once per process and
counts them on its entry; `manage.py doctor --capture` prints them for a saved stream.
"""

from __future__ import annotations

import re
from typing import Any

from pplxweb.perplexity.merge import Snapshot
from pplxweb.perplexity.request import SUPPORTED_BLOCKS
from pplxweb.perplexity.values import as_list, decode

KNOWN_USAGES = {
    *SUPPORTED_BLOCKS, "ask_text", "web_results", "pro_search_steps", "plan", "workflow_root",
    "answer_tabs", "pending_followups", "sources_answer_mode", "assets_answer_mode", "canvas_mode",
    "unified_assets", "answer_assets_preview", "image_answer_mode", "video_answer_mode",
    "api_citations", "markdown_block",
}  # fmt: skip
KNOWN_USAGE_PATTERNS = (re.compile(r"^ask_text_\d+_markdown$"),)
KNOWN_KINDS = {
    "markdown_block", "web_result_block", "plan_block", "workflow_block", "sources_mode_block",
    "assets_mode_block", "unified_assets_block", "answer_tabs_block", "pending_followups_block",
    "canvas_block", "image_mode_block", "video_mode_block", "media_block", "diff_block",
}  # fmt: skip
KNOWN_STEPS = {
    "INITIAL_QUERY", "SEARCH_WEB", "SEARCH_RESULTS", "URL_NAVIGATE", "GET_URL_CONTENT", "CODE",
    "LOAD_SKILL", "LOAD_SKILL_RESPONSE", "THOUGHT", "RESEARCH_ANSWER", "GENERATE_IMAGE",
    "GENERATE_IMAGE_RESULTS", "FINAL", "RESEARCH_CLARIFYING_QUESTIONS", "SEARCH_IMAGES", "SEARCH_VIDEOS",
}  # fmt: skip
KNOWN_FIELDS = {
    "_extras", "access_level", "answer_modes", "async_rq_enabled", "attachment_processing_progress",
    "attachments", "backend_uuid", "blocks", "bookmark_state", "classifier_results", "context_uuid",
    "cursor", "display_model", "entry_created_datetime", "entry_updated_datetime", "error_code",
    "error_message", "expect_search_results", "expiry_time", "final", "final_sse_message",
    "frontend_context_uuid", "frontend_uuid", "gpt4", "image_completions", "media_items",
    "message_mode", "mode", "personalized", "plan", "privacy_state", "prompt_source", "query_language",
    "query_source", "query_str", "read_write_token", "reconnectable", "related_queries",
    "related_query_items", "search_focus", "search_implementation_mode", "search_mode", "source",
    "sources", "sources_list", "status", "step_type", "structured_answer_block_usages",
    "telemetry_data", "text", "text_completed", "thread_access", "thread_title", "thread_url_slug",
    "updated_datetime", "user_selected_model", "uuid", "widget_data", "answer", "markdown_block",
    "ask_text", "locked_reason", "is_pro_reasoning_mode", "rum_session_id", "web_results", "author_id",
    "author_username", "author_image", "s3_social_preview_url", "collection_info", "featured_images",
    "chunks", "blocks_version",
}  # fmt: skip
LIMIT = 20  # names kept per kind (a hostile stream could carry thousands)


def unknown(snapshot: Snapshot) -> dict[str, list[str]]:
    """{"usages": [...], "kinds": [...], "steps": [...], "fields": [...]}, only non-empty lists."""
    usages = [
        u
        for u in snapshot.block_order
        if u not in KNOWN_USAGES and not any(p.match(u) for p in KNOWN_USAGE_PATTERNS)
    ]
    kinds = {block.kind for block in snapshot.blocks.values()} - KNOWN_KINDS
    steps = {s for s in _step_types(snapshot) if s not in KNOWN_STEPS}
    fields = [f for f in snapshot.top if f not in KNOWN_FIELDS]
    found = {"usages": usages, "kinds": sorted(kinds), "steps": sorted(steps), "fields": sorted(fields)}
    return {kind: [name[:80] for name in names[:LIMIT]] for kind, names in found.items() if names}


def _step_types(snapshot: Snapshot) -> set[str]:
    found: set[str] = set()
    candidates: list[Any] = list(as_list(decode(snapshot.top.get("text"))))
    for block in snapshot.blocks.values():
        if block.kind == "plan_block" and isinstance(block.doc, dict):
            candidates += as_list(block.doc.get("steps"))
    for step in candidates:
        kind = step.get("step_type") if isinstance(step, dict) else None
        if isinstance(kind, str):
            found.add(kind)
    return found
