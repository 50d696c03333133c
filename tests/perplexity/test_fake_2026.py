"""The fake speaks the late-2026 streams (docs/protocol.md §6.3, §8), read through pplxweb's own client
in-process: a Deep Research run with a clarifying question answered, a thinking model, quick
mode's turbo, the bare error frame and the empty stream; and which block carries the answer
in each mode the fake serves."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import ProtocolError, RunGone
from pplxweb.perplexity.extract import ANSWER_USAGES, extract
from pplxweb.perplexity.request import AskOptions, AskRequest
from tests.fake_perplexity import app as fake
from tests.fake_perplexity import streams_2026 as s26

BASE = "https://fake.perplexity.test"
COOKIES = {jar.SESSION_COOKIE: fake.TOKEN}


@pytest.fixture(autouse=True)
def fresh_fake():
    fake.state.update({"ask": {"pace": 0}, "signin": {}, "requests": [], "answered": None})
    yield
    fake.state.update({"ask": {}, "signin": {}, "requests": [], "answered": None})


def client() -> PerplexityClient:
    return PerplexityClient(BASE, BASE, transport=httpx.ASGITransport(app=fake.application), cookies=COOKIES)


async def ask(plan: dict, options: AskOptions | None = None, on_snapshot=None):
    fake.state["ask"] = {"pace": 0, **plan}
    async with client() as c:
        stream = c.ask(AskRequest("q", options or AskOptions()))
        async with stream:
            async for snapshot in stream:
                if on_snapshot is not None:
                    await on_snapshot(c, snapshot)
        return extract(stream.snapshot, ended=stream.ended), stream


async def test_a_research_run_from_the_fake_gives_the_report_and_the_cover_note():
    result, stream = await ask({"stream": "research", "report_kb": 15, "replaces": 200})
    assert result.status == "completed" and result.research
    assert result.answer == "".join(s26.COVER)
    assert result.report == s26.report_text(15_000) and len(result.report) == 15_000
    assert any(s.kind == "note" for s in result.steps)
    assert stream.snapshot.blocks["unified_assets"].kind == "unified_assets_block"


async def test_a_clarifying_question_holds_the_research_until_it_is_answered():
    """httpx's ASGI transport hands over a body once the app has sent it all, so the answer goes
    from a second client while the first waits (the question's extraction: test_extract_2026)."""
    plan = {"stream": "research", "report_kb": 2, "replaces": 5, "question": True, "question_wait": 30}
    asking = asyncio.create_task(ask(plan))
    await asyncio.sleep(0.5)
    assert not asking.done()  # held at the question
    async with client() as c:
        await c.answer_question(s26.QUESTION_TOOL, [(s26.QUESTION["question_text"], "Europe")])
    result, _ = await asyncio.wait_for(asking, 10)
    assert result.status == "completed" and result.report
    answered = [r for r in fake.state["requests"] if r["path"].endswith("clarifying_answers")]
    assert json.loads(answered[0]["body"]) == {
        "result": {
            "tool_uuid": s26.QUESTION_TOOL,
            "answers": [{"question": s26.QUESTION["question_text"], "answer": "Europe"}],
            "submit_type": "USER_SUBMITTED",
        }
    }


async def test_an_unanswered_question_lets_the_run_go_on_after_its_countdown():
    result, _ = await asyncio.wait_for(
        ask({"stream": "research", "report_kb": 1, "replaces": 2, "question": True, "question_wait": 0.3}), 10
    )
    assert result.status == "completed" and result.report


async def test_the_thinking_stream_ends_with_the_terminal_answer_and_no_upsell():
    result, _ = await ask({"stream": "thinking"})
    assert result.answer == s26.THINKING_FINAL
    assert result.related == ["How long should sourdough proof?"]


async def test_the_error_frame_and_the_empty_stream_from_the_fake():
    result, stream = await ask({"stream": "error_frame"})
    assert result.status == "failed" and result.answer == "" and stream.retried
    with pytest.raises(ProtocolError, match="sent nothing"):
        await ask({"stream": "empty"})


@pytest.mark.parametrize(
    ("plan", "options", "carrier"),
    [
        ({}, AskOptions(), "ask_text"),  # Pro search: ask_text markdown
        ({"stream": "turbo"}, AskOptions(mode="auto"), "ask_text"),
        (
            {"fixture": "smdex__cli-test__ASK1_SSE.from-fixtures-ts.sse"},
            AskOptions(mode="auto"),
            "workflow_root",
        ),
        ({"stream": "research"}, AskOptions(mode="research"), "ask_text_0_markdown"),
        ({"stream": "thinking"}, AskOptions(model="claude48opusthinking"), "ask_text"),
    ],
)
async def test_the_block_that_carries_the_answer_in_each_mode(plan, options, carrier):
    result, stream = await ask(plan, options)
    assert result.answer
    snapshot = stream.snapshot
    answer_blocks = [u for u in snapshot.block_order if ANSWER_USAGES.match(u)]
    if carrier == "workflow_root":
        assert not answer_blocks and snapshot.blocks["workflow_root"].kind == "workflow_block"
    else:
        assert carrier in answer_blocks
        assert snapshot.markdown(carrier) == result.answer
    sent = json.loads(fake.state["requests"][-1]["body"])["params"]["supported_block_use_cases"]
    assert {"workflow_steps", "unified_assets", "prediction_market_widgets", "flight_status_widgets"} <= set(
        sent
    )


async def test_a_run_is_rejoined_from_the_fake_finished_or_gone():
    fake.state["ask"] = {"pace": 0.01, "answer": ["Hello ", "rejoined ", "world"]}
    async with client() as c:
        stream = c.ask(AskRequest("q"))
        async with stream:
            async for _ in stream:
                pass
        uuid = extract(stream.snapshot).backend_uuid
        assert uuid.startswith("fake-run-")
        rejoined = c.rejoin(AskRequest("q"), uuid)
        async with rejoined:
            async for _ in rejoined:
                pass
        result = extract(rejoined.snapshot, ended=rejoined.ended)
        assert result.status == "completed" and result.answer == "Hello rejoined world"
        with pytest.raises(RunGone):
            async with c.rejoin(AskRequest("q"), "fake-run-999") as gone:
                async for _ in gone:
                    pass
