"""Everything a saved entry needs to be drawn, shared by pages and the socket."""

from __future__ import annotations

from django.template.loader import render_to_string

from search.attachments import listed
from search.models import Entry
from search.render import render_answer, render_report, render_sources


def catalogue_models(data: dict | None = None) -> dict:
    """The models of the catalogue (`data`, else the newest)."""
    from accounts.services import catalogue

    models = (catalogue() if data is None else data).get("models")
    return models if isinstance(models, dict) else {}


def model_label(slug: str, models: dict | None = None) -> str:
    """The catalogue's name for a model id ("gpt55" -> "GPT-5.5 (gpt55)"), else the id itself."""
    if not slug:
        return ""
    info = (catalogue_models() if models is None else models).get(slug)
    label = info.get("label") if isinstance(info, dict) else ""
    return f"{label} ({slug})" if label and label.lower() != slug.lower() else slug


def entry_context(entry: Entry) -> dict:
    return {
        "entry": entry,
        "model": model_label(entry.model),
        "answer_html": render_answer(entry.answer, entry.sources),
        "report": report_context(entry.pk, entry.report, entry.running),
        "sources_html": render_sources(entry.sources),
        "started_ms": int(entry.created.timestamp() * 1000),
        "seconds": round(entry.done_ms / 1000, 1) if entry.done_ms else None,
        "first_text": round(entry.first_text_ms / 1000, 1) if entry.first_text_ms else None,
        "attachments": listed(entry),
    }


def report_context(entry_id: int, markdown: str, running: bool, oob: bool = False) -> dict:
    """What templates/search/report_fragment.html draws: a Deep Research report and its contents."""
    html, toc = render_report(markdown)
    return {"entry_id": entry_id, "report_html": html, "toc": toc, "running": running, "oob": oob}


def entry_html(entry: Entry) -> str:
    return render_to_string("search/entry.html", entry_context(entry))


def new_entry_fragment(entry: Entry) -> str:
    """A new turn appended to the page's list of entries, and the thread's address for the bar."""
    return render_to_string(
        "search/new_entry_fragment.html", {"entry_html": entry_html(entry), "entry": entry}
    )
