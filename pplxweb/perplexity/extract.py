"""What a person sees, read out of a merged snapshot (docs/protocol.md §5.4, §6)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pplxweb.perplexity.merge import Snapshot
from pplxweb.perplexity.progress import Image, Step, images, steps
from pplxweb.perplexity.research import Asked, Question, clarifying, is_research, question, report
from pplxweb.perplexity.sources import Source, sources
from pplxweb.perplexity.values import as_list, as_str, cut_text, decode

__all__ = ["Image", "Result", "Source", "Step", "extract", "has_answer", "processing_error", "text_complete"]

SECTION = re.compile(r"^ask_text_(\d+)_markdown$")
ANONYMOUS_MODEL = "turbo"
ANSWER_USAGES = re.compile(r"^ask_text(_\d+_markdown)?$")
PROCESSING_ERROR = (
    "Perplexity could not process this question (it said: {}). Try again, or ask it another way."
)


@dataclass(frozen=True)
class Result:
    status: str  # "running", "completed", "truncated" or "failed"
    answer: str = ""  # for a Deep Research run, its cover note
    report: str = ""  # a Deep Research run's report (Markdown), "" when there is none
    question: Question | None = None  # a clarifying question the run waits on
    clarifying: tuple[Asked, ...] = ()  # every clarifying step of a research run, waiting or not
    research: bool = False
    sources: list[Source] = field(default_factory=list)
    related: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    model_asked: str = ""
    model: str = ""
    # `turbo` answered a request for another model without the account's tier: the session is
    # suspect (docs/protocol.md §6.7); only /api/auth/session can confirm it
    downgraded: bool = False
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
    text_steps = decode(top.get("text"))
    final = _final_answer(text_steps)
    selected = as_str(top.get("user_selected_model"))
    asked = asked or selected
    model = as_str(top.get("display_model")) or selected
    status, error, code = _status(snapshot, ended)
    research = is_research(top)
    return Result(
        status=status,
        answer="" if processing_error(snapshot) else cut_text(_answer(snapshot, final, research)),
        report=report(snapshot, text_steps),
        question=question(snapshot, text_steps) if research and status == "running" else None,
        clarifying=clarifying(snapshot, text_steps) if research else (),
        research=research,
        sources=sources(snapshot, final),
        related=_related(top),
        steps=steps(snapshot, text_steps),
        images=images(snapshot),
        model_asked=asked,
        model=model,
        downgraded=_downgraded(top, asked, selected or model),
        backend_uuid=as_str(top.get("backend_uuid")),
        read_write_token=as_str(top.get("read_write_token")),
        thread_url_slug=as_str(top.get("thread_url_slug")),
        context_uuid=as_str(top.get("context_uuid")),
        error=error,
        error_code=code,
    )


def _downgraded(top: dict, asked: str, answered: str) -> bool:
    """docs/protocol.md §6.7: `turbo` answering `turbo` is quick mode; `turbo` answering a request for
    another model is suspect, unless the frame names the account's tier (an anonymous answer
    has none)."""
    if not asked or asked == ANONYMOUS_MODEL or answered != ANONYMOUS_MODEL:
        return False
    extras = top.get("_extras")
    tier = extras.get("subscription_tier") if isinstance(extras, dict) else None
    return not (isinstance(tier, str) and tier and tier.lower() not in ("free", "anonymous", "none"))


# --- status ---------------------------------------------------------------------------------


def processing_error(snapshot: Snapshot) -> str:
    """The text of a bare error frame (docs/protocol.md §5.4: `{"text": "Error in processing query."}`
    with no status and no blocks), or "" when the stream is not one."""
    top = snapshot.top
    if snapshot.blocks or "status" in top or snapshot.completed:
        return ""
    text = top.get("text")
    if not isinstance(text, str) or not text.strip() or text.strip()[0] in "[{":
        return ""
    return text.strip()[:200]


def _status(snapshot: Snapshot, ended: bool) -> tuple[str, str | None, str]:
    top = snapshot.top
    frame_error = processing_error(snapshot)
    if frame_error and ended:
        return "failed", PROCESSING_ERROR.format(frame_error.rstrip(".")), "PROCESSING_ERROR"
    if snapshot.failed:
        code = as_str(top.get("error_code"))
        return "failed", failure_message(code, as_str(top.get("error_message"))), code
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
    return bool(_answer(snapshot, None, is_research(snapshot.top)))


def text_complete(snapshot: Snapshot) -> bool:
    """Whether Perplexity said the answer's text is all there (docs/protocol.md §5.2: the PENDING
    `final` "trap" event carries the last diff and `text_completed`; COMPLETED may come later)."""
    top = snapshot.top
    return top.get("text_completed") is True or top.get("final") is True or snapshot.completed


def _answer(snapshot: Snapshot, final: dict | None, research: bool) -> str:
    """The answer's Markdown. The workflow's text is the answer only when no `ask_text` block
    exists and the run is not a research run (docs/protocol.md §6.3: there it holds progress notes)."""
    workflow = not research and not any(ANSWER_USAGES.match(u) for u in snapshot.block_order)
    usages = snapshot.top.get("structured_answer_block_usages")
    if isinstance(usages, list):
        texts = [t for t in (_usage_text(snapshot, u, workflow) for u in usages if isinstance(u, str)) if t]
        if texts:
            return "\n\n".join(texts)
    text = _markdown_usages(snapshot)
    if text:
        return text
    if final and final.get("answer"):
        return final["answer"]
    return "" if research else _legacy(snapshot.top)


def _usage_text(snapshot: Snapshot, usage: str, workflow: bool) -> str:
    block = snapshot.block(usage)
    if block is None:
        return ""
    if block.kind == "workflow_block":
        return _workflow_text(block.doc) if workflow else ""
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
            variant = item.get("variant") or text_payload.get("variant")
            if variant and variant != "answer":  # step summaries ("Insights"), page extracts
                continue
            text = as_str(text_payload.get("text"))
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


def _final_answer(steps: Any) -> dict | None:
    """The FINAL step's answer from the `text` field (decoded): {"answer": markdown,
    "web_results": [...]}."""
    if isinstance(steps, dict):
        steps = [{"step_type": "FINAL", "content": {"answer": steps}}]
    if not isinstance(steps, list):
        return None
    for step in reversed(steps):
        if not isinstance(step, dict) or step.get("step_type") != "FINAL":
            continue
        content = step.get("content")
        answer = decode(content.get("answer")) if isinstance(content, dict) else None
        if isinstance(answer, str):
            return {"answer": answer, "web_results": []}
        if not isinstance(answer, dict):
            return None
        return {"answer": _final_text(answer), "web_results": answer.get("web_results") or []}
    return None


def _final_text(answer: dict) -> str:
    structured = answer.get("structured_answer")
    if isinstance(structured, list) and structured and isinstance(structured[0], dict):
        text = as_str(structured[0].get("text"))
        if text:
            return text
    if as_str(answer.get("answer")):
        return answer["answer"]
    chunks = answer.get("chunks")
    return "".join(c for c in chunks if isinstance(c, str)) if isinstance(chunks, list) else ""


def _legacy(top: dict) -> str:
    for key in ("answer", "markdown_block", "ask_text"):
        if as_str(top.get(key)):
            return top[key]
    text = decode(top.get("text"))
    return text if isinstance(text, str) else ""


# --- sources, related questions, progress ----------------------------------------------------


def _related(top: dict) -> list[str]:
    """Related questions. `related_query_items`, when present, decides (docs/protocol.md §6.5): only
    its DEFAULT items are questions; UPSELL items (and the junk `related_queries` then carries
    at their places) are not."""
    items = [item for item in as_list(top.get("related_query_items")) if isinstance(item, dict)]
    if items:
        related = [
            as_str(item.get("text")).strip()
            for item in items
            if item.get("type", "DEFAULT") == "DEFAULT" and as_str(item.get("text")).strip()
        ]
    else:
        related = [q.strip() for q in as_list(top.get("related_queries")) if isinstance(q, str) and q.strip()]
    return list(dict.fromkeys(q[:500] for q in related))
