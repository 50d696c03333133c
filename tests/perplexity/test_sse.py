"""The stream parser: both framings, any split, and bad input that never escapes as an exception."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pplxweb.perplexity.errors import ProtocolError
from pplxweb.perplexity.sse import MAX_FRAME, Event, StreamParser, parse_all
from tests.perplexity.streams import answer_stream, fixture, jsonl, sse

FIXTURES = {
    "smdex__cli-test__ASK1_SSE.from-fixtures-ts.sse": (5, True),
    "smdex__cli-test__img-sse-fixture.txt": (2, True),
    "smdex__test__sse-basic.synthetic.txt": (2, False),
    "smdex__test__sse-incremental.synthetic.txt": (3, False),
    "ak2k__fetch-url__no-completed-marker.events.jsonl": (4, False),
}


@pytest.mark.parametrize(("name", "expected"), FIXTURES.items())
def test_every_fixture_parses_without_skipping(name, expected):
    events, parser = parse_all(fixture(name))
    assert (len(events), parser.ended) == expected
    assert parser.skipped == 0
    assert all(isinstance(e.data, dict) for e in events)


def test_multi_line_data_is_joined_with_newlines():
    events, _ = parse_all(fixture("smdex__test__sse-basic.synthetic.txt"))
    assert events[0].data == {"status": "IN_PROGRESS", "text": "partial"}


@pytest.mark.parametrize("nl", [b"\r\n", b"\n", b"\r"])
def test_line_endings_cr_lf_and_crlf(nl):
    body = nl.join([b"event: message", b'data: {"a": 1}', b"", b'data:{"b":2}', b"", b""])
    events, _ = parse_all(body)
    assert [e.data for e in events] == [{"a": 1}, {"b": 2}]


def test_comments_ids_retry_and_done_are_ignored():
    body = b': keep-alive\nid: 7\nretry: 100\ndata: {"a": 1}\n\ndata: [DONE]\n\n'
    events, parser = parse_all(body)
    assert [e.data for e in events] == [{"a": 1}]
    assert parser.skipped == 0


def test_end_of_stream_ends_and_nothing_after_counts():
    body = sse([{"a": 1}]) + sse([{"b": 2}], end=False)
    events, parser = parse_all(body)
    assert [e.data for e in events] == [{"a": 1}]
    assert parser.ended


def test_non_json_non_object_and_invalid_utf8_frames_are_skipped_and_counted():
    body = b'data: {"a": 1}\n\ndata: not json\n\ndata: [1, 2]\n\ndata: "s"\n\ndata: {"x": "\xff\xfe"}\n\ndata: {"b": 2}\n\n'
    events, parser = parse_all(body)
    assert [e.data for e in events] == [{"a": 1}, {"b": 2}]
    assert parser.skipped == 4


def test_truncated_last_frame_is_still_read_at_eof():
    events, parser = parse_all(b'data: {"a": 1}\n\ndata: {"b": 2}')
    assert [e.data for e in events] == [{"a": 1}, {"b": 2}]
    events, parser = parse_all(b'data: {"a": 1}\n\ndata: {"b": ')
    assert [e.data for e in events] == [{"a": 1}]
    assert parser.skipped == 1


def test_json_lines_framing():
    events, _ = parse_all(jsonl([{"a": 1}, {"b": 2}]) + b"\n   \n" + b"garbage\n")
    assert [e.data for e in events] == [{"a": 1}, {"b": 2}]


def test_a_frame_over_the_limit_is_an_error():
    parser = StreamParser(max_frame=1000)
    with pytest.raises(ProtocolError, match="larger than"):
        for _ in range(20):
            parser.feed(b"data: " + b"x" * 100 + b"\n")


def test_a_huge_body_with_no_newline_fails_fast_without_buffering_it_all():
    parser = StreamParser()
    chunk = b"x" * (1024 * 1024)
    fed = 0
    with pytest.raises(ProtocolError):
        for _ in range(100):  # 100 MB offered
            parser.feed(chunk)
            fed += len(chunk)
    assert fed <= MAX_FRAME + len(chunk)


def test_one_50_mb_frame_is_refused_after_at_most_8_mb_held():
    parser = StreamParser()
    chunk = b"x" * (64 * 1024)
    fed = 0
    with pytest.raises(ProtocolError, match="larger than 8 MB") as refused:
        parser.feed(b'data: {"text": "')
        for _ in range(50 * 16):  # 50 MB of one JSON string, in 64 KB reads
            parser.feed(chunk)
            fed += len(chunk)
    assert fed <= MAX_FRAME + len(chunk)
    assert "stopped reading this answer" in refused.value.message


def test_a_whole_frame_over_the_cap_in_one_read_is_refused_too():
    for body in (b"data: " + b"1" * (MAX_FRAME + 10) + b"\n\n", b"[" + b"1" * (MAX_FRAME + 10) + b"]\n"):
        with pytest.raises(ProtocolError, match="larger than 8 MB"):
            StreamParser().feed(body)


@pytest.mark.parametrize("part", [b"{}", b'"ab"', b"[[]]", b'{"k":1}'])
def test_a_frame_of_many_tiny_parts_is_refused_before_it_is_parsed(part):
    count = 7 * 1024 * 1024 // (len(part) + 1)  # under the 8 MB frame cap
    frame = b'data: {"parts": [' + b",".join([part] * count) + b"]}\n\n"
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="more than 64 MB to read"):
            StreamParser().feed(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(frame)  # the bytes and their copies, never the parsed parts (10x and more)


def test_a_frame_nested_deeper_than_python_goes_is_skipped():
    events, parser = parse_all(b"data: " + b"[" * 100_000 + b"]" * 100_000 + b'\n\ndata: {"a": 1}\n\n')
    assert [e.data for e in events] == [{"a": 1}] and parser.skipped == 1


def test_an_html_page_yields_no_events():
    events, _ = parse_all(b"<!DOCTYPE html><html><title>Just a moment...</title></html>\n")
    assert events == []


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


def _events(pieces: list[bytes]) -> tuple[list[Event], int]:
    parser = StreamParser()
    events = []
    for piece in pieces:
        events += parser.feed(piece)
    events += parser.close()
    return events, parser.skipped


STREAMS = [fixture(n) for n in FIXTURES] + [
    sse(answer_stream(["Hello ", "wörld ", "[1]", "\r\n"])),
    sse(answer_stream(["a", "b"]), crlf=False),
    jsonl(answer_stream(["x", "y"])),
    b'data: {"a":\ndata: 1}\r\n\r\n: c\r\ndata: oops\r\n\r\nevent: end_of_stream\r\ndata: {}\r\n\r\n',
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(STREAMS))), st.lists(st.integers(min_value=0), max_size=40))
def test_any_split_of_the_bytes_gives_the_same_events(index, cuts):
    data = STREAMS[index]
    assert _events(_split(data, cuts)) == _events([data])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0), max_size=10))
def test_arbitrary_bytes_never_raise_and_split_invariantly(data, cuts):
    assert _events(_split(data, cuts)) == _events([data])


def test_events_carry_their_name():
    events, _ = parse_all(b'event: custom\ndata: {"a": 1}\n\n')
    assert events == [Event("custom", {"a": 1})]
    assert json.dumps(events[0].data)


LINES = [
    b'data: {"a": 1}',
    b'data: {"b":',
    b"data: 2}",
    b"",
    b"",
    b"event: answer",
    b": note",
    b"data: [DONE]",
    b"id: 4",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(LINES), st.sampled_from([b"\n", b"\r\n", b"\r"])), max_size=40),
    st.lists(st.integers(min_value=0), max_size=10),
)
def test_mixed_line_ends_give_the_events_of_plain_newlines(lines, cuts):
    """LF and CRLF lines are split in one pass; a lone CR goes line by line: both agree."""
    ends = [end for _, end in lines]
    for i in range(len(lines) - 1):  # CR, then an empty line's LF, is one CRLF
        if ends[i] == b"\r" and lines[i + 1][0] == b"" and ends[i + 1] != b"\r":
            ends[i] = b"\r\n"
    mixed = b"".join(line + end for (line, _), end in zip(lines, ends, strict=True))
    plain = b"".join(line + b"\n" for line, _ in lines)
    assert _events(_split(mixed, cuts)) == _events([plain])
