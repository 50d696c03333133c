"""Everything a saved entry needs to be drawn, shared by pages and the socket."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import mark_safe

from search import citations, clarifications, rendered, versions
from search.attachments import listed
from search.chips import source_info
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


def answer_markdown(entry: Entry) -> str:
    """One answer as the Markdown export writes it: citations as footnotes, sources under it."""
    return with_footnotes(entry.answer, entry.sources)


def with_footnotes(text: str, sources: list) -> str:
    """Markdown whose citations ([3]) are footnotes ([^3]: LaTeX and code as they are), with the
    sources listed under it; links other than http(s) and mailto, and raw HTML, made harmless
    (search/markdown_links.py)."""
    notes = footnotes(sources)
    cited = citations.as_footnotes(text, len(sources)).strip()
    return safe_links("\n\n".join(part for part in (cited, notes) if part))


def footnotes(sources: list) -> str:
    """The footnotes' list: `[^1]: [title](url)`, one line per source."""
    return "\n".join(
        f"[^{n}]: [{s.get('title') or s.get('url')}]({s.get('url')})"
        for n, s in enumerate(sources, start=1)
        if isinstance(s, dict)
    )


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


def duration(ms: int | None) -> str | None:
    """A duration as the page says it: "4.2 s", or "40 ms" under a tenth of a second (a first
    word can come within 50 ms, and "0.0 s" read as none); None when not measured."""
    if ms is None:
        return None
    return f"{ms}\u00a0ms" if ms < 100 else f"{ms / 1000:.1f}\u00a0s"


CARRIED = {  # why an answer was asked in a new Perplexity thread (Entry.carried, search/live/upstream.py)
    "EXPIRED": "Perplexity’s thread had expired (incognito threads last a day)",
    "ENTRY_EXPIRED": "Perplexity’s thread had expired",
    "ENTRY_DELETED": "Perplexity’s thread was deleted",
    "VIEW_THREAD_NOT_ALLOWED": "Perplexity’s thread is not viewable with this account",
    "THREAD_NOT_FOUND": "Perplexity’s thread was not found",
    "REFUSED": "Perplexity refused to go on in its thread",
    "NEW_THREAD": "Perplexity answered outside this conversation’s thread",
}
CARRIED_SO = ": asked in a new one with the earlier questions."


def carried_text(code: str) -> str:
    """The quiet line of an answer asked in a new Perplexity thread ("" for any other)."""
    return f"{CARRIED.get(code, CARRIED['THREAD_NOT_FOUND'])}{CARRIED_SO}" if code else ""


def entry_context(entry: Entry) -> dict:
    html = rendered.html(entry)
    if entry.turn is not None and getattr(entry, "attachment_list", None) is None:
        entry.attachment_list = versions.files(entry)  # a redo asks about its turn's files
    return {
        "report_html": mark_safe(html.report),  # noqa: S308 - search.render's output, stored
        "report_toc": html.toc,
        "entry": entry,
        "model": model_label(entry.model),
        "answer_html": mark_safe(html.answer),  # noqa: S308 - search.render's output, stored
        "sources_html": render_sources(entry.sources, rendered.source_refs(entry.pk)),
        "started_ms": int(entry.created.timestamp() * 1000),
        "seconds": duration(entry.done_ms),
        "first_text": duration(entry.first_text_ms),
        "attachments": listed(entry),
        "clarified": clarifications.shown(entry.clarifications),
        "place": versions.place_of(entry),
        "carried": carried_text(entry.carried),
    }


def report_context(entry_id: int, markdown: str, sources, running: bool) -> dict:
    """What the live report fragment draws (templates/search/report_fragment.html)."""
    html, toc = render_report(markdown, sources, rendered.source_refs(entry_id)) if markdown else ("", [])
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
