"""A saved answer is rendered once (issue 41): its HTML is stored with a key of what it was made
from and read back by every page load; a change of the answer, its sources or the renderer
renders it again, once. The history page never renders answers. Copy's HTML (issue 42)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from search import rendered
from search.models import Entry, Rendered, Thread

pytestmark = pytest.mark.django_db

SOURCES = [
    {"title": "Bread - Wikipedia", "url": "https://en.wikipedia.org/wiki/Bread", "snippet": "Bread is food."},
    {"title": "Yeast", "url": "https://yeast.example/", "snippet": ""},
    {"title": "Roots", "url": "https://roots.example/", "snippet": ""},
]


@pytest.fixture
def saved(owner):
    thread = Thread.objects.create(user=owner, title="Bread")
    return Entry.objects.create(
        thread=thread,
        question="How does bread rise?",
        status="completed",
        answer="## Rising\n\nBread rises [1] with **yeast** [2], and $$\\sqrt[3]{x}$$ stays [3].",
        sources=SOURCES,
    )


@pytest.fixture
def renders(monkeypatch):
    """Counts the renders of saved entries (search.rendered.make)."""
    made = []
    real = rendered.make

    def counting(entry):
        made.append(entry.pk)
        return real(entry)

    monkeypatch.setattr(rendered, "make", counting)
    return made


def page(client, entry) -> str:
    response = client.get(reverse("search:thread", args=[entry.thread_id]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_saved_answer_is_rendered_once_and_read_back_after(owner_client, saved, renders):
    first = page(owner_client, saved)
    assert renders == [saved.pk]
    assert "<h3>Rising</h3>" in first and '<math display="block">' in first and 'class="cite"' in first
    stored = Rendered.objects.get(entry=saved)
    assert stored.answer in first and stored.key == rendered.key(saved)
    for _ in range(3):
        assert stored.answer in page(owner_client, saved)
    assert renders == [saved.pk]  # no render on the later loads


def test_a_changed_answer_sources_or_renderer_renders_it_again_once(
    owner_client, saved, renders, monkeypatch
):
    page(owner_client, saved)
    saved.answer += " More."
    saved.save()
    assert "More." in page(owner_client, saved)
    saved.sources = SOURCES[:1]
    saved.save()
    assert 'href="https://yeast.example/"' not in page(owner_client, saved)
    monkeypatch.setattr(rendered, "RENDERER", rendered.RENDERER + 1)
    page(owner_client, saved)
    page(owner_client, saved)
    assert renders == [saved.pk] * 4


def test_a_running_entry_is_rendered_each_time_and_not_stored(saved, renders):
    saved.status = "running"
    rendered.html(saved)
    rendered.html(saved)
    assert renders == [saved.pk, saved.pk] and not Rendered.objects.exists()


def test_render_answers_renders_what_is_missing_or_stale(owner, saved, renders, capsys):
    other = Entry.objects.create(thread=saved.thread, question="q2", status="completed", answer="Two.")
    call_command("render_answers")
    assert sorted(renders) == sorted([saved.pk, other.pk])
    call_command("render_answers")
    assert len(renders) == 2
    assert "2 answers looked at, 0 rendered" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
async def test_a_live_answer_is_kept_when_it_ends(saved):
    await rendered.keep(saved.pk)
    stored = await Rendered.objects.aget(entry_id=saved.pk)
    assert "<h3>Rising</h3>" in stored.answer and stored.key == rendered.key(saved)


def test_the_history_page_never_renders_an_answer(owner_client, saved, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the history page rendered an answer")

    monkeypatch.setattr("search.render.render_answer", refuse)
    monkeypatch.setattr("search.display.render_answer", refuse)
    monkeypatch.setattr(rendered, "make", refuse)
    saved.answer = "[" * 300_000  # one person's huge entry
    saved.save()
    response = owner_client.get(reverse("search:history"))
    assert response.status_code == 200 and "How does bread rise?" in response.content.decode()


def test_copy_html_has_the_answer_numbered_citations_and_the_sources(owner_client, saved):
    url = reverse("search:entry_copy_html", args=[saved.pk])
    response = owner_client.get(url)
    assert response["Content-Type"] == "text/html; charset=utf-8"
    html = response.content.decode()
    assert '<sup><a href="https://en.wikipedia.org/wiki/Bread"' in html and ">[1]</a>" in html
    assert "cite-card" not in html and "<math" in html and "<strong>yeast</strong>" in html
    assert '<ol><li><a href="https://en.wikipedia.org/wiki/Bread">Bread - Wikipedia</a></li>' in html
    bare = owner_client.get(url + "?citations=0").content.decode()
    assert "[1]" not in bare and "<ol>" not in bare and "Bread rises with <strong>yeast</strong>," in bare
    markdown = owner_client.get(reverse("search:entry_markdown", args=[saved.pk])).content.decode()
    assert "$$\\sqrt[3]{x}$$ stays [^3]." in markdown  # the LaTeX as it is


def test_copy_html_is_the_owners_only(client, member, saved):
    client.force_login(member)
    assert client.get(reverse("search:entry_copy_html", args=[saved.pk])).status_code == 404


def test_a_long_imported_answer_is_rendered_when_saved(owner, saved, renders):
    from search.rendered import AHEAD, keep_large

    saved.answer = "Long. " * (AHEAD // 6 + 1)
    short = Entry.objects.create(thread=saved.thread, question="short", status="completed", answer="Short.")
    keep_large([saved, short])  # as both imports call it on what they saved
    assert renders == [saved.pk] and Rendered.objects.get().entry_id == saved.pk
