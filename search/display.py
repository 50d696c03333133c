"""Everything a saved entry needs to be drawn, shared by pages and the socket."""

from __future__ import annotations

import re

from django.template.loader import render_to_string

from search.attachments import listed
from search.markdown_links import safe_links
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
    return with_footnotes(entry.answer, entry.sources)


def with_footnotes(text: str, sources: list) -> str:
    """Markdown whose citations ([3]) are footnotes ([^3]), with the sources listed under it;
    links other than http(s) and mailto, and raw HTML, made harmless (search/markdown_links.py)."""
    notes = footnotes(sources)
    return safe_links("\n\n".join(part for part in (footnoted(text, len(sources)), notes) if part))


def footnoted(text: str, count: int) -> str:
    """The citations of `text` that name one of `count` sources as footnote marks."""
    return CITATION.sub(
        lambda m: f"[^{m.group(1)}]" if 1 <= int(m.group(1)) <= count else m.group(0), text
    ).strip()


def footnotes(sources: list) -> str:
    """The footnotes' list: `[^1]: [title](url)`, one line per source."""
    return "\n".join(
        f"[^{n}]: [{s.get('title') or s.get('url')}]({s.get('url')})"
        for n, s in enumerate(sources, start=1)
        if isinstance(s, dict)
    )


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
        "seconds": round(entry.done_ms / 1000, 1) if entry.done_ms else None,
        "first_text": round(entry.first_text_ms / 1000, 1) if entry.first_text_ms else None,
        "attachments": listed(entry),
    }


def report_context(entry_id: int, markdown: str, sources, running: bool) -> dict:
    """What the live report fragment draws (templates/search/report_fragment.html)."""
    html, toc = render_report(markdown, sources) if markdown else ("", [])
    return {"entry_id": entry_id, "report_html": html, "toc": toc, "running": running, "oob": True}


def entry_html(entry: Entry) -> str:
    return render_to_string("search/entry.html", entry_context(entry))


def mark(entry_id: int, seq: int, kind: str = "") -> str:
    """The marker an update of an entry opens with (static/pplxweb.js reads it): `seq`, the
    update's number; `kind` "full" for a whole state as of update `seq`, "saved" for the entry as
    the database has it (the page then waits for a whole state before taking updates)."""
    return f"<!--pplxweb:seq {entry_id} {seq}{' ' + kind if kind else ''}-->"


def new_entry_fragment(entry: Entry) -> str:
    """A new turn appended to the page's list of entries, and the thread's address for the bar:
    the entry's state 0, which its run's first update follows."""
    return mark(entry.pk, 0, "full") + render_to_string(
        "search/new_entry_fragment.html", {"entry_html": entry_html(entry), "entry": entry}
    )
