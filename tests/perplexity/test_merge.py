"""Merge rules (docs/protocol.md §7): top level, direct blocks, JSON patches, chunk splicing."""

from __future__ import annotations

import pytest

from pplxweb.perplexity import merge as merge_module
from pplxweb.perplexity.merge import PatchError, Snapshot, apply_patch, merge, merge_all
from tests.perplexity.streams import markdown


def snap(*events: dict) -> Snapshot:
    return merge_all(list(events))


def test_top_level_later_wins_but_first_token_and_slug_are_kept():
    s = snap(
        {
            "backend_uuid": "b1",
            "read_write_token": "rw1",
            "thread_url_slug": "s1",
            "status": "PENDING",
        },
        {
            "backend_uuid": "b2",
            "read_write_token": "rw2",
            "thread_url_slug": "s2",
            "status": "COMPLETED",
        },
    )
    assert s.top["backend_uuid"] == "b2"
    assert s.top["read_write_token"] == "rw1"
    assert s.top["thread_url_slug"] == "s1"
    assert s.top["status"] == "COMPLETED"


def test_a_token_that_arrives_late_is_still_taken():
    s = snap({"backend_uuid": "b1"}, {"read_write_token": "rw"})
    assert s.top["read_write_token"] == "rw"


def test_merge_does_not_change_the_snapshot_it_was_given():
    first = snap({"a": 1, "blocks": [markdown("ask_text", ["x"], 0)]})
    second = merge(first, {"a": 2, "blocks": [markdown("ask_text", ["y"], 1)]})
    third = merge(first, {"blocks": [markdown("ask_text", ["z"], 1)]})
    assert first.top["a"] == 1 and first.markdown("ask_text") == "x"
    assert second.markdown("ask_text") == "xy"
    assert third.markdown("ask_text") == "xz"  # a branch from the same parent sees its own text


def test_direct_block_replaces_the_stored_one():
    s = snap(
        {
            "blocks": [
                {
                    "intended_usage": "plan",
                    "plan_block": {"goals": [{"id": "0"}], "progress": "IN_PROGRESS"},
                }
            ]
        },
        {"blocks": [{"intended_usage": "plan", "plan_block": {"progress": "DONE"}}]},
    )
    assert s.block("plan").doc == {"progress": "DONE"}


@pytest.mark.parametrize(
    ("events", "text"),
    [
        ([(["Hello ", "wor"], 0), (["world"], 1)], "Hello world"),
        ([(["a"], 0), (["b"], 1), (["c"], 2)], "abc"),
        ([(["a"], 0), (["b"], 1), (["X", "Y"], 0)], "XY"),  # offset 0 replaces
        ([(["a"], None), (["b"], None)], "ab"),  # missing offset appends
        ([(["a"], 0), (["b"], 7)], "ab"),  # past the end appends: shown text never vanishes
        ([(["a"], 0), (["b"], 1), (["c"], 1)], "ac"),  # an offset inside rewrites the tail
    ],
)
def test_markdown_chunks_splice_at_their_offset(events, text):
    s = Snapshot()
    for chunks, offset in events:
        s = merge(s, {"blocks": [markdown("ask_text", chunks, offset)]})
    assert s.markdown("ask_text") == text


def test_the_full_answer_field_wins_when_it_is_ahead():
    s = snap(
        {"blocks": [markdown("ask_text", ["Hel"], 0)]},
        {"blocks": [markdown("ask_text", [], None, answer="Hello")]},
    )
    assert s.markdown("ask_text") == "Hello"


def diff(usage: str, field: str, *patches: dict) -> dict:
    return {"blocks": [{"intended_usage": usage, "diff_block": {"field": field, "patches": list(patches)}}]}


def test_diff_block_with_empty_path_replaces_the_document():
    s = snap(
        diff(
            "workflow_root",
            "workflow_block",
            {"op": "replace", "path": "", "value": {"status": "X"}},
        )
    )
    assert s.block("workflow_root").doc == {"status": "X"}
    assert s.block("workflow_root").kind == "workflow_block"


def test_diff_block_deep_paths_add_remove_replace():
    plan = {"goals": [{"id": "0", "final": False}], "progress": "IN_PROGRESS", "pct_complete": 5}
    s = snap(
        {"blocks": [{"intended_usage": "plan", "plan_block": plan}]},
        diff(
            "plan",
            "plan_block",
            {"op": "replace", "path": "/goals/0/final", "value": True},
            {"op": "add", "path": "/goals/-", "value": {"id": "1"}},
            {"op": "add", "path": "/goals/0/note", "value": "n"},
            {"op": "remove", "path": "/pct_complete"},
            {"op": "replace", "path": "/progress", "value": "DONE"},
        ),
    )
    assert s.block("plan").doc == {
        "goals": [{"id": "0", "final": True, "note": "n"}, {"id": "1"}],
        "progress": "DONE",
    }
    assert s.patch_failures == 0
    assert plan["goals"][0]["final"] is False  # the event's own data was not mutated


def test_failing_patches_are_counted_and_the_rest_applies():
    s = snap(
        {"blocks": [{"intended_usage": "plan", "plan_block": {"goals": []}}]},
        diff(
            "plan",
            "plan_block",
            {"op": "replace", "path": "/missing/deep", "value": 1},
            {"op": "remove", "path": "/goals/3"},
            {"op": "move", "from": "/a", "path": "/b"},
            {"op": "add", "path": "no-slash", "value": 1},
            "not a patch",
            {"op": "add", "path": "/ok", "value": 1},
        ),
    )
    assert s.patch_failures == 5
    assert s.block("plan").doc == {"goals": [], "ok": 1}


def test_a_patch_against_a_missing_block_starts_from_an_empty_document():
    s = snap(diff("web_results", "web_result_block", {"op": "add", "path": "/web_results", "value": []}))
    assert s.block("web_results").doc == {"web_results": []}
    s = snap(
        diff(
            "web_results",
            "web_result_block",
            {"op": "replace", "path": "/web_results/0", "value": 1},
        )
    )
    assert s.patch_failures == 1


def test_proto_keys_are_plain_keys():
    s = snap(diff("x", "x_block", {"op": "add", "path": "/__proto__", "value": {"polluted": True}}))
    assert s.block("x").doc == {"__proto__": {"polluted": True}}
    assert not hasattr({}, "polluted")


def test_diff_patches_on_markdown_chunks():
    s = snap(
        {"blocks": [markdown("ask_text", ["a"], 0, progress="IN_PROGRESS")]},
        diff("ask_text", "markdown_block", {"op": "add", "path": "/chunks/-", "value": "b"}),
        diff("ask_text", "markdown_block", {"op": "add", "path": "/chunks/2", "value": "c"}),
        diff("ask_text", "markdown_block", {"op": "replace", "path": "/progress", "value": "DONE"}),
    )
    assert s.markdown("ask_text") == "abc"
    assert s.block("ask_text").doc["progress"] == "DONE"


@pytest.mark.parametrize(
    "event",
    [
        None,
        [],
        "text",
        {"blocks": "nope"},
        {"blocks": [None, 3, {"no_usage": 1}, {"intended_usage": ""}]},
    ],
)
def test_odd_events_never_raise(event):
    s = merge(Snapshot(), event)
    assert isinstance(s, Snapshot)


def test_apply_patch_rules():
    assert apply_patch({"a": [1, 2]}, {"op": "add", "path": "/a/1", "value": 9}) == {"a": [1, 9, 2]}
    assert apply_patch({"a/b": 1}, {"op": "replace", "path": "/a~1b", "value": 2}) == {"a/b": 2}
    with pytest.raises(PatchError):
        apply_patch({"a": [1]}, {"op": "add", "path": "/a/01", "value": 1})
    with pytest.raises(PatchError):
        apply_patch({}, {"op": "remove", "path": ""})
    with pytest.raises(PatchError):
        apply_patch("scalar", {"op": "add", "path": "/x", "value": 1})


def test_completion_only_on_completed_with_final():
    trap = snap({"status": "PENDING", "final": True})
    assert not trap.completed
    assert snap({"status": "COMPLETED"}).completed is False
    assert snap({"status": "COMPLETED", "final": True}).completed
    assert snap({"status": "COMPLETED", "final_sse_message": True}).completed
    assert snap({"status": "failed", "error_code": "X"}).failed


# --- what an answer holds is bounded (merge.MAX_HELD and the counts beside it) -----------------


def test_a_100_mb_answer_stops_at_the_cap_with_what_arrived_kept():
    from pplxweb.perplexity.merge import MAX_HELD
    from pplxweb.perplexity.values import MAX_TEXT

    snapshot = Snapshot()
    chunk = "word " * 2000  # 10 KB a chunk
    sent = 0
    for n in range(10_000):  # 100 MB offered
        snapshot = merge(snapshot, {"blocks": [markdown("ask_text", [chunk], n)]})
        sent += len(chunk)
        if snapshot.over:
            break
    assert snapshot.over.startswith("Perplexity's answer grew larger than pplxweb keeps (16 MB)")
    assert sent < MAX_HELD + len(chunk) * 2
    assert snapshot.block("ask_text").chunks.chars > MAX_HELD * 0.9  # what arrived is kept
    kept = snapshot.markdown("ask_text")  # and what is read of it, only as far as is kept
    assert MAX_TEXT < len(kept) <= MAX_TEXT + len(chunk) and kept.startswith("word word")
    assert snapshot.held <= MAX_HELD
    assert merge(snapshot, {"blocks": [markdown("ask_text", ["more"], n + 1)]}) is snapshot


def test_a_million_tiny_events_cost_what_they_hold_not_more(monkeypatch):
    monkeypatch.setattr(merge_module, "MAX_HELD", 4 * 1024 * 1024)  # 16 MB: the same, 4 times longer
    snapshot = Snapshot()
    for n in range(1_000_000):
        snapshot = merge(snapshot, {"status": "PENDING", "n": n, "blocks": [markdown("ask_text", ["a"], n)]})
        if snapshot.over:
            break
    # a one-character chunk costs ~58 bytes: the cap, not the server's memory, gives out first
    assert snapshot.over and 60_000 < snapshot.events < 75_000
    assert len(snapshot.markdown("ask_text")) == snapshot.events
    assert snapshot.held <= 4 * 1024 * 1024


def test_new_fields_or_blocks_without_end_are_refused_past_the_count():
    from pplxweb.perplexity.merge import MAX_FIELDS

    snapshot = Snapshot()
    for n in range(MAX_FIELDS * 2):
        snapshot = merge(snapshot, {f"field{n}": n})
    assert "500 fields or blocks" in snapshot.over and len(snapshot.top) == MAX_FIELDS
    snapshot = Snapshot()
    for n in range(MAX_FIELDS * 2):
        snapshot = merge(snapshot, {"blocks": [markdown(f"usage{n}", ["x"], 0)]})
    assert snapshot.over and len(snapshot.blocks) == MAX_FIELDS


def test_too_many_patches_in_one_event_are_refused():
    patches = [{"op": "add", "path": "/items/-", "value": n} for n in range(6000)]
    first = snap({"blocks": [{"intended_usage": "w", "workflow_block": {"items": []}}]})
    after = merge(
        first,
        {"blocks": [{"intended_usage": "w", "diff_block": {"field": "workflow_block", "patches": patches}}]},
    )
    assert "5000 changes in one update" in after.over and after.block("w").doc == {"items": []}


def test_replaced_values_give_their_cost_back():
    """A research report grows by whole-string replaces, a thousand of them (docs/protocol.md §8.1):
    what the answer holds is the last report, not the sum of all of them."""
    report = "Findings and more findings. " * 4000  # 112 KB at the end
    snapshot = snap(
        {"blocks": [{"intended_usage": "assets", "unified_assets_block": {"assets": [{"content": ""}]}}]}
    )
    for n in range(1, 1001):
        text = report[: len(report) * n // 1000]
        patch = {"op": "replace", "path": "/assets/0/content", "value": text}
        snapshot = merge(
            snapshot,
            {
                "blocks": [
                    {
                        "intended_usage": "assets",
                        "diff_block": {"field": "unified_assets_block", "patches": [patch]},
                    }
                ]
            },
        )
        snapshot = merge(snapshot, {"status": "PENDING", "text": text})  # a top-level field too
    assert not snapshot.over
    assert 2 * len(report) < snapshot.held < 2 * len(report) + 10_000
    removed = merge(
        snapshot,
        {
            "blocks": [
                {
                    "intended_usage": "assets",
                    "diff_block": {
                        "field": "unified_assets_block",
                        "patches": [{"op": "remove", "path": "/assets/0"}],
                    },
                }
            ]
        },
    )
    assert removed.held < snapshot.held - len(report)
