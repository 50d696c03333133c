"""Deep Research and the other late-2026 streams through the live socket (docs/protocol.md §6.3, §8): the
report shown while it grows and saved, the clarifying question answered from the page, the
error frame, an answer format pplxweb does not know."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from search.models import Entry
from tests.fake_perplexity import streams_2026 as s26
from tests.search.conftest import SSE, HeldAt, Paced, answer_stream, serve
from tests.search.test_consumer import ask, connect, receive_until

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_research_report_is_shown_while_it_grows_and_saved_with_the_cover_note(
    owner, alinked, upstream
):
    report = s26.report_text(15_000)
    events = s26.research_events(report, replaces=300)
    serve(upstream, Paced(events, pause=0.005))
    messages = await ask(owner, {"q": "nowcasting APIs", "mode": "research"}, "status-completed", timeout=20)
    reports = [m for m in messages if 'id="entry-' in m and '-report"' in m and "Executive Summary" in m]
    assert 2 <= len(reports) <= 12  # a throttled handful, never one per replace (300)
    assert len(reports[0]) < len(reports[-1])  # it grew on the page
    entry = await Entry.objects.aget()
    assert entry.status == "completed"
    assert entry.answer == "".join(s26.COVER) and entry.report == report
    assert s26.INSIGHTS[0] not in entry.answer
    assert any(step["kind"] == "note" for step in entry.steps)
    assert entry.backend_uuid == "fake-r-1" and entry.context_uuid == "fake-rc"


async def test_a_clarifying_question_is_answered_from_the_page(owner, alinked, upstream):
    events = s26.research_events(s26.report_text(1_000), replaces=3, question=s26.QUESTIONS)
    held = events.index(next(e for e in events if "RESEARCH_CLARIFYING_QUESTIONS" in json.dumps(e)))
    answered = asyncio.Event()
    serve(upstream, HeldAt(events, held, answered))

    def on_answer(request):
        answered.set()
        return httpx.Response(200, json={"status": "ok"})

    route = upstream.post("/rest/sse/handle_perplexity_research_clarifying_answers").mock(
        side_effect=on_answer
    )
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "nowcasting", "mode": "research"}))
    messages = await receive_until(comm, "clarify-form")
    assert "Which region matters most to you?" in messages[-1] and 'data-seconds="60"' in messages[-1]
    entry = await Entry.objects.aget()
    await comm.send_to(
        text_data=json.dumps(
            {
                "action": "clarify",
                "entry": str(entry.pk),
                "answer-0": ["Europe", ""],
                "answer-1": ["", "A memo"],
            }
        )
    )
    messages = await receive_until(comm, "status-completed", 10)
    await comm.disconnect()
    body = json.loads(route.calls.last.request.content)
    assert body["result"]["answers"] == [
        {"question": s26.QUESTION["question_text"], "answer": "Europe"},
        {"question": "Preferred output format?", "answer": "A memo"},
    ]
    assert body["result"]["tool_uuid"] == s26.QUESTION_TOOL
    assert any(f'id="entry-{entry.pk}-question"' in m and "clarify-form" not in m for m in messages)
    # kept with the entry, as the page shows it once answered
    assert any("2 questions before researching · answered" in m for m in messages)
    await entry.arefresh_from_db()
    [record] = entry.clarifications
    assert record["outcome"] == "answered" and record["key"] == s26.QUESTION_TOOL
    assert [(q["question"], q["answer"]) for q in record["questions"]] == [
        (s26.QUESTION["question_text"], "Europe"),
        ("Preferred output format?", "A memo"),
    ]


async def test_answering_with_nothing_says_what_to_do(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(["x"]), pause=0.2))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "x"}))
    await receive_until(comm, "entries")
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "clarify", "entry": str(entry.pk), "answer-0": "  "}))
    messages = await receive_until(comm, "Choose an option")
    await receive_until(comm, "status-completed", 10)
    await comm.disconnect()
    assert messages


async def test_the_bare_error_frame_fails_with_a_sentence_after_one_retry(owner, alinked, upstream):
    error = httpx.Response(
        200, headers=SSE, content=b'event: message\r\ndata: {"text": "Error in processing query."}\r\n\r\n'
    )
    route = serve(upstream, error, error)
    joined = "".join(await ask(owner, {"q": "x"}, "status-failed"))
    assert "could not process this question" in joined
    entry = await Entry.objects.aget()
    assert entry.status == "failed" and entry.answer == "" and route.call_count == 2


async def test_an_unknown_answer_format_fails_instead_of_saving_a_blank_answer(owner, alinked, upstream):
    events = [
        {"backend_uuid": "b", "status": "PENDING"},
        {
            "status": "PENDING",
            "blocks": [{"intended_usage": "brand_new_answer", "novel_block": {"text": "hi"}}],
        },
        {"status": "COMPLETED", "final": True, "brand_new_field": 1},
    ]
    serve(upstream, Paced(events))
    joined = "".join(await ask(owner, {"q": "x"}, "status-failed"))
    assert "answer format changed" in joined
    entry = await Entry.objects.aget()
    assert entry.status == "failed"
    assert entry.drift == {
        "usages": ["brand_new_answer"],
        "kinds": ["novel_block"],
        "fields": ["brand_new_field"],
    }


async def test_the_terminal_answer_corrects_the_page_and_the_saved_answer(owner, alinked, upstream):
    serve(upstream, Paced(s26.thinking_events(), pause=0.05))
    messages = await ask(owner, {"q": "sourdough"}, "status-completed")
    streamed = next(i for i, m in enumerate(messages) if "most bakers agree" in m)
    corrected = [m for m in messages[streamed + 1 :] if "-answer" in m and "hx-swap-oob" in m]
    assert corrected and "most bakers agree" not in corrected[-1]  # the whole answer again, as it ended
    entry = await Entry.objects.aget()
    assert entry.answer == s26.THINKING_FINAL and len(entry.sources) == 9
    assert entry.related == ["How long should sourdough proof?"]
