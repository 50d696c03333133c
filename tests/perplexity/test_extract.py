"""Extraction (docs/protocol.md §5.4, §6): every fixture's result, statuses, sources, steps, models."""

from __future__ import annotations

import json

import pytest

from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.merge import merge_all
from pplxweb.perplexity.sse import parse_all
from tests.perplexity.streams import answer_stream, fixture, markdown, result, web_results


def run(events: list[dict], ended: bool = True, asked: str = ""):
    return extract(merge_all(events), ended=ended, asked=asked)


def replay(name: str):
    events, _ = parse_all(fixture(name))
    return extract(merge_all(events), ended=True)


def test_ask1_capture_answer_lives_in_workflow_root():
    r = replay("smdex__cli-test__ASK1_SSE.from-fixtures-ts.sse")
    assert r.status == "completed"
    assert r.answer == "OK"
    assert r.sources == [] and not r.no_results  # an answer without sources is fine
    assert r.model == "gemini38flash" and not r.downgraded
    assert r.backend_uuid == "00000066-0000-4000-8000-000000000000"
    assert r.read_write_token == "00000068-0000-4000-8000-000000000000"
    assert r.thread_url_slug == "00000066-0000-4000-8000-000000000000"


def test_ask1_trap_event_alone_is_not_the_end():
    events, _ = parse_all(fixture("smdex__cli-test__ASK1_SSE.from-fixtures-ts.sse"))
    r = extract(merge_all([e.data for e in events[:4]]), ended=True)  # up to PENDING + final:true
    assert r.status == "truncated"
    assert r.answer == "OK"  # the partial answer is kept


def test_image_capture_final_answer_from_the_text_steps():
    r = replay("smdex__cli-test__img-sse-fixture.txt")
    assert r.status == "completed"
    assert r.answer == "Media generated: 'Small blue square icon'"
    assert r.model == "nanobanana2"
    kinds = {(s.kind, s.text) for s in r.steps}
    assert ("goal", "Creating a small blue square icon") in kinds
    assert ("image", "Small blue square icon") in kinds
    assert r.related == []
    # the one generated image, found in the steps' assets, the image results and media_items
    [image] = r.images
    assert image.url.startswith("https://user-gen-media-assets.s3.amazonaws.com/gemini_images/")
    assert (image.caption, image.width, image.height) == ("Small blue square icon", 1024, 1024)


def test_generated_images_are_read_from_each_place_once_and_hostile_values_are_dropped():
    def steps(*steps):
        return {"intended_usage": "pro_search_steps", "plan_block": {"steps": list(steps)}}

    asset = {
        "asset_type": "GENERATED_IMAGE",
        "generated_image": {"url": "https://img.example/a.png?sig=1", "image_width": 640, "image_height": -1},
        "download_info": [{"filename": "A cat"}],
    }
    events = [
        {
            "status": "PENDING",
            "blocks": [
                steps(
                    {"step_type": "GENERATE_IMAGE", "generate_image_content": {"prompt": "p"}},
                    {"step_type": "X", "assets": [asset, {"asset_type": "OTHER"}, "junk"]},
                )
            ],
        },
        {
            "status": "COMPLETED",
            "media_items": [
                {
                    "medium": "image",
                    "image": "https://img.example/a.png?sig=2",
                    "generated_media_metadata": {},
                },
                {
                    "medium": "image",
                    "image": "https://img.example/b.png",
                    "generated_media_metadata": {"x": 1},
                },
                {"medium": "image", "image": "https://web.example/found.png"},  # image search, not made
                {"medium": "image", "image": "javascript:alert(1)", "generated_media_metadata": {"x": 1}},
            ],
        },
    ]
    images = run(events).images
    assert [(i.url, i.caption, i.width, i.height) for i in images] == [
        ("https://img.example/a.png?sig=1", "A cat", 640, 0),
        ("https://img.example/b.png", "p", 0, 0),  # no name of its own: the step's prompt
    ]


def test_synthetic_basic_uses_text_and_legacy_sources_list():
    r = replay("smdex__test__sse-basic.synthetic.txt")
    assert r.status == "completed"
    assert r.answer == "final answer"
    assert [s.as_dict() for s in r.sources] == [
        {
            "title": "Example",
            "url": "https://example.com",
            "snippet": "Example source",
            "date": "2026-02-15T12:00:00.000Z",
        }
    ]


def test_synthetic_incremental_splices_chunks_and_orders_sources():
    r = replay("smdex__test__sse-incremental.synthetic.txt")
    assert r.status == "completed"
    assert r.answer == "Hello world"
    assert [s.url for s in r.sources] == [
        "https://b.example",
        "https://a.example",
    ]  # web_results first
    assert r.model == "pplx_pro_upgraded"


def test_no_completed_marker_is_truncated_with_the_partial_answer():
    r = replay("ak2k__fetch-url__no-completed-marker.events.jsonl")
    assert r.status == "truncated"
    assert r.answer == "Partial answer before cut"
    assert "stopped before" in r.error
    assert r.backend_uuid == "fake-uuid-123" and r.read_write_token == "fake-token-456"


def test_running_until_the_stream_ends():
    assert run(answer_stream(["a"], complete=False), ended=False).status == "running"


def test_ask_text_and_its_markdown_twin_are_never_doubled():
    events = answer_stream(["Hello ", "there"])
    for e in events:
        for b in list(e.get("blocks", [])):
            if b["intended_usage"] == "ask_text":
                e["blocks"].append({**b, "intended_usage": "ask_text_0_markdown"})
    r = run(events)
    assert r.answer == "Hello there"


def test_research_sections_are_joined_in_order():
    r = run([
        {"blocks": [markdown("ask_text_1_markdown", ["## Two"], 0), markdown("ask_text_0_markdown", ["# One"], 0)]},
        {"status": "COMPLETED", "final": True},
    ])  # fmt: skip
    assert r.answer == "# One\n\n## Two"


def test_structured_usage_picks_the_block():
    r = run([
        {"structured_answer_block_usages": ["ask_text_0_markdown"], "blocks": [
            markdown("ask_text_0_markdown", ["right"], 0), markdown("ask_text", ["wrong"], 0)]},
    ])  # fmt: skip
    assert r.answer == "right"


def test_workflow_chunks_ahead_of_text_win():
    wf = {"steps": [{"items": [{"payload": {"text_payload": {"text": "Hel", "chunks": ["Hel", "lo"]}}}]}]}
    r = run(
        [
            {
                "structured_answer_block_usages": ["workflow_root"],
                "blocks": [{"intended_usage": "workflow_root", "workflow_block": wf}],
            }
        ]
    )
    assert r.answer == "Hello"


def test_final_text_answer_as_a_dict_and_as_plain_text():
    nested = json.dumps(
        [
            {
                "step_type": "FINAL",
                "content": {"answer": json.dumps({"answer": "A", "web_results": [result(1)], "chunks": []})},
            }
        ]
    )
    r = run([{"text": nested, "status": "COMPLETED", "final": True}])
    assert r.answer == "A" and [s.title for s in r.sources] == ["Source 1"]
    r = run(
        [
            {
                "text": json.dumps([{"step_type": "FINAL", "content": {"answer": "not json {"}}]),
                "status": "COMPLETED",
                "final": True,
            }
        ]
    )
    assert r.answer == "not json {"


def test_sources_are_deduplicated_and_non_web_hits_dropped():
    r = run([
        {"blocks": [web_results(result(1), result(2, is_navigational=True), result(3, is_image=True), {"url": ""}, "junk")]},
        {"blocks": [{"intended_usage": "sources_answer_mode", "sources_mode_block": {
            "web_results": [result(1, url="HTTPS://S1.EXAMPLE/page")], "rows": [{"web_result": result(4)}]}}]},
        {"sources_list": [{"title": "Legacy", "url": "https://legacy.example", "snippet": "", "date": ""}]},
    ])  # fmt: skip
    assert [s.title for s in r.sources] == ["Source 1", "Source 4", "Legacy"]


def test_related_questions_from_either_field():
    assert run([{"related_queries": ["a", " ", "a", "b"]}]).related == ["a", "b"]
    assert run([{"related_query_items": [{"text": "x", "type": "DEFAULT"}, {"bad": 1}]}]).related == ["x"]


def test_progress_steps_from_plan_and_search_steps():
    plan = {"intended_usage": "pro_search_steps", "plan_block": {"goals": [{"description": "Look up X"}], "steps": [
        {"step_type": "SEARCH_WEB", "search_web_content": {"queries": [{"engine": "web", "query": "x facts"}]}},
        {"step_type": "SEARCH_RESULTS", "search_results_content": {"web_results": [result(1)]}},
        {"step_type": "URL_NAVIGATE", "url_navigate_content": {"url": "https://n.example"}},
    ]}}  # fmt: skip
    r = run([{"blocks": [plan]}, {"blocks": [plan]}])
    assert [(s.kind, s.text) for s in r.steps] == [
        ("goal", "Look up X"),
        ("search", "x facts"),
        ("read", "Source 1"),
        ("read", "https://n.example"),
    ]


def test_turbo_answering_another_model_is_flagged():
    r = run(answer_stream(["x"], model="turbo"), asked="claude50opus")
    assert r.downgraded and r.model == "turbo"
    assert not run(answer_stream(["x"], model="turbo"), asked="turbo").downgraded
    assert not run(answer_stream(["x"], model="gpt55")).downgraded


@pytest.mark.parametrize(
    ("frame", "needle"),
    [
        ({"status": "failed", "error_code": "FREE_TIER_RATE_LIMITED"}, "rate limit"),
        (
            {"status": "FAILED", "error_message": "model not available in this mode"},
            "model not available",
        ),
        ({"error_code": "SOMETHING_NEW"}, "SOMETHING_NEW"),
        ({"status": "FAILED"}, "could not answer"),
    ],
)
def test_error_frames_fail_with_their_message(frame, needle):
    r = run([*answer_stream(["partial"], complete=False), frame])
    assert r.status == "failed"
    assert needle in r.error
    assert r.answer == "partial"


def test_no_answer_and_no_sources_is_no_results():
    r = run([{"status": "COMPLETED", "final": True}])
    assert r.status == "completed" and r.no_results
