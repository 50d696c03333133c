"""Extraction of the late-2026 streams (docs/protocol.md §6, §8): Deep Research reports, the
terminal answer winning, frames that are not answers, the downgrade signal."""

from __future__ import annotations

import json

import pytest

from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.merge import merge, merge_all
from pplxweb.perplexity.research import REPORT_LIMIT, SKIP_SECONDS_MAX
from tests.fake_perplexity import streams_2026 as s26
from tests.perplexity.streams import answer_stream


def run(events, ended=True, asked=""):
    return extract(merge_all(events), ended=ended, asked=asked)


def test_research_report_is_extracted_whole_and_the_cover_note_is_the_answer():
    report = s26.report_text(15_000)
    r = run(s26.research_events(report, replaces=30))
    assert r.status == "completed" and r.research
    assert r.answer == "".join(s26.COVER)  # the cover note, without the Insights
    assert r.report == report
    assert "Insights" not in r.answer and s26.INSIGHTS[0] not in r.answer
    assert [s.url for s in r.sources][:3] == [x["url"] for x in s26.SOURCES]


def test_research_report_grows_while_the_run_goes_on():
    report = s26.report_text(3_000)
    events = s26.research_events(report, replaces=10)
    snapshot, seen = None, []
    from pplxweb.perplexity.merge import Snapshot

    snapshot = Snapshot()
    for event in events:
        snapshot = merge(snapshot, event)
        seen.append(len(extract(snapshot).report))
    growing = [n for n in seen if n]
    assert growing == sorted(growing) and growing[-1] == len(report)
    assert len(set(growing)) >= 10


def test_a_research_run_cut_before_ask_text_has_no_answer_but_keeps_its_notes_and_report():
    events = s26.research_events(s26.report_text(2_000), replaces=5)
    first_ask = next(
        i
        for i, e in enumerate(events)
        if any("ask_text" in b.get("intended_usage", "") for b in e.get("blocks", []))
    )
    r = run(events[:first_ask], ended=True)
    assert r.status == "truncated"
    assert r.answer == ""
    assert r.report  # what arrived of the report is kept
    notes = [s.text for s in r.steps if s.kind == "note"]
    assert s26.INSIGHTS[0] in notes


def test_research_steps_are_readable_progress():
    r = run(s26.research_events(s26.report_text(1_000), replaces=2))
    kinds = {(s.kind, s.text) for s in r.steps}
    assert ("step", "Loading the research skill") in kinds
    assert ("search", "weather nowcasting API pricing") in kinds
    assert ("read", s26.SOURCES[0]["name"]) in kinds  # from web_results_content
    assert ("read", s26.SOURCES[1]["url"]) in kinds  # GET_URL_CONTENT pages
    assert ("step", "Writing the report") in kinds


def test_report_from_the_terminal_steps_alone_and_from_the_workflow_path():
    terminal = json.dumps(
        [{"step_type": "RESEARCH_ANSWER", "content": {"assets": [s26._asset("# R\n\nbody", True)]}}]
    )
    r = run([{"status": "COMPLETED", "final": True, "text": terminal}])
    assert r.report == "# R\n\nbody"
    workflow = {"intended_usage": "workflow_root", "workflow_block": {"steps": [{"items": [
        {"payload": {"sources_payload": {"assets": [s26._asset("# W", True)]}}}]}]}}  # fmt: skip
    assert run([{"status": "COMPLETED", "final": True, "blocks": [workflow]}]).report == "# W"


def test_report_bad_inputs():
    def with_assets(*assets):
        return [{"status": "PENDING", "search_mode": "RESEARCH",
                 "blocks": [{"intended_usage": "unified_assets", "unified_assets_block": {"assets": list(assets)}}]}]  # fmt: skip

    assert run(with_assets({"asset_type": "RESEARCH_REPORT", "research_report": {"name": "x"}})).report == ""
    assert run(with_assets("junk", {"research_report": "junk"})).report == ""
    two = with_assets(
        {"is_primary_asset": True, "research_report": {"source_content": ""}},
        {"is_primary_asset": True, "research_report": {"source_content": "# second primary"}},
        {"research_report": {"source_content": "# not primary"}},
    )
    assert run(two).report == "# second primary"
    huge = run(with_assets({"research_report": {"source_content": "x" * (REPORT_LIMIT + 10)}})).report
    assert len(huge) == REPORT_LIMIT and huge.endswith("characters; the rest was left out.)*")
    # a report that shrinks: the latest whole replace is the report
    events = s26.research_events("# Long report\n\n" + "a" * 500, replaces=3)
    events.insert(-1, {"status": "PENDING", "blocks": [s26._replace("# Short")]})
    assert run(events[:-1], ended=False).report == "# Short"


def test_terminal_answer_wins_even_shorter_and_its_sources_are_the_final_ones():
    r = run(s26.thinking_events())
    assert r.answer == s26.THINKING_FINAL
    assert "[9]" in r.answer and "[10]" not in r.answer
    assert len(r.sources) == 9 and "https://s9.example/page" not in [s.url for s in r.sources]


def test_an_empty_terminal_answer_keeps_the_chunks():
    events = answer_stream(["Hello ", "world"])
    for block in events[-1]["blocks"]:
        if "markdown_block" in block:
            block["markdown_block"]["answer"] = ""
    assert run(events).answer == "Hello world"


def test_upsell_items_are_never_related_questions():
    r = run(s26.thinking_events())
    assert r.related == ["How long should sourdough proof?"]
    odd = [{"status": "COMPLETED", "final": True, "related_queries": ["junk"], "related_query_items": [
        {"type": "UPSELL", "upsell_type": "something_new", "text": "junk"}, {"text": "Plain item?"}]}]  # fmt: skip
    assert run(odd).related == ["Plain item?"]


def test_the_bare_error_frame_is_a_failure_not_an_answer():
    r = run([s26.ERROR_FRAME])
    assert r.status == "failed" and r.answer == ""
    assert "could not process" in r.error
    # an answer whose `text` is a plain string (older dialect) is still an answer
    r = run([{"status": "COMPLETED", "final": True, "text": "final answer"}])
    assert r.status == "completed" and r.answer == "final answer"


def test_turbo_asked_and_answered_is_quick_mode_not_a_downgrade():
    assert not run(s26.turbo_events(["x"]), asked="turbo").downgraded
    # turbo answering another model, but the frame names the account's tier: signed in
    assert not run(s26.turbo_events(["x"]), asked="claude50opus").downgraded
    # turbo answering another model with no tier: suspect (confirmed later with the session)
    assert run(answer_stream(["x"], model="turbo"), asked="claude50opus").downgraded


@pytest.mark.parametrize(
    ("question", "seconds", "options"),
    [
        ({"question_text": "Region?", "options": ["EU", "US"]}, 60, ("EU", "US")),
        ({"question_text": "Region?", "options": []}, 60, ()),
        ({"question_text": "Region?", "auto_skip_seconds": 0}, 0, ()),
        ({"question_text": "Region?", "auto_skip_seconds": 10**9}, SKIP_SECONDS_MAX, ()),
        ({"question_text": "Region?", "options": "junk", "auto_skip_seconds": "soon"}, 60, ()),
    ],
)
def test_a_clarifying_question_is_read_with_sane_limits(question, seconds, options):
    events = s26.research_events(s26.report_text(500), replaces=2, question=question)
    asked_at = next(i for i, e in enumerate(events) if "CLARIFYING" in json.dumps(e))
    r = run(events[: asked_at + 1], ended=False)
    assert r.question is not None
    assert r.question.text == "Region?"
    assert r.question.options == options and r.question.skip_seconds == seconds
    assert run(events).question is None  # the run went on and finished


def test_clarifying_questions_in_the_text_steps_as_a_real_run_asked_them():
    """The shape of ak2k's ocio capture (non-diff mode): three questions in one step of the
    `text` step list, pending while it is the last step; the step stays with `answers: []` after
    the countdown, with the run's next steps after it."""
    step = {"step_type": "RESEARCH_CLARIFYING_QUESTIONS", "uuid": "e-1", "content": {
        "uuid": "tool-1", "title": "One definition will change the comparison", "auto_skip_seconds": 60,
        "answers": [], "goal_id": "1", "questions": [
            {"question_text": "How should the fee be read?", "options": ["Published fee (Recommended)", "Negotiated"]},
            {"question_text": "Firms without a public offering?", "options": ["Leave out", "Estimate"]},
            {"question_text": "Preferred output format?", "options": ["Report (Recommended)", "Spreadsheet", "Slides", "App"]},
            {"question_text": ""}, "junk"]}}  # fmt: skip
    head = [
        {"step_type": "INITIAL_QUERY", "content": {"query": "fees"}},
        {"step_type": "LOAD_SKILL", "content": {}},
    ]
    waiting = run(
        [{"status": "PENDING", "search_mode": "RESEARCH", "text": json.dumps([*head, step])}], ended=False
    )
    q = waiting.question
    assert q.key == "tool-1" and q.title.startswith("One definition") and len(q.asks) == 3
    assert q.asks[2].options == ("Report (Recommended)", "Spreadsheet", "Slides", "App")
    went_on = [*head, step, {"step_type": "SEARCH_WEB", "content": {"queries": [{"query": "OCIO fees"}]}}]
    assert (
        run(
            [{"status": "PENDING", "search_mode": "RESEARCH", "text": json.dumps(went_on)}], ended=False
        ).question
        is None
    )
    answered = {**step, "content": {**step["content"], "answers": [{"question": "x", "answer": "y"}]}}
    assert (
        run(
            [{"status": "PENDING", "search_mode": "RESEARCH", "text": json.dumps([*head, answered])}],
            ended=False,
        ).question
        is None
    )
