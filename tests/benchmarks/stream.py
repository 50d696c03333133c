"""Benchmark: parse + merge a built answer stream of 20,000 events, then 5x that; and a Deep
Research stream whose 15 KB report grows by 1,000 whole replaces, then 2,000.

    make bench        (or: .venv/bin/python -m tests.benchmarks.stream [EVENTS])

Prints events per second of CPU time and peak traced memory for each size, and the time ratio; per-event
work must not grow with the answer so far, so 5x the events should cost at most ~6x the time,
and 2x the report's replaces (at the same report size) at most 2.2x. Not a test: it only prints
figures.
"""

from __future__ import annotations

import json
import sys
import time
import tracemalloc

from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.merge import Snapshot, merge
from pplxweb.perplexity.sse import StreamParser

CHUNK = 16 * 1024


def build(events: int) -> bytes:
    """A research-sized answer: one markdown chunk per event at a growing offset, its twin
    usage, a plan patched every 50 events and sources added every 500."""
    out = [
        {"backend_uuid": "b", "read_write_token": "rw", "thread_url_slug": "s", "status": "PENDING",
         "display_model": "pplx_alpha", "user_selected_model": "pplx_alpha"},
        {"blocks": [{"intended_usage": "plan", "plan_block": {"goals": [], "progress": "IN_PROGRESS", "pct_complete": 0}}]},
    ]  # fmt: skip
    n = 0
    while len(out) < events - 1:
        chunk = f"Sentence {n} of the answer, with a citation [{n % 9 + 1}]. "
        blocks = [
            {
                "intended_usage": "ask_text",
                "markdown_block": {"chunks": [chunk], "chunk_starting_offset": n},
            },
            {
                "intended_usage": "ask_text_0_markdown",
                "markdown_block": {"chunks": [chunk], "chunk_starting_offset": n},
            },
        ]
        if n % 50 == 0:
            blocks.append({"intended_usage": "plan", "diff_block": {"field": "plan_block", "patches": [
                {"op": "add", "path": "/goals/-", "value": {"id": str(n), "description": f"Goal {n}"}},
                {"op": "replace", "path": "/pct_complete", "value": n % 100}]}})  # fmt: skip
        if n % 500 == 0:
            blocks.append({"intended_usage": "web_results", "web_result_block": {"web_results": [
                {"name": f"S{i}", "url": f"https://s{i}.example/{n}", "snippet": "x" * 200} for i in range(10)]}})  # fmt: skip
        out.append({"status": "PENDING", "blocks": blocks})
        n += 1
    out.append({"status": "COMPLETED", "final": True, "final_sse_message": True})
    body = "".join(f"event: message\r\ndata: {json.dumps(e)}\r\n\r\n" for e in out)
    return (body + "event: end_of_stream\r\ndata: {}\r\n\r\n").encode()


def replay(body: bytes) -> tuple[int, Snapshot]:
    parser, snapshot, count = StreamParser(), Snapshot(), 0
    for start in range(0, len(body), CHUNK):
        for event in parser.feed(body[start : start + CHUNK]):
            snapshot = merge(snapshot, event)
            count += 1
    return count, snapshot


def measure(body: bytes) -> tuple[int, float, float, Snapshot]:
    """Events, CPU seconds (best of five: a shared machine's load moves wall time a lot), peak
    traced MB, and the final snapshot of one replay of `body`."""
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        count, snapshot = replay(body)
        best = min(best, time.process_time() - started)
    tracemalloc.start()
    replay(body)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return count, best, peak / 1e6, snapshot


def research_body(replaces: int, size: int = 15_000) -> bytes:
    from tests.fake_perplexity.streams_2026 import report_text, research_events

    events = research_events(report_text(size), replaces=replaces)
    body = "".join(f"event: message\r\ndata: {json.dumps(e)}\r\n\r\n" for e in events)
    return (body + "event: end_of_stream\r\ndata: {}\r\n\r\n").encode()


def main() -> None:
    base = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    print(f"{'events':>8} {'seconds':>8} {'events/s':>10} {'peak MB':>8} {'answer KB':>10}")
    times = {}
    for n in (base, base * 5):
        count, seconds, peak, snapshot = measure(build(n))
        times[n] = seconds
        answer = len(extract(snapshot, ended=True).answer)
        print(f"{count:>8} {seconds:>8.3f} {count / seconds:>10,.0f} {peak:>8.1f} {answer / 1024:>10.0f}")
    print(f"5x the events took {times[base * 5] / times[base]:.2f}x the time (target: at most 6x)")
    print()
    print(f"{'replaces':>8} {'MB':>6} {'seconds':>8} {'events/s':>10} {'peak MB':>8} {'report KB':>10}")
    times = {}
    for replaces in (1000, 2000):
        body = research_body(replaces)
        count, seconds, peak, snapshot = measure(body)
        times[replaces] = seconds
        mb, report = len(body) / 1e6, len(extract(snapshot, ended=True).report)
        print(
            f"{replaces:>8} {mb:>6.1f} {seconds:>8.3f} {count / seconds:>10,.0f} {peak:>8.1f} {report / 1000:>10.1f}"
        )
    print(f"2x the report's replaces took {times[2000] / times[1000]:.2f}x the time (target: at most 2.2x)")


if __name__ == "__main__":
    main()
