"""`manage.py replay_stream`: the interface used to debug captures people send in."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.perplexity.streams import FIXTURES, answer_stream, jsonl, sse

ROOT = Path(__file__).resolve().parents[2]
KEYS = [
    "status",
    "answer",
    "report",
    "sources",
    "related",
    "images",
    "model",
    "backend_uuid",
    "read_write_token",
    "thread_url_slug",
    "error",
]


def replay(*paths: str, fmt: str = "json") -> str:
    out = io.StringIO()
    call_command("replay_stream", *paths, "--format", fmt, stdout=out)
    return out.getvalue()


EXPECTED = {
    "smdex__cli-test__ASK1_SSE.from-fixtures-ts.sse": ("completed", "OK", 0, "gemini38flash"),
    "smdex__cli-test__img-sse-fixture.txt": (
        "completed",
        "Media generated: 'Small blue square icon'",
        0,
        "nanobanana2",
    ),
    "smdex__test__sse-basic.synthetic.txt": ("completed", "final answer", 1, "pplx_pro_upgraded"),
    "smdex__test__sse-incremental.synthetic.txt": (
        "completed",
        "Hello world",
        2,
        "pplx_pro_upgraded",
    ),
    "ak2k__fetch-url__no-completed-marker.events.jsonl": (
        "truncated",
        "Partial answer before cut",
        0,
        "",
    ),
}


@pytest.mark.parametrize(("name", "expected"), EXPECTED.items())
def test_each_fixture_replays_to_its_result(name, expected):
    result = json.loads(replay(str(FIXTURES / name)))
    assert list(result) == KEYS
    assert (result["status"], result["answer"], len(result["sources"]), result["model"]) == expected
    for source in result["sources"]:
        assert list(source) == ["title", "url", "snippet", "date"]


def test_generated_images_are_listed():
    [image] = json.loads(replay(str(FIXTURES / "smdex__cli-test__img-sse-fixture.txt")))["images"]
    assert image["caption"] == "Small blue square icon" and image["width"] == 1024
    assert image["url"].startswith("https://user-gen-media-assets.s3.amazonaws.com/")


def test_several_files_give_json_lines_in_order():
    lines = replay(*(str(FIXTURES / n) for n in EXPECTED)).splitlines()
    assert [json.loads(line)["answer"] for line in lines] == [e[1] for e in EXPECTED.values()]


def test_html_format_renders_as_the_app_does():
    from search.render import render_answer, render_sources

    path = str(FIXTURES / "smdex__test__sse-incremental.synthetic.txt")
    html = replay(path, fmt="html")
    assert html.startswith(f"<!-- {path} -->\n")
    sources = [
        {"title": "Source B", "url": "https://b.example", "snippet": "B"},
        {"title": "Source A", "url": "https://a.example", "snippet": "A"},
    ]
    assert render_answer("Hello world", sources) in html
    assert render_sources(sources) in html


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "replay_stream", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**os.environ},
    )


def test_stdin_and_exit_codes(tmp_path):
    result = _run("-", stdin=sse(answer_stream(["from ", "stdin"])))
    assert result.returncode == 0
    assert json.loads(result.stdout)["answer"] == "from stdin"
    missing = _run(str(tmp_path / "nope.sse"))
    assert missing.returncode == 2
    assert len(missing.stderr.decode().strip().splitlines()) == 1
    assert "cannot read" in missing.stderr.decode()


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        (
            sse(answer_stream(["cut"], complete=False), end=False)[:-30],
            "truncated",
            "stopped before",
        ),
        (b"\xff\xfe\xfd garbage \x00\x01\n\n", "truncated", "stopped before"),
        (b"<!DOCTYPE html><title>Just a moment...</title>", "failed", "Cloudflare challenge"),
        (
            jsonl([{"status": "failed", "error_code": "FREE_TIER_RATE_LIMITED"}]),
            "failed",
            "rate limit",
        ),
        (b'data: ["not an object"]\n\ndata: 42\n\n', "truncated", "stopped before"),
    ],
)
def test_bad_captures_give_a_status_and_a_message(tmp_path, body, status, needle):
    path = tmp_path / "capture"
    path.write_bytes(body)
    result = json.loads(replay(str(path)))
    assert result["status"] == status
    assert needle in result["error"]


def test_a_huge_body_without_newlines_fails_with_a_message(tmp_path):
    path = tmp_path / "huge"
    with path.open("wb") as handle:
        for _ in range(9):
            handle.write(b"x" * (1024 * 1024))
    result = json.loads(replay(str(path)))
    assert result["status"] == "failed"
    assert "larger than 8 MB" in result["error"]


def test_a_research_capture_gives_the_cover_note_and_the_report(tmp_path):
    from tests.fake_perplexity.streams_2026 import COVER, report_text, research_events

    report = report_text(4_000)
    path = tmp_path / "research.sse"
    path.write_bytes(sse(research_events(report, replaces=20)))
    [line] = replay(str(path)).splitlines()
    data = json.loads(line)
    assert data["answer"] == "".join(COVER) and data["report"] == report
    html = replay(str(path), fmt="html")
    assert (
        html.index("compiled a report")
        < html.index("Executive Summary")
        < html.rindex("Nowcasting - Wikipedia")  # the sources' list (the chips and citations name it too)
    )


def test_json_lines_wrapped_as_event_and_data_are_read(tmp_path):
    path = tmp_path / "wrapped.jsonl"
    wrapped = [{"event": "message", "data": e} for e in answer_stream(["Hello ", "world"])]
    wrapped.append({"event": "end_of_stream", "data": {}})
    path.write_text("".join(json.dumps(w) + "\n" for w in wrapped))
    [line] = replay(str(path)).splitlines()
    data = json.loads(line)
    assert data["status"] == "completed" and data["answer"] == "Hello world" and data["report"] == ""
