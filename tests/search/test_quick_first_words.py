"""An answer whose first words came within 50 ms still offers Retry when it was cut short, and
says how quickly they came ("0.0 s" read as no words at all, and hid Retry)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from search.display import duration
from search.models import Entry, Thread

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("first_ms", [0, 30, 49])
def test_a_cut_short_answer_whose_first_words_came_at_once_offers_retry(owner_client, owner, first_ms):
    thread = Thread.objects.create(user=owner, title="quick")
    Entry.objects.create(
        thread=thread, question="quick", answer="The first half", status="truncated",
        error="Perplexity's stream ended early.", first_text_ms=first_ms, done_ms=1200,
    )  # fmt: skip
    page = owner_client.get(reverse("search:thread", args=[thread.pk])).content.decode()
    assert "The answer stopped here: Perplexity&#x27;s stream ended early." in page
    assert ">Retry</button>" in page
    assert f"in 1.2\xa0s (first words after {first_ms}\xa0ms)" in page


def test_durations_read_as_a_person_says_them():
    assert [duration(ms) for ms in (None, 0, 40, 99, 100, 4240)] == [
        None, "0\xa0ms", "40\xa0ms", "99\xa0ms", "0.1\xa0s", "4.2\xa0s",
    ]  # fmt: skip
