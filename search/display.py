"""Everything a saved entry needs to be drawn, shared by pages and the socket."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import mark_safe

from search import citations, rendered
from search.attachments import listed
from search.model_names import model_name
from search.models import Entry
from search.render import render_answer, render_report, render_sources, source_info


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


def answer_markdown(entry: Entry) -> str:
    """One answer as the Markdown export writes it: citations as footnotes (LaTeX and code as
    they are), sources under it."""
    text = citations.as_footnotes(entry.answer, len(entry.sources)).strip()
    notes = [
        f"[^{n}]: [{s.get('title') or s.get('url')}]({s.get('url')})"
        for n, s in enumerate(entry.sources, start=1)
        if isinstance(s, dict)
    ]
    return "\n\n".join(part for part in (text, "\n".join(notes)) if part)


def answer_html_copy(entry: Entry, cited: bool = True) -> str:
    """One answer as HTML for the clipboard (a mail, a document): its rendered Markdown with
    citations as numbers and the sources as a numbered list under it; `cited=False`: the text
    alone. Math stays MathML (word processors take it); Copy's text/plain keeps the LaTeX."""
    if not cited:
        return render_answer(citations.without(entry.answer, len(entry.sources)), copy=True)
    html = render_answer(entry.answer, entry.sources, copy=True)
    items = [source_info(n, s) for n, s in enumerate(entry.sources, start=1)]
    listed = "".join(
        f'<li><a href="{escape(i["url"])}">{escape(i["title"])}</a></li>'
        if i["url"]
        else f"<li>{escape(i['title'])}</li>"
        for i in items
    )
    return html + (f"<p><strong>Sources</strong></p><ol>{listed}</ol>" if items else "")


def entry_context(entry: Entry) -> dict:
    html = rendered.html(entry)
    return {
        "report_html": mark_safe(html.report),  # noqa: S308 - search.render's output, stored
        "report_toc": html.toc,
        "entry": entry,
        "model": model_label(entry.model),
        "answer_html": mark_safe(html.answer),  # noqa: S308 - search.render's output, stored
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


def new_entry_fragment(entry: Entry) -> str:
    """A new turn appended to the page's list of entries, and the thread's address for the bar."""
    return render_to_string(
        "search/new_entry_fragment.html", {"entry_html": entry_html(entry), "entry": entry}
    )
