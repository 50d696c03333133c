"""The late-2026 streams the fake sends (docs/protocol.md §6.3, §7.5, §8), built after real captures.

- `research_events`: a Deep Research run (§8.1). Its shapes follow ak2k/pplx-agent-tools'
  capture `tests/fixtures/ask-diff/p1-A.events.jsonl` (2026-09-24): the `workflow_root` block
  carries an "Insights" step long before `ask_text` starts; the report lives in a
  `unified_assets` block whose `research_report.source_content` grows by whole-string
  `replace` patches (1,021 of them, 7 MB, in the capture); `ask_text` / `ask_text_0_markdown`
  hold only a cover note; the terminal frame's `text` step list has a `RESEARCH_ANSWER` step
  whose asset carries the whole report, and names `structured_answer_block_usages`
  `["answer_assets_preview", "workflow_root", "ask_text_0_markdown"]`.
- `thinking_events`: a thinking model whose terminal `answer` renumbers a citation and is
  shorter than the streamed chunks, with the final source list in the terminal frame (§7.5),
  and `related_query_items` with an UPSELL item whose junk also sits in `related_queries` (§6.5).
- `ERROR_FRAME`: the bare error frame (§5.4).
- `turbo_events`: quick mode for a signed-in account: `turbo` asked and answered, with the tier.
"""

from __future__ import annotations

import json

IDS = {
    "backend_uuid": "fake-r-1",
    "context_uuid": "fake-rc",
    "read_write_token": "fake-rw",
    "thread_url_slug": "fake-r-slug",
}
ERROR_FRAME = {"text": "Error in processing query."}
SOURCES = [
    {"name": "Nowcasting - Wikipedia", "url": "https://en.wikipedia.org/wiki/Nowcasting_(meteorology)",
     "snippet": "Nowcasting is weather forecasting on a very short term.", "timestamp": ""},
    {"name": "Open-Meteo API docs", "url": "https://open-meteo.com/en/docs", "snippet": "Free weather API.",
     "timestamp": ""},
    {"name": "Tomorrow.io pricing", "url": "https://www.tomorrow.io/pricing/", "snippet": "Plans and prices.",
     "timestamp": ""},
]  # fmt: skip
INSIGHTS = [
    "Open-Meteo offers free nowcasts at 15-minute steps for non-commercial use.",
    "Tomorrow.io's minute-by-minute precipitation covers most of Europe and North America.",
]
COVER = [
    "I've compiled a report on weather nowcasting APIs ",
    "comparing pricing, latency and coverage [1][2].",
]
QUESTION_TOOL = "fake-question-tool-1"
QUESTION = {
    "question_text": "Which region matters most to you?",
    "options": ["Europe", "North America", "Worldwide"],
}
QUESTIONS = [
    QUESTION,
    {"question_text": "Preferred output format?", "options": ["Report (Recommended)", "Spreadsheet"]},
]


def report_text(size: int = 15_000) -> str:
    """A report of about `size` characters: a title, an executive summary, sections, a table."""
    parts = ["# Weather nowcasting APIs compared\n\n## Executive Summary\n\n"]
    parts.append("Five APIs were compared on pricing, latency, horizon and coverage [1][2].\n\n")
    parts.append(
        "| API | Free tier | Horizon |\n|---|---|---|\n| Open-Meteo | yes | 2 h |\n| Tomorrow.io | limited | 6 h |\n\n"
    )
    section = 1
    while sum(map(len, parts)) < size:
        parts.append(f"## Section {section}: findings\n\n")
        parts.append(("Radar-based nowcasts extrapolate echoes minute by minute [3]. " * 6).strip() + "\n\n")
        section += 1
    return "".join(parts)[:size]


def _head(model: str) -> dict:
    return {**IDS, "display_model": model, "user_selected_model": model, "search_mode": "RESEARCH",
            "status": "PENDING", "reconnectable": True, "cursor": "fake-cursor-1"}  # fmt: skip


def _plan(steps: list[dict], goals: int = 2) -> dict:
    return {"intended_usage": "plan", "plan_block": {"progress": "IN_PROGRESS", "goals": [
        {"id": str(i), "description": f"Research goal {i + 1}", "final": False} for i in range(goals)], "steps": steps}}  # fmt: skip


def _workflow(insights: list[str]) -> dict:
    items = [{"id": f"i{n}", "type": "WORKFLOW_ITEM_TEXT", "payload": {"text_payload": {"chunks": [t]}}}
             for n, t in enumerate(insights)]  # fmt: skip
    answer_step = {"status": "WORKFLOW_COMPLETED", "title": "", "unnest_items": True, "items": [
        {"id": "r:generated-media", "type": "WORKFLOW_ITEM_SOURCES", "variant": "answer",
         "payload": {"sources_payload": {"asset_uuids": ["fake-asset-1"]}}}]}  # fmt: skip
    return {"intended_usage": "workflow_root", "diff_block": {"field": "workflow_block", "patches": [
        {"op": "replace", "path": "", "value": {"version": "1.0", "status": "WORKFLOW_IN_PROGRESS", "steps": [
            {"status": "WORKFLOW_COMPLETED", "title": "Insights", "icon": "insights", "items": items}, answer_step]}}]}}  # fmt: skip


def _asset(content: str, final: bool) -> dict:
    return {"uuid": "fake-asset-1", "asset_type": "RESEARCH_REPORT", "is_primary_asset": True,
            "research_report": {"name": "Weather nowcasting APIs compared", "url": "https://fixture.invalid/report.md",
                                "filename": "Nowcasting APIs.md", "source_content": content, "final": final},
            "download_info": [{"filename": "Nowcasting APIs.md", "url": "https://fixture.invalid/report.md"}]}  # fmt: skip


def _replace(content: str) -> dict:
    patch = {"op": "replace", "path": "/assets/0/research_report/source_content", "value": content}
    return {
        "intended_usage": "unified_assets",
        "diff_block": {"field": "unified_assets_block", "patches": [patch]},
    }


def research_events(
    report: str | None = None,
    replaces: int = 40,
    question: dict | list[dict] | None = None,
    insights: list[str] | None = None,
    cover: list[str] | None = None,
) -> list[dict]:
    """A Deep Research run: steps, Insights, [a clarifying question], the report growing by
    `replaces` whole replaces, the cover note, the terminal frame."""
    report = report_text() if report is None else report
    cover = COVER if cover is None else cover
    steps = [
        {"step_type": "LOAD_SKILL", "load_skill_content": {"skill_names": ["research"]}},
        {"step_type": "SEARCH_WEB", "search_web_content": {"queries": [{"query": "weather nowcasting API pricing"}]}},
        {"step_type": "SEARCH_RESULTS", "web_results_content": {"web_results": SOURCES}},
        {"step_type": "GET_URL_CONTENT", "get_url_content_content": {"pages": [{"url": SOURCES[1]["url"]}]}},
    ]  # fmt: skip
    out: list[dict] = [_head("pplx_alpha"), {"status": "PENDING", "blocks": [_plan(steps[:2])]}]
    if question is not None:
        questions = question if isinstance(question, list) else [question]
        ask = {"step_type": "RESEARCH_CLARIFYING_QUESTIONS", "uuid": "fake-r-1",
               "research_clarifying_questions_content": {"uuid": QUESTION_TOOL, "questions": questions, "answers": [],
                                                         "title": "One definition will change the comparison",
                                                         "auto_skip_seconds": questions[0].get("auto_skip_seconds", 60)}}  # fmt: skip
        out.append({"status": "PENDING", "blocks": [_plan([*steps[:2], ask])]})
    out += [
        {"status": "PENDING", "blocks": [_plan(steps), {"intended_usage": "web_results",
                                                        "web_result_block": {"web_results": SOURCES}}]},
        {"status": "PENDING", "structured_answer_block_usages": ["workflow_root", "ask_text"],
         "blocks": [_workflow(INSIGHTS if insights is None else insights)]},
        {"status": "PENDING", "blocks": [{"intended_usage": "unified_assets", "diff_block": {
            "field": "unified_assets_block", "patches": [{"op": "replace", "path": "", "value": {"assets": [_asset("", False)]}}]}}]},
    ]  # fmt: skip
    for n in range(1, replaces + 1):
        out.append({"status": "PENDING", "blocks": [_replace(report[: len(report) * n // replaces])]})
    for i, chunk in enumerate(cover):
        out.append({"status": "PENDING", "blocks": [
            {"intended_usage": usage, "markdown_block": {"chunks": [chunk], "chunk_starting_offset": i}}
            for usage in ("ask_text_0_markdown", "ask_text")]})  # fmt: skip
    out[-1].update(final=True, text_completed=True)
    text_steps = [
        {"step_type": "INITIAL_QUERY", "content": {"query": "Compare weather nowcasting APIs"}},
        *[{"step_type": s["step_type"], "content": next(v for k, v in s.items() if k.endswith("_content"))} for s in steps],
        {"step_type": "RESEARCH_ANSWER", "content": {"final": True, "title": "Weather nowcasting APIs compared",
                                                     "answer": ""}, "assets": [_asset(report, True)]},
        {"step_type": "FINAL", "content": {"answer": json.dumps({"answer": "".join(cover), "web_results": SOURCES})}},
    ]  # fmt: skip
    out.append({
        "status": "COMPLETED", "final": True, "final_sse_message": True, "text": json.dumps(text_steps),
        "display_model": "pplx_alpha", "user_selected_model": "pplx_alpha", "search_mode": "RESEARCH",
        "structured_answer_block_usages": ["answer_assets_preview", "workflow_root", "ask_text_0_markdown"],
        "_extras": {"pro_search_mode": "deep_research", "subscription_tier": "max"},
        "related_queries": ["Which API has the longest horizon?"],
        "blocks": [{"intended_usage": usage, "markdown_block": {"chunks": cover, "chunk_starting_offset": 0,
                                                                 "answer": "".join(cover)}}
                   for usage in ("ask_text_0_markdown", "ask_text")],
    })  # fmt: skip
    return out


THINKING_CHUNKS = [
    "Sourdough needs a lively starter [1]. ",
    "Salt slows fermentation [2][10]. ",
    "Bake at 250 °C with steam [3] — most bakers agree.",
]
THINKING_FINAL = (
    "Sourdough needs a lively starter [1]. Salt slows fermentation [2][9]. Bake at 250 °C with steam [3]."
)


def thinking_events(model: str = "claude48opusthinking") -> list[dict]:
    """A thinking model's answer: the terminal `answer` renumbers [10] to [9] and is shorter;
    the terminal frame's source list is the one the final numbers refer to."""
    streamed = [{"name": f"Source {n}", "url": f"https://s{n}.example/page", "snippet": f"snippet {n}", "timestamp": ""}
                for n in range(1, 11)]  # fmt: skip
    final_sources = [
        s for s in streamed if s["url"] != "https://s9.example/page"
    ]  # one dropped: 10 becomes 9
    out: list[dict] = [
        {**IDS, "display_model": model, "user_selected_model": model, "status": "PENDING"},
        {"status": "PENDING", "blocks": [{"intended_usage": "web_results", "web_result_block": {"web_results": streamed}}]},
    ]  # fmt: skip
    for i, chunk in enumerate(THINKING_CHUNKS):
        out.append({"status": "PENDING", "blocks": [
            {"intended_usage": "ask_text", "markdown_block": {"chunks": [chunk], "chunk_starting_offset": i}}]})  # fmt: skip
    out[-1].update(final=True, text_completed=True)
    junk = "display_texts"
    out.append({
        "status": "COMPLETED", "final": True, "final_sse_message": True,
        "display_model": model, "user_selected_model": model, "_extras": {"subscription_tier": "max"},
        "related_queries": ["How long should sourdough proof?", junk],
        "related_query_items": [
            {"type": "DEFAULT", "text": "How long should sourdough proof?"},
            {"type": "UPSELL", "upsell_type": "computer_related_query", "display_text": "Try Comet", "text": junk},
        ],
        "blocks": [
            {"intended_usage": "web_results", "web_result_block": {"web_results": final_sources}},
            {"intended_usage": "ask_text", "markdown_block": {"chunks": THINKING_CHUNKS, "answer": THINKING_FINAL}},
        ],
    })  # fmt: skip
    return out


def turbo_events(answer: list[str]) -> list[dict]:
    """Quick mode for a signed-in Pro account: `turbo` asked and `turbo` answered (docs/protocol.md §6.7)."""
    from tests.fake_perplexity.streams import events

    out = events(answer, model="turbo")
    out[-1]["_extras"] = {"subscription_tier": "pro", "pro_search_mode": "auto"}
    return out
