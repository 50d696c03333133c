"""What each row of the history page shows, made in Python once per row.

The template's filters cost ~0.7 ms a row (truncatechars, date, url, the status's label): 35 ms
of a 50-row page. Here each value is computed once, the plain way, and the template only prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.safestring import SafeString

from search import versions
from search.display import model_label
from search.history.query import Found
from search.models import Entry
from search.versions import Place

STATUS = dict(Entry.Status.choices)


@dataclass(slots=True)
class Row:
    pk: int
    question: str
    link: str  # the answer in its conversation
    label: str  # the question, short, for its checkbox
    title: str | SafeString  # the question (highlighted in search results)
    excerpt: str | SafeString  # the answer's start, or where it matches (highlighted)
    status: str
    status_label: str
    conversation: str | SafeString  # its conversation's title when not the question (highlighted in results)
    # "14:05 · version 2 of 3 · imported from Perplexity · asked by laptop · GPT-5.5 · 3 sources · from alice"
    facts: str
    day: str  # "Friday 4 December 2026" on the first row of each day (pages only), else ""


def short(text: str, length: int) -> str:
    """truncatechars without Django's per-character walk: at most `length` characters, "…" last."""
    return text if len(text) <= length else text[: length - 1] + "…"


def conversation(entry: Entry, found: SafeString | None = None) -> str | SafeString:
    """A follow-up's conversation (its title, the first question unless renamed, or Perplexity's
    title of an imported thread): "And with rye flour?" says little alone. In search results the
    title with its matches marked (`found`, whole: a title is at most 300 characters). Nothing
    when the title is the question itself."""
    title = entry.thread.title.strip()
    if not title or title == entry.question.strip():
        return ""
    return found if found is not None else short(title, 120)


def thread_links() -> Callable[[int], str]:
    """Links to threads by id: reverse() once for the page (~0.1 ms each; a page has 50 rows)."""
    marker = 987654321
    head, tail = reverse("search:thread", args=[marker]).split(str(marker))
    return lambda pk: f"{head}{pk}{tail}"


def _row(
    entry: Entry, link, models: dict, title, excerpt, when: str, day: str, place: Place | None, found=None
) -> Row:
    sources = entry.sources if isinstance(entry.sources, list) else []
    # a version its conversation does not show opens there in its answer's place
    shows = "" if entry.shown else f"?version={entry.pk}"
    return Row(
        pk=entry.pk,
        question=entry.question,
        link=f"{link(entry.thread_id)}{shows}#entry-{entry.pk}",
        label=short(entry.question, 60),
        title=title,
        excerpt=excerpt,
        status=entry.status,
        status_label=STATUS.get(entry.status, entry.status),
        conversation=conversation(entry, found),
        facts=" · ".join(
            fact
            for fact in (
                when,
                versions.label(place, entry.shown),
                "imported from Perplexity" if entry.origin else "",
                f"asked by {entry.asked_by}" if entry.asked_by else "",
                model_label(entry.model, models),
                f"{len(sources)} source{'' if len(sources) == 1 else 's'}",
                f"from {entry.thread.kept_from}" if entry.thread.kept_from else "",
            )
            if fact
        ),
        day=day,
    )


def page_rows(entries: list[Entry], models: dict) -> list[Row]:
    """The newest-first page: the question and the answer's start shortened, a heading per day."""
    link, zone, previous = thread_links(), timezone.get_current_timezone(), None
    rows, places = [], versions.places(entries)
    for entry in entries:
        moment = entry.created.astimezone(zone)
        today: date = moment.date()
        day = dateformat.format(moment, "l j F Y") if today != previous else ""
        previous = today
        title, excerpt = short(entry.question, 200), short(getattr(entry, "preview", ""), 200)
        rows.append(_row(entry, link, models, title, excerpt, f"{moment:%H:%M}", day, places.get(entry.pk)))
    return rows


def search_rows(results: list[Found], models: dict) -> list[Row]:
    """Search results: the highlighted question, excerpt and conversation title, each with its
    date and time."""
    link, zone = thread_links(), timezone.get_current_timezone()
    rows, places = [], versions.places([found.entry for found in results])
    for found in results:
        moment = found.entry.created.astimezone(zone)
        when = dateformat.format(moment, "j M Y, H:i")
        entry = found.entry
        place = places.get(entry.pk)
        rows.append(_row(entry, link, models, found.question, found.excerpt, when, "", place, found.title))
    return rows
