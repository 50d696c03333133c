"""What the fake Perplexity sends: built answer streams, the fixtures, both framings, and the
public API's chunks (the HTTP side is app.py)."""

from __future__ import annotations

import json
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


def api_chunks(answer: list[str], model: str, complete: bool) -> list[dict]:
    """The public API's streamed chat completion (docs/protocol.md §13.1)."""
    results = [
        {"title": "Paris - Wikipedia", "url": "https://en.wikipedia.org/wiki/Paris", "date": "2026-01-01",
         "snippet": "Paris is the capital of France."},
        {"title": "Paris population", "url": "https://example.org/paris", "date": None, "snippet": "About 2.1 million."},
    ]  # fmt: skip
    citations = [r["url"] for r in results]

    def chunk(content: str = "", finish: str | None = None, **extra) -> dict:
        return {"id": "fake-api-1", "model": model, "created": 1767225600, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "finish_reason": finish, "delta": {"role": "assistant", "content": content}}],
                **extra}  # fmt: skip

    out = [chunk(part, citations=citations, search_results=results) for part in answer]
    if complete:
        usage = {
            "prompt_tokens": 9,
            "completion_tokens": 40,
            "total_tokens": 49,
            "search_context_size": "low",
        }
        out.append(chunk("", "stop", citations=citations, search_results=results, usage=usage))
    return out
