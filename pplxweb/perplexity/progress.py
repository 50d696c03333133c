"""Progress in a merged snapshot (docs/protocol.md §6.6): steps, a research run's notes, and the
images Perplexity generated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pplxweb.perplexity.merge import Snapshot
from pplxweb.perplexity.research import is_research
from pplxweb.perplexity.sources import web_result
from pplxweb.perplexity.values import as_list, as_str

NOTE_LIMIT = 1000  # characters of one progress note


@dataclass(frozen=True)
class Step:
    kind: str  # "goal", "search", "read", "image", "note" (a research run's notes) or "step"
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


def steps(snapshot: Snapshot, text_steps: Any) -> list[Step]:
    steps: list[Step] = []
    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind != "plan_block" or not isinstance(block.doc, dict):
            continue
        for goal in as_list(block.doc.get("goals")):
            if isinstance(goal, dict) and as_str(goal.get("description")):
                steps.append(Step("goal", goal["description"]))
        for step in as_list(block.doc.get("steps")):
            steps += _step(step)
    if isinstance(text_steps, list):
        for step in text_steps:
            if isinstance(step, dict):
                steps += _step({**step, "content_any": step.get("content")})
    steps += _workflow_notes(snapshot)
    return list(dict.fromkeys(steps))


def _step(step: Any) -> list[Step]:
    if not isinstance(step, dict):
        return []
    kind = as_str(step.get("step_type"))
    content = step.get("content_any") or step.get(f"{kind.lower()}_content") or {}
    if not isinstance(content, dict):
        return []
    if kind == "SEARCH_WEB":
        return [
            Step("search", q["query"])
            for q in as_list(content.get("queries"))
            if isinstance(q, dict) and as_str(q.get("query"))
        ]
    if kind == "SEARCH_RESULTS":
        found = content.get("web_results_content") or step.get("web_results_content") or {}
        results = as_list(content.get("web_results")) or as_list(
            found.get("web_results") if isinstance(found, dict) else found
        )
        return [Step("read", s.title) for s in map(web_result, results) if s is not None]
    if kind in ("URL_NAVIGATE", "GET_URL_CONTENT"):
        pages = [p.get("url") for p in as_list(content.get("pages")) if isinstance(p, dict)]
        urls = [content.get("url"), *as_list(content.get("urls")), *pages]
        return [Step("read", u) for u in urls if isinstance(u, str) and u.strip()]
    if kind == "THOUGHT" and as_str(content.get("thought")).strip():
        return [Step("note", content["thought"].strip()[:NOTE_LIMIT])]
    if kind == "GENERATE_IMAGE":
        text = as_str(content.get("caption")) or as_str(content.get("prompt"))
        return [Step("image", text)] if text else []
    if kind == "LOAD_SKILL":
        names = [n for n in as_list(content.get("skill_names")) if isinstance(n, str)]
        return [Step("step", f"Loading the {', '.join(names)} skill")] if names else []
    if kind == "CODE":
        return [Step("step", as_str(content.get("description")) or "Running code")]
    if kind == "RESEARCH_ANSWER":
        return [Step("step", "Writing the report")]
    return []


def _workflow_notes(snapshot: Snapshot) -> list[Step]:
    """A research run's workflow text ("Insights", step summaries): progress notes, shown with
    the steps, never the answer (docs/protocol.md §6.3)."""
    block = snapshot.block("workflow_root")
    if block is None or block.kind != "workflow_block" or not is_research(snapshot.top):
        return []
    notes = []
    for step in as_list(block.doc.get("steps") if isinstance(block.doc, dict) else None):
        for item in as_list(step.get("items") if isinstance(step, dict) else None):
            payload = item.get("payload") if isinstance(item, dict) else None
            text_payload = payload.get("text_payload") if isinstance(payload, dict) else None
            if not isinstance(text_payload, dict):
                continue
            chunks = text_payload.get("chunks")
            text = as_str(text_payload.get("text")) or "".join(
                c for c in as_list(chunks) if isinstance(c, str)
            )
            if text.strip():
                notes.append(Step("note", text.strip()[:NOTE_LIMIT]))
    return notes


def _size(value: Any) -> int:
    return value if isinstance(value, int) and 0 < value < 100_000 else 0


def images(snapshot: Snapshot) -> list[Image]:
    """Generated images (docs/protocol.md §6.6): the steps' GENERATED_IMAGE assets, the image-results
    steps, then top-level `media_items` that carry `generated_media_metadata`; one per image
    (the same image comes with fresh signatures in the query string)."""
    found: dict[str, Image] = {}
    caption = ""

    def add(url: Any, name: Any, width: Any, height: Any) -> None:
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            return
        image = Image(url, as_str(name).strip()[:300], _size(width), _size(height))
        if image.key not in found:
            found[image.key] = image
        elif image.caption and not found[image.key].caption:
            known = found[image.key]
            found[image.key] = Image(known.url, image.caption, known.width, known.height)

    for usage in snapshot.block_order:
        block = snapshot.blocks[usage]
        if block.kind != "plan_block" or not isinstance(block.doc, dict):
            continue
        for step in as_list(block.doc.get("steps")):
            if not isinstance(step, dict):
                continue
            content = step.get("generate_image_content")
            if isinstance(content, dict) and not caption:
                caption = (as_str(content.get("caption")) or as_str(content.get("prompt"))).strip()[:300]
            for asset in as_list(step.get("assets")):
                if not isinstance(asset, dict) or asset.get("asset_type") != "GENERATED_IMAGE":
                    continue
                image = asset.get("generated_image")
                if isinstance(image, dict):
                    info = as_list(asset.get("download_info"))
                    name = info[0].get("filename") if info and isinstance(info[0], dict) else ""
                    add(image.get("url"), name, image.get("image_width"), image.get("image_height"))
            results = step.get("generate_image_results_content")
            for image in as_list(results.get("image_results") if isinstance(results, dict) else None):
                if isinstance(image, dict):
                    add(image.get("url"), "", image.get("image_width"), image.get("image_height"))
    for item in as_list(snapshot.top.get("media_items")):
        if isinstance(item, dict) and item.get("medium") == "image" and item.get("generated_media_metadata"):
            add(item.get("image"), item.get("name"), item.get("image_width"), item.get("image_height"))
    return [
        image if image.caption else Image(image.url, caption, image.width, image.height)
        for image in found.values()
    ]
