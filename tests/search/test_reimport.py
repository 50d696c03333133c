"""Importing an export again after deleting part of it puts back what was deleted, into the
conversation it was in, and duplicates nothing (the whole conversation came in again when its
first answer had been deleted)."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.urls import reverse

from search.history import export, import_jobs, imports
from search.models import Entry, ImportJob, Thread
from tests.search.test_history import make

pytestmark = pytest.mark.django_db


def exported(user) -> bytes:
    return zipfile.ZipFile(io.BytesIO(b"".join(export.history_zip(user)))).read("history.json")


def conversation(owner, *questions: str) -> list[Entry]:
    thread = Thread.objects.create(user=owner, title=questions[0])
    return [
        make(owner, q, answer=f"about {q}", thread=thread, days_ago=9 - n) for n, q in enumerate(questions)
    ]


@pytest.mark.parametrize("deleted", [0, 1, 2], ids=["first", "middle", "last"])
def test_a_deleted_answer_comes_back_into_its_conversation_and_nothing_twice(owner_client, owner, deleted):
    turns = conversation(owner, "Why does bread rise?", "And rye bread?", "And sourdough?")
    other = conversation(owner, "Another conversation")
    saved = exported(owner)
    owner_client.post(reverse("search:delete"), {"entry": turns[deleted].pk, "confirm": "1"})
    assert imports.import_history(owner, saved) == (1, 1)  # one put back into, one already here
    thread = Thread.objects.get(pk=turns[0].thread_id if deleted else turns[1].thread_id)
    assert list(thread.entries.values_list("question", flat=True)) == [t.question for t in turns]
    assert Thread.objects.count() == 2 and Entry.objects.count() == 4
    assert Entry.objects.get(question=turns[deleted].question).answer == f"about {turns[deleted].question}"
    assert other[0].thread.entries.count() == 1
    assert imports.import_history(owner, saved) == (0, 2)  # and again: all here


def test_an_answer_put_back_is_taken_out_again_if_the_import_is_cut_short(owner, monkeypatch):
    turns = conversation(owner, "Why does bread rise?", "And rye bread?")
    saved = exported(owner)
    Entry.objects.filter(pk=turns[1].pk).delete()
    lines = saved.split(b"\n")
    lines.insert(2, b'{"entries": [{"question": "late", "created": "not a date"}]},')  # after the first
    monkeypatch.setattr(imports, "WRITE_BATCH", 1)
    with pytest.raises(imports.ImportRefused, match="not a date"):
        imports.import_history(owner, b"\n".join(lines))
    assert list(Entry.objects.values_list("question", flat=True)) == ["Why does bread rise?"]
    assert not ImportJob.objects.exists()


def test_the_import_page_says_what_came_back(owner_client, owner):
    turns = conversation(owner, "Why does bread rise?", "And rye bread?")
    saved = exported(owner)
    Entry.objects.filter(pk=turns[0].pk).delete()
    response = owner_client.post(reverse("search:import"), {"file": io.BytesIO(saved)}, follow=True)
    assert "Imported 1 conversation." in response.content.decode()
    assert Entry.objects.filter(question="Why does bread rise?", thread=turns[1].thread_id).exists()
    assert import_jobs.told(owner) == []
