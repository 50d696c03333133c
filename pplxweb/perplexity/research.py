"""Deep Research in a merged snapshot (docs/protocol.md §8.1, §8.4): the report, the clarifying question.

A research run's `ask_text` holds only a cover note; the report is an asset. It is read from,
in this order: the terminal `text` step list's `RESEARCH_ANSWER` step, a `unified_assets` block
(grown by whole-string replaces while the run goes on), and the `workflow_root` block's
`sources_payload` assets (when the requested block list is short).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pplxweb.perplexity.merge import Snapshot
from pplxweb.perplexity.values import MAX_TEXT, as_list, as_str, cut_text, decode

REPORT_LIMIT = MAX_TEXT  # characters kept of one report (a 13 KB report is typical)
SKIP_SECONDS_MAX = 600  # a clarifying question's countdown, at most (bad input: 10^9 seconds)
SKIP_SECONDS_DEFAULT = 60
OPTIONS_MAX = 10
QUESTIONS_MAX = 10


@dataclass(frozen=True)
class Ask:
    """One of a clarifying step's questions, with the options Perplexity offers."""

    text: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question:
    """The clarifying questions a research run asks before it goes on (docs/protocol.md §8.4): one
    step, one or more questions (a real run asked three), answered together or left to its
    countdown."""

    asks: tuple[Ask, ...]
    skip_seconds: int = SKIP_SECONDS_DEFAULT
    key: str = ""  # the step's uuid: the answer's tool_uuid
    title: str = ""

    @property
    def text(self) -> str:
        return self.asks[0].text

    @property
    def options(self) -> tuple[str, ...]:
        return self.asks[0].options


@dataclass(frozen=True)
class Asked:
    """A clarifying step as the run holds it, waiting or not: its questions and the answers the
    step carries ("" for each question without one; all "" when nobody answered)."""

    question: Question
    answers: tuple[str, ...] = ()


def is_research(top: dict) -> bool:
    """Whether the run is a Deep Research run (the first frames already say `search_mode`)."""
    extras = top.get("_extras")
    mode = extras.get("pro_search_mode") if isinstance(extras, dict) else None
    return top.get("search_mode") == "RESEARCH" or mode == "deep_research"


def report(snapshot: Snapshot, text_steps: Any) -> str:
    """The research report's Markdown ("" when there is none), at most REPORT_LIMIT characters."""
    found = _from_steps(text_steps) or _from_assets_blocks(snapshot) or _from_workflow(snapshot)
    return cut_text(found, "report")


def _content(asset: Any) -> str:
    report = asset.get("research_report") if isinstance(asset, dict) else None
    content = report.get("source_content") if isinstance(report, dict) else None
    return content if isinstance(content, str) else ""


def _best(assets: Any) -> str:
    """The primary asset's report, else the first report; of two primaries, the first with text."""
    if not isinstance(assets, list):
        return ""
    texts = [(bool(a.get("is_primary_asset")), _content(a)) for a in assets if isinstance(a, dict)]
    for primary, text in texts:
        if primary and text:
            return text
    return next((text for _, text in texts if text), "")


def _from_steps(steps: Any) -> str:
    if not isinstance(steps, list):
        return ""
    for step in reversed(steps):
        if isinstance(step, dict) and step.get("step_type") == "RESEARCH_ANSWER":
            content = step.get("content")
            found = _best(step.get("assets"))
            if not found and isinstance(content, dict):
                found = _best(content.get("assets"))
            if found:
                return found
    return ""


def _from_assets_blocks(snapshot: Snapshot) -> str:
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind == "unified_assets_block" and isinstance(block.doc, dict):
            found = _best(block.doc.get("assets"))
            if found:
                return found
    return ""


def _workflow_items(snapshot: Snapshot):
    block = snapshot.block("workflow_root")
    steps = block.doc.get("steps") if block is not None and isinstance(block.doc, dict) else None
    for step in steps if isinstance(steps, list) else []:
        items = step.get("items") if isinstance(step, dict) else None
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                yield item


def _from_workflow(snapshot: Snapshot) -> str:
    for item in _workflow_items(snapshot):
        payload = item.get("payload")
        sources = payload.get("sources_payload") if isinstance(payload, dict) else None
        found = _best(sources.get("assets")) if isinstance(sources, dict) else ""
        if found:
            return found
    return ""


# --- clarifying questions --------------------------------------------------------------------


def _step_lists(snapshot: Snapshot, text_steps: Any) -> list[list]:
    """The run's step lists: the `text` steps, then each plan block's."""
    lists: list[Any] = [as_list(decode(text_steps))]
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind == "plan_block" and isinstance(block.doc, dict):
            lists.append(as_list(block.doc.get("steps")))
    return lists


def question(snapshot: Snapshot, text_steps: Any) -> Question | None:
    """The clarifying questions the run waits on, if any: a RESEARCH_CLARIFYING_QUESTIONS step
    that is still the last of its step list (plan blocks or the `text` steps) and has no answers.
    Once the run goes on, steps follow it (an unanswered step keeps `answers: []` to the end)."""
    for steps in _step_lists(snapshot, text_steps):
        found = _question(steps[-1]) if steps else None
        if found is not None:
            return found
    return None


def clarifying(snapshot: Snapshot, text_steps: Any) -> tuple[Asked, ...]:
    """Every clarifying step of the run, waiting or not, each once (by its key), with the answers
    it carries. What answered steps hold is in no capture: `answers` is read as the answer call's
    `{question, answer}` pairs, or as plain strings in the questions' order (docs/protocol.md §8.4)."""
    found: dict[str, Asked] = {}
    for steps in _step_lists(snapshot, text_steps):
        for step in steps:
            content = _content_of(step)
            parsed = _parse(step, content) if content is not None else None
            if parsed is not None and parsed.key not in found:
                found[parsed.key] = Asked(parsed, _answers(parsed, content.get("answers")))
    return tuple(found.values())[:QUESTIONS_MAX]


def _content_of(step: Any) -> dict | None:
    if not isinstance(step, dict) or step.get("step_type") != "RESEARCH_CLARIFYING_QUESTIONS":
        return None
    content = step.get("content") or step.get("research_clarifying_questions_content")
    return content if isinstance(content, dict) else None


def _answers(question: Question, given: Any) -> tuple[str, ...]:
    by_text: dict[str, str] = {}
    in_order: list[str] = []
    for item in as_list(given)[:QUESTIONS_MAX]:
        if isinstance(item, dict):
            by_text[as_str(item.get("question")).strip()] = as_str(item.get("answer")).strip()[:2000]
        elif isinstance(item, str):
            in_order.append(item.strip()[:2000])
    return tuple(
        by_text.get(ask.text, in_order[i] if i < len(in_order) else "") for i, ask in enumerate(question.asks)
    )


def _question(step: Any) -> Question | None:
    content = _content_of(step)
    if content is None or content.get("answers"):
        return None
    return _parse(step, content)


def _parse(step: dict, content: dict) -> Question | None:
    asks = [ask for item in as_list(content.get("questions"))[:QUESTIONS_MAX] if (ask := _ask(item))]
    if not asks:
        return None
    return Question(
        asks=tuple(asks),
        skip_seconds=_seconds(content.get("auto_skip_seconds")),
        key=as_str(content.get("uuid") or step.get("uuid"))[:200],
        title=as_str(content.get("title")).strip()[:300],
    )


def _ask(item: Any) -> Ask | None:
    text = as_str(item.get("question_text")).strip() if isinstance(item, dict) else ""
    if not text:
        return None
    options = [o.strip()[:300] for o in as_list(item.get("options")) if isinstance(o, str) and o.strip()]
    return Ask(text[:2000], tuple(options[:OPTIONS_MAX]))


def _seconds(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return SKIP_SECONDS_DEFAULT
    return int(min(max(value, 0), SKIP_SECONDS_MAX))
