"""Small wording helpers for the answer page's templates."""

from __future__ import annotations

from django import template

register = template.Library()


def _plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


@register.filter
def steps_summary(steps: list) -> str:
    """The folded steps in one line: "5 searches · read 6 pages" (or "3 steps")."""
    kinds = [s.get("kind") if isinstance(s, dict) else getattr(s, "kind", "") for s in steps]
    parts = []
    if searches := kinds.count("search"):
        parts.append(_plural(searches, "search", "searches"))
    if reads := kinds.count("read"):
        parts.append("read " + _plural(reads, "page", "pages"))
    if images := kinds.count("image"):
        parts.append(_plural(images, "image", "images"))
    return " · ".join(parts) or _plural(len(steps), "step", "steps")


@register.filter
def step_text(step) -> str:
    """One step as a sentence fragment ("Searching “x”")."""
    kind = step.get("kind") if isinstance(step, dict) else getattr(step, "kind", "")
    text = step.get("text") if isinstance(step, dict) else getattr(step, "text", "")
    if kind == "search":
        return f"Searching “{text}”"
    if kind == "read":
        return f"Reading {text}"
    if kind == "image":
        return f"Creating an image: {text}"
    return str(text)


@register.filter
def ago(when) -> str:
    """ "just now", "5 minutes ago", "2 days ago" (never "0 minutes ago")."""
    from django.utils import timezone
    from django.utils.timesince import timesince

    if not when or (timezone.now() - when).total_seconds() < 60:
        return "just now"
    return f"{timesince(when).split(',')[0]} ago"


@register.filter
def model_name(slug: str, models: dict | None = None) -> str:
    """The catalogue's name of a model id ("gemini38flash" -> "Gemini 3.8 Flash"); `models`: the
    catalogue's models when the page has read them (else they are read)."""
    from search.display import model_label

    return model_label(slug, models)
