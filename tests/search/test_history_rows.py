"""History at scale: what the search ranks and fetches, and what each row shows (made in Python,
search/history/rows.py, not by the template's filters)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from search.history import query
from search.models import Entry
from tests.search.test_history import WIKI, make

pytestmark = pytest.mark.django_db


def test_another_persons_newer_matches_do_not_hide_mine(owner, member, monkeypatch):
    """Only the newest CANDIDATES matches are ranked: the person's own, not the household's."""
    monkeypatch.setattr(query, "CANDIDATES", 2)
    mine = make(owner, "volcanoes of iceland")
    for n in range(3):
        make(member, f"volcanoes again {n}")
    assert [e.pk for e, *_ in query.search(owner, query.Filters(text="volcanoes"))] == [mine.pk]
    assert len(query.search(member, query.Filters(text="volcanoes"))) == 2


def test_the_ranked_matches_are_the_newest_by_date_not_the_last_stored(owner, monkeypatch):
    """An imported library is stored in Perplexity's order, newest first: the window of ranked
    matches is still the newest by date (it held the oldest imported ones)."""
    monkeypatch.setattr(query, "CANDIDATES", 2)
    imported = [make(owner, f"volcanoes of iceland {n}", days_ago=10 + n) for n in range(4)]  # newest first
    asked = make(owner, "volcanoes here")
    found = query.search(owner, query.Filters(text="volcanoes"))
    assert sorted(e.pk for e, *_ in found) == sorted([asked.pk, imported[0].pk])


def test_each_page_of_results_has_its_own_rows_highlights(owner):
    """The highlights are made for the page's rows only, in a second statement: each row still
    gets its own, on every page."""
    for word in ("alpha", "beta", "gamma"):
        make(owner, f"{word} lava", answer=f"The {word} flow of lava was slow.")
    seen = []
    for offset in range(3):
        ((entry, title, excerpt, _),) = query.search(owner, query.Filters(text="lava"), offset=offset, size=1)
        word = entry.question.split()[0]
        assert str(title) == f"{word} <mark>lava</mark>"
        assert f"{word} flow of <mark>lava</mark> was slow" in str(excerpt)
        seen.append(word)
    assert sorted(seen) == ["alpha", "beta", "gamma"]
    assert query.search(owner, query.Filters(text="lava"), offset=3, size=1) == []


def test_the_found_entries_are_fetched_by_key_not_in_the_default_order(owner):
    """With Entry's default order (created, id) SQLite walked all of the person's entries through
    the (user, created) index to fetch a page's few by id (45 ms at 100,000)."""
    make(owner, "Eiffel tower height?", answer="The Eiffel tower is 330 m.")
    with CaptureQueriesContext(connection) as queries:
        assert query.search(owner, query.Filters(text="eiffel"))
        assert query.suggestions(owner, "eiffel tow")
    fetches = [q["sql"] for q in queries if re.search(r'"search_entry"\."id" IN \(', q["sql"])]
    assert len(fetches) == 2 and not any("ORDER BY" in sql for sql in fetches)


def row_html(page: str, question_start: str) -> str:
    start = page.index(question_start)
    return page[page.rindex('<li class="row">', 0, start) : page.index("</li>", start)]


def test_a_row_shows_its_link_status_time_origin_model_and_sources(owner_client, owner):
    long_question = "Why " + "very " * 55 + "long?"  # (at most 300 characters)
    entry = make(owner, long_question, answer="Because " * 60, sources=[WIKI, WIKI], model="gpt55")
    Entry.objects.filter(pk=entry.pk).update(origin="perplexity", status="stopped")
    entry.refresh_from_db()
    link = f'href="{reverse("search:thread", args=[entry.thread_id])}#entry-{entry.pk}"'
    when = entry.created.strftime("%H:%M")
    facts = f'<span class="badge status-stopped">{Entry.Status.STOPPED.label}</span> {{}}{when} · imported from Perplexity · GPT-5.5 · 2 sources'

    row = row_html(owner_client.get(reverse("search:history")).content.decode(), "Why very")
    assert link in row and facts.format("") in row
    assert f'aria-label="Select “{long_question[:59]}…”"' in row
    assert f">{long_question[:199]}…</a>" in row
    assert f'<p class="excerpt">{("Because " * 60)[:199]}…</p>' in row

    found = owner_client.get(reverse("search:history"), {"q": "because"}).content.decode()
    row = row_html(found, "Why very")
    assert link in row and facts.format(f"{entry.created.day} {entry.created:%b %Y}, ") in row
    assert "<mark>Because</mark>" in row


def test_a_follow_up_says_which_conversation_it_belongs_to(owner_client, owner):
    """A follow-up ("And with rye flour?") says little alone: its row names its conversation, on
    the page and in search results; the first question's row does not repeat itself."""
    first = make(owner, "Why does bread rise?", answer="Yeast makes gas.")
    make(owner, "And with rye flour?", answer="Rye has less gluten, so it rises less.", thread=first.thread)
    page = owner_client.get(reverse("search:history")).content.decode()
    assert "in “Why does bread rise?”" in row_html(page, "And with rye")
    assert "in “" not in row_html(page, ">Why does bread rise?<")
    found = owner_client.get(reverse("search:history"), {"q": "gluten"}).content.decode()
    assert "in “Why does bread rise?”" in row_html(found, "And with rye")
