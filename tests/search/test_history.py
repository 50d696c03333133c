"""History: list, full-text search, delete, export and import, suggestions; each only one's own."""

from __future__ import annotations

import io
import json
import re
import warnings
import zipfile
from datetime import timedelta

import httpx
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from search.models import Entry, Thread

pytestmark = pytest.mark.django_db


def make(
    user, question, answer="", sources=(), status="completed", model="pplx_pro", days_ago=0, thread=None
):
    thread = thread or Thread.objects.create(user=user, title=question)
    entry = Entry.objects.create(
        thread=thread,
        question=question,
        answer=answer,
        sources=list(sources),
        status=status,
        model=model,
        related=["r?"],
    )
    if days_ago:
        Entry.objects.filter(pk=entry.pk).update(created=timezone.now() - timedelta(days=days_ago))
        entry.refresh_from_db()
    return entry


def downloaded(response) -> bytes:
    """A streamed response's body. The export streams from an async generator (as daphne serves
    it); the test client reads that whole, with a warning meant for sync servers."""
    assert response.status_code == 200 and response.streaming
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "StreamingHttpResponse must consume asynchronous iterators")
        return b"".join(response)


WIKI = {"title": "Paris - Wikipedia", "url": "https://en.wikipedia.org/wiki/Paris", "snippet": "", "date": ""}


def test_history_lists_newest_first_grouped_by_day(owner_client, owner):
    make(owner, "old question", days_ago=3)
    make(owner, "new question", answer="The start of the <b>answer</b>" + " more" * 100, sources=[WIKI])
    page = owner_client.get(reverse("search:history")).content.decode()
    assert "The start of the &lt;b&gt;answer&lt;/b&gt; more" in page and " more" * 60 not in page
    assert page.index("new question") < page.index("old question")
    assert page.count('<li class="day">') == 2
    assert "1 source" in page and "status-completed" in page


def test_cursor_pagination_and_absurd_values(owner_client, owner):
    for i in range(7):
        make(owner, f"question {i}")
    page = owner_client.get(reverse("search:history"), {"size": 3}).content.decode()
    assert "question 6" in page and "question 4" in page and "question 3" not in page
    cursor = Entry.objects.get(question="question 4").pk
    page = owner_client.get(reverse("search:history"), {"size": 3, "before_id": cursor}).content.decode()
    assert "question 3" in page and "question 4" not in page
    for bad in (
        {"before_id": "-5"},
        {"before_id": "x"},
        {"size": "100000000"},
        {"size": "-1"},
        {"page": "999999999"},
        {"before_id": "9" * 40},
    ):
        assert owner_client.get(reverse("search:history"), bad).status_code == 200


def test_filters_are_in_the_url(owner_client, owner):
    make(owner, "kept", sources=[WIKI], model="gpt55")
    make(owner, "failed one", status="failed")
    make(owner, "other model", model="claude")
    page = owner_client.get(reverse("search:history"), {"status": "failed"}).content.decode()
    assert "failed one" in page and "kept" not in page
    page = owner_client.get(
        reverse("search:history"), {"model": "gpt55", "domain": "en.wikipedia.org"}
    ).content.decode()
    assert "kept" in page and "other model" not in page


def test_the_model_filter_lists_the_models_answers_came_from_by_name_once_each(owner_client, owner, member):
    make(owner, "best one", model="pplx_pro")
    make(owner, "free one", model="turbo")  # also "Best": one entry in the list for both
    make(owner, "new one", model="gemini38flash")  # in no catalogue: a name made from the id
    make(owner, "gpt one", model="gpt52")
    make(member, "not mine", model="claude48opusthinking")
    page = owner_client.get(reverse("search:history")).content.decode()
    select = page[
        page.index('<select name="model"') : page.index("</select>", page.index('<select name="model"'))
    ]
    options = re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select)
    assert options == [("", "Any model"), ("pplx_pro", "Best"), ("gemini38flash", "Gemini 3.8 Flash"),
                       ("gpt52", "GPT-5.2")]  # fmt: skip
    # each row names its model, never its id
    assert "· Gemini 3.8 Flash ·" in page and "· GPT-5.2 ·" in page and "gemini38flash ·" not in page
    page = owner_client.get(reverse("search:history"), {"model": "pplx_pro"}).content.decode()
    assert "best one" in page and "free one" in page and "new one" not in page
    page = owner_client.get(reverse("search:history"), {"model": "turbo"}).content.decode()
    assert "best one" in page and "free one" in page and "gpt one" not in page
    # a model none of the person's answers came from: a sentence, nothing lost
    page = owner_client.get(reverse("search:history"), {"model": "claude48opusthinking"}).content.decode()
    assert "No answer in your history is by that model." in page and "not mine" not in page


def test_full_text_search_over_questions_answers_and_sources_with_safe_highlights(owner_client, owner):
    make(
        owner,
        "Where is the <b>Eiffel</b> tower?",
        answer="It stands in Paris, on the Champ de Mars.",
        sources=[WIKI],
    )
    make(owner, "Unrelated", answer="Nothing about it")
    page = owner_client.get(reverse("search:history"), {"q": "eiffel"}).content.decode()
    assert "<mark>Eiffel</mark>" in page and "&lt;b&gt;" in page  # our mark; their markup escaped
    assert "<b>Eiffel" not in page and "Unrelated" not in page
    assert (
        "<mark>Champ</mark>" in owner_client.get(reverse("search:history"), {"q": "champ"}).content.decode()
    )
    assert (
        "Eiffel" in owner_client.get(reverse("search:history"), {"q": "wikipedia"}).content.decode()
    )  # a source title
    assert (
        "Eiffel" in owner_client.get(reverse("search:history"), {"q": "cham"}).content.decode()
    )  # prefix of the last word


@pytest.mark.parametrize(
    "text", ['"', "NEAR(", "*", "-", "(a", "a)", 'x" OR "y', "AND", "a:b", "^", "{x}", "🙂"]
)
def test_search_text_with_fts_syntax_is_plain_words(owner_client, owner, text):
    make(owner, "a question about x and y")
    assert owner_client.get(reverse("search:history"), {"q": text}).status_code == 200


def test_a_10_mb_search_is_refused_with_a_sentence(owner_client):
    response = owner_client.get(reverse("search:history"), {"q": "x" * (10 * 1024 * 1024 - 10)})
    assert response.status_code == 200
    assert "too long" in response.content.decode()


def test_search_ranks_relevance_then_recency(owner_client, owner):
    make(owner, "paris", answer="paris paris paris", days_ago=5)
    make(owner, "one mention", answer="paris")
    page = owner_client.get(reverse("search:history"), {"q": "paris"}).content.decode()
    assert page.index("<mark>paris</mark>") < page.index("one mention")


def test_equally_good_matches_come_newest_first_by_date_not_by_when_they_were_stored(owner_client, owner):
    """An imported library's entries are stored in the order the import reads them, not by date."""
    stored = [
        make(owner, f"rye dough number {n}", answer="it rises", days_ago=d) for n, d in enumerate((1, 3, 2))
    ]
    page = owner_client.get(reverse("search:history"), {"q": "rye dough"}).content.decode()
    found = [int(pk) for pk in re.findall(r'#entry-(\d+)" class="q"', page)]
    assert found == [stored[0].pk, stored[2].pk, stored[1].pk]  # 1, 2, 3 days ago


def test_delete_one_a_selection_and_everything_needs_confirmation_and_post(owner_client, owner):
    a, b, c = (make(owner, f"delete me {i}", answer="findable") for i in range(3))
    assert (
        owner_client.get(reverse("search:delete"), {"entry": a.pk}).status_code == 200
    )  # a confirmation page
    assert Entry.objects.count() == 3
    owner_client.post(
        reverse("search:delete"), {"entry": [a.pk]}
    )  # no confirm: only the confirmation page again
    assert Entry.objects.count() == 3
    owner_client.post(reverse("search:delete"), {"entry": [a.pk, b.pk], "confirm": "1"})
    assert list(Entry.objects.values_list("pk", flat=True)) == [c.pk]
    assert Thread.objects.count() == 1  # empty threads go too
    page = owner_client.get(reverse("search:history"), {"q": "findable"}).content.decode()
    assert "delete me 0" not in page and "delete me 2" in page  # gone from search too
    owner_client.post(reverse("search:delete"), {"all": "1", "confirm": "1"})
    assert not Entry.objects.exists()
    assert "delete me" not in owner_client.get(reverse("search:history"), {"q": "findable"}).content.decode()


def test_export_a_thread_as_markdown_and_json(owner_client, owner):
    entry = make(owner, "What is X?", answer="X is Y [1]. Not a source [7].", sources=[WIKI])
    make(owner, "And Z?", answer="Z too.", thread=entry.thread, model="gemini38flash")
    md = owner_client.get(reverse("search:export_thread", args=[entry.thread_id, "md"]))
    text = md.content.decode()
    assert md["Content-Disposition"].startswith("attachment")
    assert "## What is X?" in text and "## And Z?" in text
    # each answer's model by name, as its page says it ("pplx_pro" is Perplexity's "Best")
    assert " · completed · Best*" in text and " · completed · Gemini 3.8 Flash*" in text
    assert "pplx_pro" not in text and "gemini38flash" not in text
    assert "X is Y [^1]. Not a source [7]." in text
    assert "[^1]: [Paris - Wikipedia](https://en.wikipedia.org/wiki/Paris)" in text and "- r?" in text
    data = owner_client.get(reverse("search:export_thread", args=[entry.thread_id, "json"])).json()
    assert [e["question"] for e in data["entries"]] == ["What is X?", "And Z?"]
    assert owner_client.get(reverse("search:export_thread", args=[entry.thread_id, "exe"])).status_code == 404


def test_export_everything_and_import_it_back_skipping_what_is_there(owner_client, owner, member, client):
    make(owner, "first", answer="one [1]", sources=[WIKI])
    make(owner, "second", answer="two")
    archive = zipfile.ZipFile(io.BytesIO(downloaded(owner_client.get(reverse("search:export_all")))))
    names = archive.namelist()
    assert "history.json" in names and sum(n.endswith(".md") for n in names) == 2
    raw = archive.read("history.json")
    client.force_login(member)
    response = client.post(reverse("search:import"), {"file": io.BytesIO(raw)}, follow=True)
    assert "Imported 2 conversations." in response.content.decode()
    mine = Entry.objects.filter(thread__user=member)
    assert sorted(mine.values_list("question", flat=True)) == ["first", "second"]
    assert mine.get(question="first").sources == [WIKI]
    response = client.post(reverse("search:import"), {"file": io.BytesIO(raw)}, follow=True)
    assert "Imported 0 conversations. 2 were already here." in response.content.decode()
    zipped = downloaded(owner_client.get(reverse("search:export_all")))
    response = owner_client.post(reverse("search:import"), {"file": io.BytesIO(zipped)}, follow=True)
    assert "2 were already here" in response.content.decode()


@pytest.mark.parametrize(
    ("content", "sentence"),
    [
        (b"not json", "not valid JSON"),
        (b"[]", "not a pplxweb history export"),
        (
            json.dumps(
                {
                    "format": "pplxweb-history/1",
                    "threads": [
                        {"entries": [{"question": "ok", "created": "2026-01-01T00:00:00+00:00"}]},
                        {"entries": [{"question": ""}]},
                    ],
                }
            ).encode(),
            "no question",
        ),
        (
            json.dumps(
                {
                    "format": "pplxweb-history/1",
                    "threads": [{"entries": [{"question": "q", "created": "yesterday"}]}],
                }
            ).encode(),
            "not a date",
        ),
        (b"PK\x03\x04broken", "no history.json"),
    ],
)
def test_a_malformed_import_is_refused_whole(owner_client, owner, content, sentence):
    response = owner_client.post(reverse("search:import"), {"file": io.BytesIO(content)}, follow=True)
    assert sentence in response.content.decode()
    assert not Entry.objects.exists()


def test_suggestions_match_past_questions_with_their_age(owner_client, owner):
    make(owner, "How tall is the Eiffel tower?", days_ago=2)
    make(owner, "Unrelated thing")
    make(owner, "Eiffel tower opening hours", status="failed")
    html = owner_client.get(reverse("search:suggest"), {"q": "eiffel tow"}).content.decode()
    assert "How tall is the Eiffel tower?" in html and "2\xa0days ago" in html
    assert "opening hours" not in html  # only answered questions
    assert owner_client.get(reverse("search:suggest"), {"q": "ei"}).content.decode().strip() == ""
    assert owner_client.get(reverse("search:suggest"), {"q": '"(*'}).status_code == 200


def test_each_person_sees_only_their_own(client, owner, member):
    mine = make(owner, "owner secret", answer="classified")
    client.force_login(member)
    assert "owner secret" not in client.get(reverse("search:history")).content.decode()
    assert "owner secret" not in client.get(reverse("search:history"), {"q": "classified"}).content.decode()
    assert "owner secret" not in client.get(reverse("search:suggest"), {"q": "owner secret"}).content.decode()
    assert client.get(reverse("search:export_thread", args=[mine.thread_id, "md"])).status_code == 404
    assert client.get(reverse("search:export_thread", args=[mine.thread_id, "json"])).status_code == 404
    assert (
        "owner secret"
        not in zipfile.ZipFile(io.BytesIO(downloaded(client.get(reverse("search:export_all")))))
        .read("history.json")
        .decode()
    )
    client.post(reverse("search:delete"), {"entry": [mine.pk], "confirm": "1"})
    client.post(reverse("search:delete"), {"all": "1", "confirm": "1"})
    assert Entry.objects.filter(pk=mine.pk).exists()


def test_history_page_query_count_does_not_grow_with_rows(owner_client, owner):
    make(owner, "one")
    with CaptureQueriesContext(connection) as few:
        owner_client.get(reverse("search:history"))
    for i in range(40):
        make(owner, f"more {i}", sources=[WIKI])
    with CaptureQueriesContext(connection) as many:
        owner_client.get(reverse("search:history"))
    assert len(many) == len(few)
    with CaptureQueriesContext(connection) as searched:
        owner_client.get(reverse("search:history"), {"q": "more"})
    assert len(searched) <= len(few) + 2


def test_the_full_text_index_triggers_survive_every_migration():
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL searches a stored document column; no triggers to keep")
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'")
        names = set(cursor.fetchall())
    assert names == {
        ("search_entry_fts_insert", "search_entry"),
        ("search_entry_fts_update", "search_entry"),
        ("search_entry_fts_delete", "search_entry"),
        ("search_thread_title_fts", "search_thread"),  # a renamed conversation (migration 0016)
    }


def test_postgresql_searches_a_stored_document_with_its_index():
    """The document is a stored generated column with the GIN index on it (migration 0013): a
    common word's search neither matches nor ranks by computing every entry's to_tsvector."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite searches its FTS5 table")
    from django.contrib.auth import get_user_model

    from search.history import query

    user = get_user_model().objects.create_user("pgfts", password="x" * 12)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'search_entry_fts'")
        assert "gin (search_document)" in cursor.fetchone()[0]
    entry = make(user, "volcanoes", status="completed")
    Entry.objects.filter(pk=entry.pk).update(answer="Lava is molten rock.", report="Basalt flows.")
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_document::text FROM search_entry WHERE id = %s", [entry.pk])
        document = cursor.fetchone()[0]
    assert "'molten'" in document and "'basalt'" in document and "'volcanoes'" in document
    found = query.search(user, query.Filters(text="molten"))
    assert [e.pk for e, *_ in found] == [entry.pk]
    assert "<mark>molten</mark>" in str(found[0].excerpt)
    # the conversation's title is in the document (migration 0016), renamed or not
    Thread.objects.filter(pk=entry.thread_id).update(title="Iceland fire mountains")
    found = query.search(user, query.Filters(text="iceland"))
    assert [f.entry.pk for f in found] == [entry.pk]
    assert str(found[0].title) == "<mark>Iceland</mark> fire mountains"


def test_suggestions_find_an_old_question_behind_many_newer_ones(monkeypatch):
    """PostgreSQL looks at the newest entries first, then asks the question index (a word in no
    recent question must not read every entry, and must still find an old one)."""
    from django.contrib.auth import get_user_model

    from search.history import query

    monkeypatch.setattr(query, "CANDIDATES", 2)
    user = get_user_model().objects.create_user("suggest", password="x" * 12)
    old = make(user, "volcanoes of iceland")
    newer = [make(user, f"bread recipe {n}") for n in range(3)]
    assert [e.pk for e in query.suggestions(user, "volcan")] == [old.pk]
    assert [e.pk for e in query.suggestions(user, "bread rec")] == [e.pk for e in reversed(newer)]
    assert query.suggestions(user, "nowhere") == []
    imported = [make(user, f"volcanoes of chile {n}", days_ago=10 + n) for n in range(3)]  # newest first
    assert [e.pk for e in query.suggestions(user, "volcan")] == [old.pk, imported[0].pk, imported[1].pk]


def test_a_running_answer_is_indexed_once_it_settles():
    """Progress saves of a running answer leave the FTS index alone (work per save would grow
    with the answer); the final save, or the sweep's status-only change, indexes it."""
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL searches a stored document column; no triggers to keep")
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("fts", password="x" * 12)

    def indexed(entry) -> str:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT question || '|' || answer FROM search_entry_fts WHERE rowid = %s", [entry.pk]
            )
            return cursor.fetchone()[0]

    running = make(user, "volcanoes", status="running")
    Entry.objects.filter(pk=running.pk).update(answer="Lava is molten rock.")
    assert indexed(running) == "volcanoes|"
    Entry.objects.filter(pk=running.pk).update(answer="Lava is molten rock. Magma too.", status="completed")
    assert indexed(running) == "volcanoes|Lava is molten rock. Magma too."

    swept = make(user, "glaciers", status="running")
    Entry.objects.filter(pk=swept.pk).update(answer="Ice that moves.")
    Entry.objects.filter(pk=swept.pk).update(status="interrupted")
    assert indexed(swept) == "glaciers|Ice that moves."


def test_an_import_with_lone_surrogates_comes_in_with_them_replaced(owner):
    """JSON can carry "\\ud800"; PostgreSQL cannot store it (the import used to fail whole)."""
    from search.history.imports import import_history

    data = {"title": "t\ud800", "entries": [{"question": "q\udfff?", "created": "2026-01-02T03:04:05+00:00",
            "answer": "a\ud800", "sources": [{"title": "s\ud800", "url": "https://x.example"}]}]}  # fmt: skip
    assert import_history(owner, json.dumps(data).encode()) == (1, 0)
    entry = Entry.objects.get()
    assert (entry.question, entry.answer, entry.sources[0]["title"]) == ("q??", "a?", "s?")


def test_the_history_zip_is_sent_while_it_is_written(owner, monkeypatch):
    """A conversation at a time (READ_BATCH per query): memory does not grow with the history."""
    from search.history import export

    monkeypatch.setattr(export, "READ_BATCH", 2)
    monkeypatch.setattr(export, "SEND_SIZE", 1)
    for i in range(5):
        make(owner, f"question {i}", answer=f"answer {i}", days_ago=5 - i)
    parts = export.history_zip(owner)
    with CaptureQueriesContext(connection) as read:
        first = next(parts)
    # the catalogue (for model names, once), two threads, their entries and files, no more
    assert first.startswith(b"PK") and len(read) == 4
    archive = zipfile.ZipFile(io.BytesIO(first + b"".join(parts)))
    assert archive.testzip() is None
    assert sum(n.startswith("markdown/") for n in archive.namelist()) == 5
    raw = archive.read("history.json")
    listed = json.loads(raw)  # one JSON document...
    assert [t["entries"][0]["question"] for t in listed["threads"]] == [f"question {i}" for i in range(5)]
    lines = raw.decode().splitlines()  # ...with one conversation per line, as import reads it
    assert len(lines) == 7 and json.loads(lines[3].rstrip(","))["title"] == "question 2"


def test_an_import_of_any_size_is_read_a_conversation_at_a_time(owner, member, monkeypatch):
    from search.history import export, imports

    for i in range(5):
        make(owner, f"question {i}", answer="x" * 300, days_ago=5 - i)
    raw = zipfile.ZipFile(io.BytesIO(b"".join(export.history_zip(owner)))).read("history.json")
    monkeypatch.setattr(imports, "MAX_IMPORT", 1000)  # each conversation fits, the file does not
    monkeypatch.setattr(imports, "WRITE_BATCH", 2)  # three transactions
    assert len(raw) > 3000
    assert imports.import_history(member, raw) == (5, 0)
    originals = Entry.objects.filter(user=owner).order_by("created")
    copies = Entry.objects.filter(user=member).order_by("created")
    assert [(e.question, e.created) for e in copies] == [(e.question, e.created) for e in originals]
    assert [e.thread.created for e in copies] == [e.created for e in originals]
    assert [e.thread.updated for e in copies] == [e.created for e in originals]  # one entry each
    assert imports.import_history(member, raw) == (0, 5)

    # the same file laid out another way must fit in MAX_IMPORT whole
    indented = json.dumps(json.loads(raw), indent=1).encode()
    with pytest.raises(imports.ImportRefused, match="larger than 8 MB and not laid out as pplxweb"):
        imports.import_history(member, indented)
    # one conversation too large
    monkeypatch.setattr(imports, "MAX_IMPORT", 200)
    with pytest.raises(imports.ImportRefused, match="A conversation in that file is larger than 8 MB"):
        imports.import_history(member, raw)
    # a file cut short
    monkeypatch.setattr(imports, "MAX_IMPORT", 1000)
    with pytest.raises(imports.ImportRefused, match="ends before its last conversation"):
        imports.import_history(member, raw[: raw.rindex(b"\n]}")])


def test_a_refusal_late_in_a_large_import_takes_back_what_was_written(owner, member, monkeypatch):
    from search.history import export, imports

    monkeypatch.setattr(imports, "WRITE_BATCH", 1)
    for i in range(4):
        make(owner, f"question {i}", days_ago=4 - i)
    raw = zipfile.ZipFile(io.BytesIO(b"".join(export.history_zip(owner)))).read("history.json")
    lines = raw.split(b"\n")
    lines[4] = b'{"entries": [{"question": "late", "created": "not a date"}]}'  # the last conversation
    with pytest.raises(imports.ImportRefused, match="not a date"):
        imports.import_history(member, b"\n".join(lines))
    assert not Entry.objects.filter(user=member).exists() and not Thread.objects.filter(user=member).exists()


def test_excerpts_show_an_answers_words_not_its_markdown(owner_client, owner):
    make(
        owner,
        "capital?",
        answer="## Paris\n\nParis is the **capital** of [France](https://x.example) [1].\n\n- `Seine`",
    )
    page = owner_client.get(reverse("search:history")).content.decode()
    assert "Paris Paris is the capital of France. Seine" in page
    found = owner_client.get(reverse("search:history"), {"q": "capital"}).content.decode()
    assert "is the <mark>capital</mark> of France." in found and "**" not in found and "[1]" not in found


def test_an_excerpt_of_a_table_keeps_its_cells_and_rows_apart(owner_client, owner):
    make(
        owner,
        "loaf?",
        answer="Per loaf:\n\n| Ingredient | Grams |\n|---|---:|\n| Flour | 500 |\n| Water | 350 |",
    )
    page = owner_client.get(reverse("search:history")).content.decode()
    assert "Per loaf: Ingredient · Grams; Flour · 500; Water · 350;" in page
    found = owner_client.get(reverse("search:history"), {"q": "water"}).content.decode()
    excerpt = found.split('class="excerpt"')[1].split("</p>")[0]
    assert "<mark>Water</mark>" in excerpt and "Flour · 500;" in excerpt and "|" not in excerpt


def conversation(user, token: str, *answers: tuple[str, str]) -> list[Entry]:
    """A thread on Perplexity (its token) with answers (Perplexity's id, credential asked with)."""
    thread = Thread.objects.create(user=user, title=token, read_write_token=token)
    return [
        Entry.objects.create(
            thread=thread, question=f"q {uuid}", status="completed", backend_uuid=uuid, credential=kind
        )
        for uuid, kind in answers
    ]


def test_deleting_can_delete_the_conversations_on_perplexity_too(owner_client, owner, linked, upstream):
    from tests.search.conftest import TOKEN

    whole = conversation(owner, "tok-a", ("a1", "session"), ("a2", "session"))
    single = conversation(owner, "tok-b", ("b1", "session"))
    by_key = conversation(owner, "", ("", "api_key"))  # the API path made no thread there
    half = conversation(owner, "tok-d", ("d1", "session"), ("d2", "session"))
    chosen = [e.pk for e in (*whole, *single, *by_key, half[1])]
    route = upstream.delete("/rest/thread/delete_thread_by_entry_uuid").respond(json={"status": "success"})

    page = owner_client.get(reverse("search:delete"), {"entry": chosen}).content.decode()
    assert "Also delete these conversations on Perplexity" in page  # three are there
    spare = conversation(owner, "tok-s", ("s1", "session"))
    owner_client.post(reverse("search:delete"), {"entry": [spare[0].pk], "confirm": "1"})  # not asked for
    assert not route.called and not Entry.objects.filter(pk=spare[0].pk).exists()
    response = owner_client.post(
        reverse("search:delete"), {"entry": chosen, "confirm": "1", "upstream": "1"}, follow=True
    )
    page = response.content.decode()
    assert "Deleted 5 entries. 2 of the 2 conversations were deleted on Perplexity too." in page
    sent = [json.loads(call.request.content) for call in route.calls]
    assert sorted(sent, key=str) == [
        {"entry_uuid": "a1", "read_write_token": "tok-a"},
        {"entry_uuid": "b1", "read_write_token": "tok-b"},
    ]  # the half-deleted conversation stays there (and here: d1)
    for call in route.calls:
        assert TOKEN in call.request.headers["cookie"] and "authorization" not in call.request.headers
    assert list(Entry.objects.values_list("backend_uuid", flat=True)) == ["d1"]
    assert TOKEN not in page


def test_what_perplexity_refuses_to_delete_is_said_and_nothing_is_kept_here(
    owner_client, owner, linked, upstream
):
    first = conversation(owner, "tok-1", ("e1", "session"))
    second = conversation(owner, "tok-2", ("e2", "session"))
    gone = conversation(owner, "tok-3", ("e3", "session"))
    upstream.delete("/rest/thread/delete_thread_by_entry_uuid").mock(
        side_effect=lambda request: httpx.Response(
            {"e1": 500, "e2": 200, "e3": 404}[json.loads(request.content)["entry_uuid"]], json={}
        )
    )
    chosen = [e.pk for e in (*first, *second, *gone)]
    response = owner_client.post(
        reverse("search:delete"), {"entry": chosen, "confirm": "1", "upstream": "1"}, follow=True
    )
    page = response.content.decode()
    assert (
        "Deleted 3 entries. 2 of the 3 conversations were deleted on Perplexity too. "
        "The others were not: Perplexity had a server error (500). Try again in a moment." in page
    )  # a 404 is one already gone there
    assert not Entry.objects.exists() and not Thread.objects.exists()


def test_a_members_conversation_asked_with_the_shared_link_is_deleted_with_the_owners_session(
    client, owner, member, linked, upstream
):
    from tests.search.conftest import TOKEN

    linked.shared = True
    linked.save()
    mine = conversation(member, "tok-m", ("m1", "shared"))
    route = upstream.delete("/rest/thread/delete_thread_by_entry_uuid").respond(json={"status": "success"})
    client.force_login(member)
    response = client.post(
        reverse("search:delete"), {"entry": [mine[0].pk], "confirm": "1", "upstream": "1"}, follow=True
    )
    assert "Deleted 1 entry. It was deleted on Perplexity too." in response.content.decode()
    assert TOKEN in route.calls.last.request.headers["cookie"]

    upstream.delete("/rest/thread/delete_thread_by_entry_uuid").respond(401, json={})  # the session died
    dead = conversation(member, "tok-d", ("d1", "shared"))
    response = client.post(
        reverse("search:delete"), {"entry": [dead[0].pk], "confirm": "1", "upstream": "1"}, follow=True
    )
    assert (
        "It was not deleted on Perplexity: Perplexity did not accept the linked session."
        in response.content.decode()
    )
    linked.refresh_from_db()
    assert linked.status == "needs_attention"  # as after a search that met the same

    linked.shared = False  # no longer shared: there is nothing to send it with
    linked.save()
    again = conversation(member, "tok-n", ("n1", "shared"))
    response = client.post(
        reverse("search:delete"), {"entry": [again[0].pk], "confirm": "1", "upstream": "1"}, follow=True
    )
    page = response.content.decode()
    assert (
        "It was not deleted on Perplexity: The Perplexity account it was asked with is no longer linked"
        in page
    )
    assert route.call_count == 2 and not Entry.objects.exists()  # the unlinked one was not sent


def test_too_many_conversations_for_perplexity_are_not_offered_and_a_forged_ask_deletes_nothing(
    owner_client, owner, linked, upstream, monkeypatch
):
    from search.history import forget

    monkeypatch.setattr(forget, "MAX", 1)
    chosen = [conversation(owner, f"tok-{i}", (f"x{i}", "session"))[0].pk for i in range(2)]
    page = owner_client.get(reverse("search:delete"), {"entry": chosen}).content.decode()
    assert 'name="upstream"' not in page and "2 of these conversations are on Perplexity" in page
    response = owner_client.post(
        reverse("search:delete"), {"entry": chosen, "confirm": "1", "upstream": "1"}, follow=True
    )
    assert "nothing was deleted" in response.content.decode() and Entry.objects.count() == 2


def test_an_import_with_odd_values_comes_in_shaped_and_every_page_shows_it(owner_client, owner):
    from search.history import import_entries
    from search.history.imports import import_history

    data = {"title": "t", "entries": [{"question": "odd?", "created": "2026-01-02T03:04:05+00:00", "answer": "a [1]", "status": "running",
            "sources": ["x", 5, {"url": 7, "title": ["t"]}, {"url": "javascript:alert(1)", "title": "js"}, None],
            "related": [1, {"a": 2}, "fine?"], "steps": ["s", {"kind": 3, "text": "step"}], "options": [1]}]}  # fmt: skip
    assert import_history(owner, json.dumps(data).encode()) == (
        1,
        0,
    )  # was: "malformed JSON" from the database
    entry = Entry.objects.get()
    assert entry.sources == [
        {"title": "", "url": "", "snippet": "", "date": ""},
        {"title": "js", "url": "javascript:alert(1)", "snippet": "", "date": ""},
    ]
    assert (entry.related, entry.steps, entry.options) == (["fine?"], [{"kind": "", "text": "step"}], {})
    assert (entry.status, entry.error) == ("interrupted", import_entries.STILL_ARRIVING)  # not running here
    for path in (
        reverse("search:thread", args=[entry.thread_id]),
        reverse("search:history"),
        reverse("search:history") + "?q=odd",
        reverse("search:history") + "?domain=example.org",
        reverse("search:home") + f"?again={entry.pk}",
    ):
        response = owner_client.get(path)
        assert response.status_code == 200 and b"javascript:" not in response.content, path


def test_history_is_in_the_order_things_were_asked_and_pages_lose_nothing(owner_client, owner):
    """An answer imported later but asked earlier takes its place in time; the cursor keeps
    entries asked at the same moment (a bulk import) apart by id."""
    make(owner, "asked today")
    make(owner, "asked three days ago, imported since", days_ago=3)
    page = owner_client.get(reverse("search:history")).content.decode()
    assert page.index("asked today") < page.index("asked three days ago")
    moment = timezone.now() - timedelta(days=1)
    for i in range(5):
        Entry.objects.filter(pk=make(owner, f"same moment {i}").pk).update(created=moment)
    seen, before = [], None
    for _ in range(6):
        params = {"size": 2, **({"before_id": before} if before else {})}
        response = owner_client.get(reverse("search:history"), params)
        seen += [e.question for e in response.context["rows"]]
        before = response.context["next_cursor"]
        if before is None:
            break
    assert seen == [
        "asked today",
        *(f"same moment {i}" for i in (4, 3, 2, 1, 0)),
        "asked three days ago, imported since",
    ]


def test_a_research_report_is_exported_found_and_imported_back(owner, member, owner_client):
    from search.history import export, imports
    from search.history import query as history

    entry = make(owner, "nowcasting", answer="I've compiled a report.")
    Entry.objects.filter(pk=entry.pk).update(
        report="# Nowcasting\n\n## Radar\n\nEchoes extrapolated minute by minute."
    )
    entry.refresh_from_db()
    markdown = export.thread_markdown(entry.thread)
    assert "### Research report" in markdown and "#### Nowcasting" in markdown and "##### Radar" in markdown
    assert [e.pk for e, *_ in history.search(owner, history.Filters(text="extrapolated"))] == [entry.pk]
    raw = zipfile.ZipFile(io.BytesIO(b"".join(export.history_zip(owner)))).read("history.json")
    assert imports.import_history(member, raw) == (1, 0)
    copy = Entry.objects.get(user=member)
    assert copy.report == entry.report and copy.answer == entry.answer
    assert [e.pk for e, *_ in history.search(member, history.Filters(text="extrapolated"))] == [copy.pk]


def test_the_models_used_are_found_by_one_index_seek_each(owner, member):
    from search.history.query import models_used

    for n in range(30):
        make(owner, f"q{n}", model=["gpt52", "turbo", "", "pplx_pro"][n % 4])
    make(member, "theirs", model="claude48opusthinking")
    with CaptureQueriesContext(connection) as queries:
        assert models_used(owner) == ["gpt52", "pplx_pro", "turbo"]
    assert len(queries) == 5  # the first id (""), then each next one, then none
    assert "LIMIT 1" in queries[1]["sql"] and "DISTINCT" not in queries[1]["sql"]
