"""Everything a saved entry needs to be drawn, shared by pages and the socket."""

from __future__ import annotations

import re

from django.template.loader import render_to_string

from search.attachments import listed
from search.model_names import model_name
from search.models import Entry
from search.render import render_answer, render_report, render_sources


def catalogue_models(data: dict | None = None) -> dict:
    """The models of the catalogue (`data`, else the newest)."""
    from accounts.services import catalogue

    models = (catalogue() if data is None else data).get("models")
    return models if isinstance(models, dict) else {}


def model_label(slug: str, models: dict | None = None) -> str:
    """The catalogue's name for a model id ("gpt55" -> "GPT-5.5"), else a name made from the id."""
    if not slug:
        return ""
    return model_name(slug, catalogue_models() if models is None else models)


CITATION = re.compile(r"\[(\d{1,3})\]")


def answer_markdown(entry: Entry) -> str:
    """One answer as the Markdown export writes it: citations as footnotes, sources under it."""
    count = len(entry.sources)
    text = CITATION.sub(
        lambda m: f"[^{m.group(1)}]" if 1 <= int(m.group(1)) <= count else m.group(0), entry.answer
    ).strip()
    notes = [
        f"[^{n}]: [{s.get('title') or s.get('url')}]({s.get('url')})"
        for n, s in enumerate(entry.sources, start=1)
        if isinstance(s, dict)
    ]
    return "\n\n".join(part for part in (text, "\n".join(notes)) if part)


def duration(ms: int | None) -> str | None:
    """A duration as the page says it: "4.2 s", or "40 ms" under a tenth of a second (a first
    word can come within 50 ms, and "0.0 s" read as none); None when not measured."""
    if ms is None:
        return None
    return f"{ms}\u00a0ms" if ms < 100 else f"{ms / 1000:.1f}\u00a0s"


def entry_context(entry: Entry) -> dict:
    report_html, report_toc = render_report(entry.report, entry.sources) if entry.report else ("", [])
    return {
        "report_html": report_html,
        "report_toc": report_toc,
        "entry": entry,
        "model": model_label(entry.model),
        "answer_html": render_answer(entry.answer, entry.sources),
        "sources_html": render_sources(entry.sources),
        "started_ms": int(entry.created.timestamp() * 1000),
        "seconds": duration(entry.done_ms),
        "first_text": duration(entry.first_text_ms),
        "attachments": listed(entry),
    }


def report_context(entry_id: int, markdown: str, sources, running: bool) -> dict:
    """What the live report fragment draws (templates/search/report_fragment.html)."""
    html, toc = render_report(markdown, sources) if markdown else ("", [])
    return {"entry_id": entry_id, "report_html": html, "toc": toc, "running": running, "oob": True}


def entry_html(entry: Entry) -> str:
    return render_to_string("search/entry.html", entry_context(entry))


def new_entry_fragment(entry: Entry) -> str:
    """A new turn appended to the page's list of entries, and the thread's address for the bar."""
    return render_to_string(
        "search/new_entry_fragment.html", {"entry_html": entry_html(entry), "entry": entry}
    )
