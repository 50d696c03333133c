"""What the fake Perplexity sends: built answer streams, the fixtures, both framings, and the
Agent API's events (the HTTP side is app.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "perplexity" / "fixtures"
DEFAULT_ANSWER = [
    "Paris is the **capital** of France [1]. ",
    "It has about two million people [2].\n\n",
    "It lies on the Seine.",
]


def events(answer: list[str], model: str = "pplx_pro", complete: bool = True) -> list[dict]:
    sources = [
        {
            "name": "Paris - Wikipedia",
            "url": "https://en.wikipedia.org/wiki/Paris",
            "snippet": "Paris is the capital of France.",
            "timestamp": "",
        },
        {
            "name": "Paris population",
            "url": "https://example.org/paris",
            "snippet": "About 2.1 million.",
            "timestamp": "",
        },
    ]
    out: list[dict] = [
        {"backend_uuid": "fake-b-1", "context_uuid": "fake-c", "read_write_token": "fake-rw", "thread_url_slug": "fake-slug",
         "display_model": model, "user_selected_model": model, "status": "PENDING"},
        {"status": "PENDING", "blocks": [{"intended_usage": "pro_search_steps", "plan_block": {"goals": [{"description": "Look it up"}],
         "steps": [{"step_type": "SEARCH_WEB", "search_web_content": {"queries": [{"query": "capital of France"}]}}]}}]},
        {"status": "PENDING", "blocks": [{"intended_usage": "web_results", "web_result_block": {"web_results": sources}}]},
    ]  # fmt: skip
    for i, chunk in enumerate(answer):
        out.append(
            {
                "status": "PENDING",
                "blocks": [
                    {
                        "intended_usage": "ask_text",
                        "markdown_block": {"chunks": [chunk], "chunk_starting_offset": i},
                    }
                ],
            }
        )
    # The PENDING `final` "trap" event carries the last diff (docs/protocol.md §5.2; the ASK1 capture's
    # carries the whole answer), and says the text is complete.
    if answer:
        out[-1].update(final=True, text_completed=True)
    else:
        out.append({"status": "PENDING", "final": True, "text_completed": True})
    if complete:
        out.append({"status": "COMPLETED", "final": True, "final_sse_message": True, "related_queries": ["What is the population of Paris?"],
                    "blocks": [{"intended_usage": "ask_text", "markdown_block": {"chunks": answer, "chunk_starting_offset": 0, "answer": "".join(answer)}}]})  # fmt: skip
    return out


def fixture_events(name: str) -> list[dict]:
    """The events of a fixture file: wire frames (`data:` lines, CRLF or LF, maybe multi-line,
    `[DONE]` skipped) or JSON lines."""
    text = (FIXTURES / Path(name).name).read_text()
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:"))
        if data and data != "[DONE]" and data != "{}":
            out.append(json.loads(data))
    return out


def frame(event: dict, framing: str = "crlf") -> bytes:
    if framing == "lf":
        return f"data: {json.dumps(event)}\n\n".encode()
    return f"event: message\r\ndata: {json.dumps(event)}\r\n\r\n".encode()


def end_frame(framing: str = "crlf") -> bytes:
    return b"data: [DONE]\n\n" if framing == "lf" else b"event: end_of_stream\r\ndata: {}\r\n\r\n"


AGENT_RESULTS = [
    {"id": 1, "title": "Paris - Wikipedia", "url": "https://en.wikipedia.org/wiki/Paris", "date": "2026-01-01",
     "last_updated": "2026-11-02", "snippet": "Paris is the capital of France.", "source": "web"},
    {"id": 2, "title": "Paris population", "url": "https://example.org/paris", "date": None,
     "snippet": "About 2.1 million.", "source": "web"},
]  # fmt: skip


def agent_events(answer: list[str], question: str, model: str, complete: bool, searched: bool) -> list[dict]:
    """The Agent API's streamed response (docs/protocol.md: OpenAI Responses' event names, one JSON
    object per `data:` line, no [DONE]; sources as a `search_results` output item)."""
    response = {"id": "resp_fake1", "object": "response", "created_at": 1767225600, "model": model,
                "status": "in_progress", "output": []}  # fmt: skip
    events: list[dict] = [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
    ]
    results = AGENT_RESULTS if searched else []
    if searched:
        events += [
            {"type": "response.reasoning.started", "thought": "Searching the web"},
            {"type": "response.reasoning.search_queries", "queries": [question[:100]]},
            {"type": "response.reasoning.search_results", "results": results},
            {"type": "response.reasoning.stopped"},
        ]
    message = {
        "type": "message",
        "id": "msg_fake1",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    events.append({"type": "response.output_item.added", "output_index": 1, "item": message})
    events += [  # a delta per word or so, as a model streams tokens
        {"type": "response.output_text.delta", "item_id": "msg_fake1", "output_index": 1, "content_index": 0,
         "delta": word}
        for part in answer for word in re.findall(r"\S+\s*|\s+", part)
    ]  # fmt: skip
    if complete:
        text = "".join(answer)
        done = {
            **message,
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        output = (
            [{"type": "search_results", "queries": [question[:100]], "results": results}] if searched else []
        )
        usage = {"input_tokens": 9, "output_tokens": 40, "total_tokens": 49,
                 "cost": {"currency": "USD", "input_cost": 0.0, "output_cost": 0.0, "total_cost": 0.005}}  # fmt: skip
        events += [
            {"type": "response.output_text.done", "item_id": "msg_fake1", "output_index": 1, "content_index": 0,
             "text": text},
            {"type": "response.output_item.done", "output_index": 1, "item": done},
            {"type": "response.completed",
             "response": {**response, "status": "completed", "output": [*output, done], "usage": usage}},
        ]  # fmt: skip
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events
