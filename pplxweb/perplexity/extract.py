"""What a person sees, read out of a merged snapshot (protocol.md 3.6-3.12)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pplxweb.perplexity.merge import Snapshot

NON_WEB_FLAGS = (
    "is_navigational", "is_widget", "is_knowledge_card", "is_image", "is_video", "is_audio",
    "is_map", "is_memory", "is_conversation_history", "is_conversation", "is_attachment",
    "is_extra_info", "is_pro_search_table",
)  # fmt: skip
SECTION = re.compile(r"^ask_text_(\d+)_markdown$")
ANONYMOUS_MODEL = "turbo"


@dataclass(frozen=True)
class Source:
    title: str
    url: str
    snippet: str = ""
    date: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet, "date": self.date}


@dataclass(frozen=True)
class Step:
    kind: str  # "goal", "search", "read", "image" or "step"
    text: str


@dataclass(frozen=True)
class Image:
    """An image Perplexity generated for the answer (its URL expires in about 35 minutes)."""

    url: str
    caption: str = ""
    width: int = 0
    height: int = 0

    @property
    def key(self) -> str:
        """The image itself: its URL comes with a fresh signature in the query on each event."""
        return self.url.split("?", 1)[0]


@dataclass(frozen=True)
class Result:
    status: str  # "running", "completed", "truncated" or "failed"
    answer: str = ""
    sources: list[Source] = field(default_factory=list)
    related: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    model_asked: str = ""
    model: str = ""
    downgraded: bool = False  # `turbo` answered a request for another model: the session is suspect
    backend_uuid: str = ""
    read_write_token: str = ""
    thread_url_slug: str = ""
    context_uuid: str = ""
    error: str | None = None
    error_code: str = ""

    @property
    def no_results(self) -> bool:
        return not self.answer.strip() and not self.sources


def extract(snapshot: Snapshot, *, ended: bool = False, asked: str = "") -> Result:
    """The result so far. With ended=True a stream without COMPLETED is `truncated`."""
    top = snapshot.top
    final = _final_answer(top.get("text"))
    asked = asked or _str(top.get("user_selected_model"))
    model = _str(top.get("display_model")) or _str(top.get("user_selected_model"))
    status, error, code = _status(snapshot, ended)
    return Result(
        status=status,
        answer=_answer(snapshot, final),
        sources=_sources(snapshot, final),
        related=_related(top),
        steps=_steps(snapshot),
        images=_images(snapshot),
        model_asked=asked,
        model=model,
        downgraded=bool(asked)
        and asked != ANONYMOUS_MODEL
        and ANONYMOUS_MODEL in (_str(top.get("display_model")), _str(top.get("user_selected_model"))),
        backend_uuid=_str(top.get("backend_uuid")),
        read_write_token=_str(top.get("read_write_token")),
        thread_url_slug=_str(top.get("thread_url_slug")),
        context_uuid=_str(top.get("context_uuid")),
        error=error,
        error_code=code,
    )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# --- status ---------------------------------------------------------------------------------


def _status(snapshot: Snapshot, ended: bool) -> tuple[str, str | None, str]:
    top = snapshot.top
    if snapshot.failed:
        code = _str(top.get("error_code"))
        return "failed", failure_message(code, _str(top.get("error_message"))), code
    if snapshot.completed:
        return "completed", None, ""
    if ended:
        return (
            "truncated",
            "The answer stopped before Perplexity finished it. Retry to get the rest.",
            "",
        )
    return "running", None, ""


def failure_message(code: str, message: str) -> str:
    if code == "FREE_TIER_RATE_LIMITED":
        return "Perplexity's rate limit: try again in a minute (the free tier's limit was reached)."
    if message:
        return f"Perplexity could not answer: {message[:300]}"
    if code:
        return f"Perplexity could not answer this question ({code[:80]})."
    return "Perplexity could not answer this question."


# --- the answer -----------------------------------------------------------------------------


def has_answer(snapshot: Snapshot) -> bool:
    """Whether answer text has begun (cheap: the answer's blocks only, no steps or sources)."""
    return bool(_answer(snapshot, None))


def text_complete(snapshot: Snapshot) -> bool:
    """Whether Perplexity said the answer's text is all there (protocol.md 3.2: the PENDING
    `final` "trap" event carries the last diff and `text_completed`; COMPLETED may come later)."""
    top = snapshot.top
    return top.get("text_completed") is True or top.get("final") is True or snapshot.completed


def _answer(snapshot: Snapshot, final: dict | None) -> str:
    usages = snapshot.top.get("structured_answer_block_usages")
    if isinstance(usages, list):
        texts = [t for t in (_usage_text(snapshot, u) for u in usages if isinstance(u, str)) if t]
        if texts:
            return "\n\n".join(texts)
    text = _markdown_usages(snapshot)
    if text:
        return text
    if final and final.get("answer"):
        return final["answer"]
    return _legacy(snapshot.top)


def _usage_text(snapshot: Snapshot, usage: str) -> str:
    block = snapshot.block(usage)
    if block is None:
        return ""
    if block.kind == "workflow_block":
        return _workflow_text(block.doc)
    if block.kind == "markdown_block":
        return snapshot.markdown(usage) or ""
    return ""


def _workflow_text(doc: Any) -> str:
    texts = []
    steps = doc.get("steps") if isinstance(doc, dict) else None
    for step in steps if isinstance(steps, list) else []:
        items = step.get("items") if isinstance(step, dict) else None
        for item in items if isinstance(items, list) else []:
            payload = item.get("payload") if isinstance(item, dict) else None
            text_payload = payload.get("text_payload") if isinstance(payload, dict) else None
            if not isinstance(text_payload, dict):
                continue
            text = _str(text_payload.get("text"))
            chunks = text_payload.get("chunks")
            joined = "".join(c for c in chunks if isinstance(c, str)) if isinstance(chunks, list) else ""
            best = joined if len(joined) > len(text) else text  # chunks can run ahead of `text`
            if best:
                texts.append(best)
    return "\n\n".join(texts)


def _markdown_usages(snapshot: Snapshot) -> str:
    """ONE of ask_text / ask_text_0_markdown (they carry the same text), or research sections."""
    sections = sorted(
        (int(m.group(1)), usage) for usage in snapshot.block_order if (m := SECTION.match(usage))
    )
    if len(sections) > 1:
        return "\n\n".join(t for _, u in sections if (t := snapshot.markdown(u)))
    for usage in ("ask_text", *(u for _, u in sections)):
        text = snapshot.markdown(usage)
        if text:
            return text
    for usage in snapshot.block_order:  # legacy usage names that merely contain "markdown"
        if "markdown" in usage and not SECTION.match(usage):
            text = snapshot.markdown(usage)
            if text:
                return text
    return ""


def _decode(value: Any) -> Any:
    """JSON that may be encoded more than once; a string that is not JSON stays a string."""
    for _ in range(3):
        if not isinstance(value, str):
            return value
        stripped = value.strip()
        if not stripped or stripped[0] not in '[{"':
            return value
        try:
            value = json.loads(stripped)
        except ValueError:
            return value
    return value


def _final_answer(text: Any) -> dict | None:
    """The FINAL step's answer from the `text` field: {"answer": markdown, "web_results": [...]}."""
    steps = _decode(text)
    if isinstance(steps, dict):
        steps = [{"step_type": "FINAL", "content": {"answer": steps}}]
    if not isinstance(steps, list):
        return None
    for step in reversed(steps):
        if not isinstance(step, dict) or step.get("step_type") != "FINAL":
            continue
        content = step.get("content")
        answer = _decode(content.get("answer")) if isinstance(content, dict) else None
        if isinstance(answer, str):
            return {"answer": answer, "web_results": []}
        if not isinstance(answer, dict):
            return None
        return {"answer": _final_text(answer), "web_results": answer.get("web_results") or []}
    return None


def _final_text(answer: dict) -> str:
    structured = answer.get("structured_answer")
    if isinstance(structured, list) and structured and isinstance(structured[0], dict):
        text = _str(structured[0].get("text"))
        if text:
            return text
    if _str(answer.get("answer")):
        return answer["answer"]
    chunks = answer.get("chunks")
    return "".join(c for c in chunks if isinstance(c, str)) if isinstance(chunks, list) else ""


def _legacy(top: dict) -> str:
    for key in ("answer", "markdown_block", "ask_text"):
        if _str(top.get(key)):
            return top[key]
    text = _decode(top.get("text"))
    return text if isinstance(text, str) else ""


# --- sources, related questions, progress ----------------------------------------------------


def _normal_url(url: str) -> str:
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, ""))


def _web_result(item: Any) -> Source | None:
    if not isinstance(item, dict) or any(item.get(flag) for flag in NON_WEB_FLAGS):
        return None
    url = _str(item.get("url")).strip()
    if not url:
        return None
    title = _str(item.get("name")) or _str(item.get("title")) or url
    return Source(
        title=title.strip(),
        url=url,
        snippet=_str(item.get("snippet")).strip(),
        date=_str(item.get("timestamp")) or _str(item.get("date")),
    )


def _sources(snapshot: Snapshot, final: dict | None) -> list[Source]:
    candidates: list[Any] = []
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind == "web_result_block" and isinstance(block.doc, dict):
            candidates += _list(block.doc.get("web_results"))
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind == "sources_mode_block" and isinstance(block.doc, dict):
            candidates += _list(block.doc.get("web_results"))
            candidates += [r.get("web_result") for r in _list(block.doc.get("rows")) if isinstance(r, dict)]
    if final:
        candidates += _list(final.get("web_results"))
    candidates += _list(snapshot.top.get("sources_list"))
    seen: set[str] = set()
    sources = []
    for item in candidates:
        source = _web_result(item)
        if source is None:
            continue
        key = _normal_url(source.url)
        if key not in seen:
            seen.add(key)
            sources.append(source)
    return sources


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _related(top: dict) -> list[str]:
    related = [q.strip() for q in _list(top.get("related_queries")) if isinstance(q, str) and q.strip()]
    if not related:
        related = [
            _str(item.get("text")).strip()
            for item in _list(top.get("related_query_items"))
            if isinstance(item, dict) and _str(item.get("text")).strip()
        ]
    return list(dict.fromkeys(related))


def _steps(snapshot: Snapshot) -> list[Step]:
    steps: list[Step] = []
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind != "plan_block" or not isinstance(block.doc, dict):
            continue
        for goal in _list(block.doc.get("goals")):
            if isinstance(goal, dict) and _str(goal.get("description")):
                steps.append(Step("goal", goal["description"]))
        for step in _list(block.doc.get("steps")):
            steps += _step(step)
    text_steps = _decode(snapshot.top.get("text"))
    if isinstance(text_steps, list):
        for step in text_steps:
            if isinstance(step, dict):
                steps += _step({**step, "content_any": step.get("content")})
    return list(dict.fromkeys(steps))


def _step(step: Any) -> list[Step]:
    if not isinstance(step, dict):
        return []
    kind = _str(step.get("step_type"))
    content = step.get("content_any") or step.get(f"{kind.lower()}_content") or {}
    if not isinstance(content, dict):
        return []
    if kind == "SEARCH_WEB":
        return [
            Step("search", q["query"])
            for q in _list(content.get("queries"))
            if isinstance(q, dict) and _str(q.get("query"))
        ]
    if kind == "SEARCH_RESULTS":
        results = [_web_result(r) for r in _list(content.get("web_results"))]
        return [Step("read", s.title) for s in results if s is not None]
    if kind == "URL_NAVIGATE" and _str(content.get("url")):
        return [Step("read", content["url"])]
    if kind == "GENERATE_IMAGE":
        text = _str(content.get("caption")) or _str(content.get("prompt"))
        return [Step("image", text)] if text else []
    return []


def _size(value: Any) -> int:
    return value if isinstance(value, int) and 0 < value < 100_000 else 0


def _images(snapshot: Snapshot) -> list[Image]:
    """Generated images (protocol.md 3.9): the steps' GENERATED_IMAGE assets, the image-results
    steps, then top-level `media_items` that carry `generated_media_metadata`; one per image
    (the same image comes with fresh signatures in the query string)."""
    found: dict[str, Image] = {}
    caption = ""

    def add(url: Any, name: Any, width: Any, height: Any) -> None:
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            return
        image = Image(url, _str(name).strip()[:300], _size(width), _size(height))
        if image.key not in found:
            found[image.key] = image
        elif image.caption and not found[image.key].caption:
            known = found[image.key]
            found[image.key] = Image(known.url, image.caption, known.width, known.height)

    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind != "plan_block" or not isinstance(block.doc, dict):
            continue
        for step in _list(block.doc.get("steps")):
            if not isinstance(step, dict):
                continue
            content = step.get("generate_image_content")
            if isinstance(content, dict) and not caption:
                caption = (_str(content.get("caption")) or _str(content.get("prompt"))).strip()[:300]
            for asset in _list(step.get("assets")):
                if not isinstance(asset, dict) or asset.get("asset_type") != "GENERATED_IMAGE":
                    continue
                image = asset.get("generated_image")
                if isinstance(image, dict):
                    info = _list(asset.get("download_info"))
                    name = info[0].get("filename") if info and isinstance(info[0], dict) else ""
                    add(image.get("url"), name, image.get("image_width"), image.get("image_height"))
            results = step.get("generate_image_results_content")
            for image in _list(results.get("image_results") if isinstance(results, dict) else None):
                if isinstance(image, dict):
                    add(image.get("url"), "", image.get("image_width"), image.get("image_height"))
    for item in _list(snapshot.top.get("media_items")):
        if isinstance(item, dict) and item.get("medium") == "image" and item.get("generated_media_metadata"):
            add(item.get("image"), item.get("name"), item.get("image_width"), item.get("image_height"))
    return [
        image if image.caption else Image(image.url, caption, image.width, image.height)
        for image in found.values()
    ]
