"""Numbered updates: every update of a running answer carries its number, a newcomer gets the
whole state as of a number and the next updates apply to it, and a page that missed one asks for
the whole state (`catch_up`). A page is modelled here as static/pplxweb.js keeps it: it takes
update N only right after N-1."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from search.models import Entry
from tests.search.conftest import Paced, answer_stream, serve, words
from tests.search.test_consumer import connect, receive_until

pytestmark = pytest.mark.django_db(transaction=True)
MARK = re.compile(r"^<!--pplxweb:seq (\d+) (\d+)(?: (full|saved))?-->")


class Page:
    """What a page does with the messages of one entry: the numbers it takes, the blocks it
    appends, the answer it replaces."""

    def __init__(self) -> None:
        self.shown: int | None = None
        self.answer = ""  # the answer's blocks as the page holds them
        self.gaps = 0

    def take(self, message: str) -> None:
        found = MARK.match(message)
        if not found:
            return
        seq, kind = int(found[2]), found[3]
        if kind == "saved":
            self.shown = None
        elif kind == "full" or (self.shown is not None and seq == self.shown + 1):
            self.shown = seq
        else:
            self.gaps += 1
            return
        whole = re.search(r'id="entry-\d+-blocks">(.*?)</div><div id="entry-\d+-tail"', message, re.S)
        if whole:
            self.answer = whole[1]
        for appended in re.findall(r'-blocks" hx-swap-oob="beforeend">(.*?)</div>', message, re.S):
            self.answer += appended


async def test_updates_are_numbered_one_after_another_from_the_new_entry(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(30)), pause=0.005))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "numbered"}))
    messages = await receive_until(comm, "status-completed")
    await comm.disconnect()
    marks = [MARK.match(m) for m in messages]
    assert all(marks), "every message of the entry opens with its number"
    assert marks[0].group(2, 3) == ("0", "full")  # the new entry: state 0
    assert [int(m[2]) for m in marks] == list(range(len(marks)))
    page = Page()
    for message in messages:
        page.take(message)
    assert page.gaps == 0
    assert all(page.answer.count(f"word{i}</p>") + page.answer.count(f"word{i} ") <= 1 for i in range(30))


async def test_a_newcomer_mid_answer_gets_the_whole_state_and_nobody_loses_text(owner, alinked, upstream):
    """The second tab joins while the answer streams: it gets the state the first tab has, then
    the same updates; the first tab's answer is whole and holds every word once."""
    paragraphs = [f"word{i}" + ("\n\n" if i % 3 == 2 else " ") for i in range(60)]
    serve(upstream, Paced(answer_stream(paragraphs), pause=0.01))
    first = await connect(owner)
    await first.send_to(text_data=json.dumps({"q": "two tabs"}))
    seen_first = await receive_until(first, "word20")
    entry = await Entry.objects.aget()
    second = await connect(owner, f"/ws/search/?thread={entry.thread_id}")
    seen_second = await receive_until(second, "status-completed", timeout=10)
    seen_first += await receive_until(first, "status-completed", timeout=10)
    await first.disconnect()
    await second.disconnect()
    for messages in (seen_first, seen_second):
        page = Page()
        for message in messages:
            page.take(message)
        assert page.gaps == 0
        for i in range(60):
            assert len(re.findall(rf"\bword{i}\b", page.answer)) == 1, (i, page.answer[-600:])


async def test_a_page_that_missed_an_update_asks_and_gets_the_whole_state(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(200)), pause=0.01))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "catch me up"}))
    await receive_until(comm, "word5")
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "catch_up", "entries": [entry.pk, "x", 10**30]}))
    messages = await receive_until(comm, " full-->")
    whole = next(m for m in messages if " full-->" in m)
    assert MARK.match(whole)[1] == str(entry.pk)
    assert f'id="entry-{entry.pk}-answer"' in whole and "word5" in whole
    await receive_until(comm, "status-completed", timeout=10)
    await comm.send_to(text_data=json.dumps({"action": "catch_up", "entries": [entry.pk]}))
    saved = await comm.receive_from(timeout=5)  # ended: as the database has it
    assert MARK.match(saved)[3] == "saved" and "status-completed" in saved and "word199" in saved
    await comm.disconnect()


async def test_catch_up_is_for_the_persons_own_answers_only(owner, member, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(60)), pause=0.02))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "mine"}))
    await receive_until(comm, "word3")
    entry = await Entry.objects.aget()
    other = await connect(member)
    await other.send_to(text_data=json.dumps({"action": "catch_up", "entries": [entry.pk]}))
    assert await other.receive_nothing(timeout=0.5)
    await other.disconnect()
    await receive_until(comm, "status-completed", timeout=10)
    await comm.disconnect()
    await asyncio.sleep(0)


async def test_an_update_too_large_for_a_page_says_to_reload_instead():
    """An update over the 1 MB a page takes live (a huge answer rendered whole) goes out as a line
    saying to reload, numbered as the update was, so the page's numbering goes on; a message with
    no number (a sentence) is replaced by the same sentence alone."""
    from search.live.consumers import MAX_LIVE, TOO_LONG_TEXT, SearchConsumer

    sent = []

    async def base_send(message):
        sent.append(message["text"])

    consumer = SearchConsumer()
    consumer.base_send, consumer.channel_name = base_send, "specific.test"
    huge = (
        "<!--pplxweb:seq 7 12-->"
        + '<div id="entry-7-blocks" hx-swap-oob="beforeend">'
        + "w " * MAX_LIVE
        + "</div>"
    )
    await consumer.entry_fragment({"type": "entry.fragment", "html": huge})
    await consumer.send(text_data="<p>" + "x" * MAX_LIVE + "</p>")
    small = "<!--pplxweb:seq 7 13--><p>fits</p>"
    await consumer.entry_fragment({"type": "entry.fragment", "html": small})
    told, plain, kept = sent
    assert (
        len(told) < 2048 and TOO_LONG_TEXT in told and MARK.match(told).group(1, 2, 3) == ("7", "12", "full")
    )
    assert 'id="entry-7-answer"' in told and 'id="entry-7-blocks"' in told  # later updates still apply
    assert TOO_LONG_TEXT in plain and len(plain) < 2048
    assert kept == small
    page = Page()
    for message in (small.replace(" 13-->", " 11 full-->"), told, small):
        page.take(message)
    assert page.gaps == 0 and page.shown == 13
