"""History finds what people remember: conversation titles are searched and shown, text and
filters combine on every page, suggestions show each past question once, labelled."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from search.history import query
from search.models import Entry, Thread
from tests.search.test_history import WIKI, make

pytestmark = pytest.mark.django_db


def found_ids(page: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'#entry-(\d+)" class="q"', page)]


def history(client, **params) -> str:
    return client.get(reverse("search:history"), params).content.decode()


def test_imported_threads_are_found_by_their_titles_and_the_title_is_shown(owner_client, owner):
    """Perplexity titles a thread itself: "Comparing the best hiking boots" holds questions that
    never say "hiking boots". All 80 are found, over two pages, each showing its title."""
    for n in range(80):
        thread = Thread.objects.create(user=owner, title=f"Comparing the best hiking boots, part {n}")
        make(owner, "Which one for the Alps?", answer="Leather uppers last longer.", thread=thread)
    make(owner, "Running shoes for a marathon?", answer="Light ones with boots-like grip.")
    first = history(owner_client, q="hiking boots")
    second = history(owner_client, q="hiking boots", page=1)
    assert len(found_ids(first)) == 50 and len(found_ids(second)) == 30
    assert not set(found_ids(first)) & set(found_ids(second))
    assert "More results" in first and "More results" not in second
    assert "in “Comparing the best <mark>hiking</mark> <mark>boots</mark>, part" in first
    assert "marathon" not in first + second


def test_a_renamed_conversation_is_found_by_its_new_title(owner):
    """A library sync renames a conversation when Perplexity's title changes: every turn of it is
    found by the new title, and no longer by the old one."""
    thread = Thread.objects.create(user=owner, title="Sourdough starter")
    turns = [make(owner, q, answer="Feed it daily.", thread=thread) for q in ("How often?", "And in winter?")]
    assert len(query.search(owner, query.Filters(text="sourdough"))) == 2
    Thread.objects.filter(pk=thread.pk).update(title="Keeping a levain alive")
    found = query.search(owner, query.Filters(text="levain"))
    assert sorted(f.entry.pk for f in found) == sorted(t.pk for t in turns)
    assert str(found[0].title) == "Keeping a <mark>levain</mark> alive"
    assert query.search(owner, query.Filters(text="sourdough")) == []


def test_words_from_the_title_and_the_turn_together_find_it(owner):
    thread = Thread.objects.create(user=owner, title="Best hiking boots")
    alps = make(owner, "Which one for the Alps?", answer="Leather.", thread=thread)
    make(owner, "And for the beach?", answer="Sandals.", thread=thread)
    assert [f.entry.pk for f in query.search(owner, query.Filters(text="boots alps"))] == [alps.pk]


def test_a_filter_finds_a_weak_match_behind_many_strong_ones(owner_client, owner):
    """60 answers that say "paris" over and over rank above the one failed answer that says it
    once; the filter still finds that one on the first page (the filters narrowed the matches
    after ranking and paging them: "Nothing matches.")."""
    for n in range(60):
        make(owner, f"Paris trip {n}", answer="Paris, Paris and Paris again: paris everywhere.")
    failed = make(
        owner, "A long question", answer="It mentions paris once " + "and more " * 200, status="failed"
    )
    page = history(owner_client, q="paris", status="failed")
    assert found_ids(page) == [failed.pk]
    assert "Nothing matches." not in page


@pytest.mark.parametrize(
    "filters",
    [
        {"status": "failed"},
        {"model": "gpt55"},
        {"domain": "en.wikipedia.org"},
        {"after": "days:9", "before": "days:3"},
        {"model": "gpt55", "status": "completed", "after": "days:20"},
    ],
    ids=["status", "model", "domain", "dates", "several"],
)
def test_text_and_filters_combine_on_every_page(owner_client, owner, filters):
    """Pages of a filtered search hold exactly the matches the filters leave, best first, each
    once, however many stronger matches the filters take out."""
    for n in range(40):
        make(
            owner,
            f"Bread question {n}",
            answer="rye " * (1 + n % 7) + "and flour",
            status="failed" if n % 4 == 0 else "completed",
            model="gpt55" if n % 3 == 0 else "pplx_pro",
            sources=[WIKI] if n % 5 == 0 else [],
            days_ago=n % 25,
        )
    make(
        owner, "Nothing of it here", answer="only wheat", model="gpt55", status="failed"
    )  # no match: the text
    params = {
        k: (timezone.localdate() - timedelta(days=int(v[5:]))).isoformat() if v.startswith("days:") else v
        for k, v in filters.items()
    }
    shown, page = [], 0
    while True:
        html = history(owner_client, q="rye", size=4, page=page, **params)
        ids = found_ids(html)
        shown += ids
        if "More results" not in html:
            break
        assert len(ids) == 4
        page += 1
    form_filters = query.Filters(
        text="rye",
        after=timezone.localdate() - timedelta(days=int(filters["after"][5:]))
        if "after" in filters
        else None,
        before=timezone.localdate() - timedelta(days=int(filters["before"][5:]))
        if "before" in filters
        else None,
        status=filters.get("status", ""),
        models=(filters["model"],) if "model" in filters else (),
        domain=filters.get("domain", ""),
    )
    expected = set(
        query.filtered(owner, form_filters).filter(question__startswith="Bread").values_list("pk", flat=True)
    )
    assert expected and len(shown) == len(set(shown)) == len(expected)
    assert set(shown) == expected
    ranked = [f.entry.pk for f in query.search(owner, form_filters, size=100)]
    assert shown == ranked  # the pages in rank order, as one long page has them


def test_a_source_site_with_like_wildcards_is_matched_as_written(owner):
    make(owner, "rye one", answer="rye", sources=[{"title": "t", "url": "https://my_site.example/x"}])
    make(owner, "rye two", answer="rye", sources=[{"title": "t", "url": "https://myXsite.example/x"}])
    found = query.search(owner, query.Filters(text="rye", domain="my_site.example"))
    assert [f.entry.question for f in found] == ["rye one"]
    assert query.search(owner, query.Filters(text="rye", domain="%")) == []


def test_the_to_day_includes_its_evening_in_the_servers_time_zone(owner, settings):
    settings.TIME_ZONE = "Pacific/Auckland"
    entry = make(owner, "late rye", answer="rye")
    zone = timezone.get_current_timezone()
    with timezone.override(zone):
        evening = timezone.localtime().replace(hour=23, minute=30, second=0, microsecond=0)
        Entry.objects.filter(pk=entry.pk).update(created=evening)
        day = evening.date()
        for filters in (query.Filters(text="rye", before=day), query.Filters(text="rye", after=day)):
            assert [f.entry.pk for f in query.search(owner, filters)] == [entry.pk]
        assert query.search(owner, query.Filters(text="rye", after=day + timedelta(days=1))) == []
        assert query.search(owner, query.Filters(text="rye", before=day - timedelta(days=1))) == []


def test_a_question_asked_three_times_is_suggested_once_and_labelled(owner_client, owner):
    asked = [make(owner, question, days_ago=days) for question, days in
             (("How do I feed a sourdough starter?", 9), ("how do I feed a  sourdough starter", 5),
              ("How do I feed a sourdough starter?", 1))]  # fmt: skip
    other = make(owner, "Sourdough starter smells of acetone", days_ago=3)
    html = owner_client.get(reverse("search:suggest"), {"q": "sourdough star"}).content.decode()
    assert "You asked this before" in html
    assert html.lower().count("how do i feed a") == 1
    assert f"#entry-{asked[2].pk}" in html  # the newest time it was asked
    assert f"#entry-{other.pk}" in html
    assert [e.pk for e in query.suggestions(owner, "sourdough star")] == [asked[2].pk, other.pk]


def test_repeats_do_not_crowd_out_other_questions(owner):
    for n in range(12):
        make(owner, "What is rye flour?", days_ago=n)
    older = make(owner, "Rye flour versus wheat flour", days_ago=30)
    assert [e.question for e in query.suggestions(owner, "rye flo")] == ["What is rye flour?", older.question]
