"""Benchmark: what one streamed answer costs on the websocket.

    .venv/bin/python -m tests.benchmarks.live

Serves a 300-event answer of about 10 KB from the fake Perplexity (20 ms apart), asks it
through the real consumer and run, and prints the websocket bytes divided by the final answer
HTML's size (target: at most 3), the number of updates and the server CPU the answer took (this
process: the run, its fragments, the consumer). Not a test: it only prints figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time

os.environ["PPLXWEB_DATA_DIR"] = tempfile.mkdtemp(prefix="pplxweb-bench-")
os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"

from tests.e2e.conftest import control, start, stop


def answer_chunks(events: int = 300, size: int = 10_000, citations: bool = True) -> list[str]:
    per = size // events
    chunks = []
    for i in range(events):
        word = f"Part {i} of the answer{' [1]' if citations else ''} "
        chunk = (word * (per // len(word) + 1))[:per]
        chunks.append(chunk + ("\n\n" if i % 12 == 11 else ""))
    return chunks


async def measure(base_url: str) -> dict:
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.models import PerplexityAccount
    from pplxweb.asgi import application
    from search.models import Entry
    from search.render import render_answer
    from tests.fake_perplexity.app import TOKEN

    def setup():
        user = get_user_model().objects.create_user(username=f"bench{time.time_ns()}", password="x" * 12)
        PerplexityAccount.objects.create(
            user=user, session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}})
        )
        client = Client()
        client.force_login(user)
        return client.cookies["pplxweb_sessionid"].value

    from asgiref.sync import sync_to_async

    session = await sync_to_async(setup)()
    comm = WebsocketCommunicator(
        application,
        "/ws/search/",
        headers=[
            (b"origin", b"http://localhost"),
            (b"host", b"localhost"),
            (b"cookie", f"pplxweb_sessionid={session}".encode()),
        ],
    )
    assert (await comm.connect())[0]
    started = time.monotonic()
    cpu = time.process_time()  # pplxweb's consumer and run live in this process (the fake does not)
    await comm.send_to(text_data=json.dumps({"q": "benchmark"}))
    total, messages, arrivals = 0, 0, []
    import re
    from collections import Counter

    parts: Counter = Counter()
    while True:
        message = await comm.receive_from(timeout=30)
        for match in re.finditer(r'<(\w+) id="([^"]+)"[^>]*hx-swap-oob="([^"]+)"', message):
            parts[f"{re.sub(r'[0-9]+', 'N', match.group(2))} {match.group(3)}"] += 0
        chunks = re.split(r'(?=<\w+ id="[^"]+"[^>]*hx-swap-oob=)', message)
        for chunk in chunks:
            m = re.match(r'<\w+ id="([^"]+)"[^>]*hx-swap-oob="([^"]+)"', chunk)
            if m:
                parts[f"{re.sub(r'[0-9]+', 'N', m.group(1))} {m.group(2)}"] += len(chunk.encode())
        messages += 1
        total += len(message.encode())
        arrivals.append(time.monotonic() - started)
        if "status-completed" in message or "status-failed" in message:
            break
    cpu = time.process_time() - cpu
    await comm.disconnect()
    if os.environ.get("BENCH_DETAIL"):
        print(parts.most_common())
    entry = await Entry.objects.alatest("pk")
    final_html = render_answer(entry.answer, entry.sources)
    return {
        "status": entry.status,
        "answer_markdown": len(entry.answer.encode()),
        "final_answer_html": len(final_html.encode()),
        "ws_bytes": total,
        "ratio": total / len(final_html.encode()),
        "updates": messages,
        "started_shown_ms": arrivals[0] * 1000,  # the entry with its running status, before any upstream byte
        "seconds": arrivals[-1],
        "server_cpu_ms": cpu * 1000,  # the whole answer: run, fragments, consumer, socket
    }


def main() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    from pathlib import Path

    log = Path(os.environ["PPLXWEB_DATA_DIR"]) / "fake.log"
    proc, port = start("tests.fake_perplexity.app:application", {**os.environ}, log)
    base = f"http://127.0.0.1:{port}"
    from django.conf import settings

    settings.PERPLEXITY_URL = base
    settings.PERPLEXITY_IMPERSONATE = "off"
    results = {}
    try:
        for name, citations in (("with citations", True), ("plain text", False)):
            control(base, ask={"answer": answer_chunks(citations=citations), "pace": 0.02})
            results[name] = asyncio.run(measure(base))
    finally:
        stop(proc)
    print(f"{'':>18}  " + "  ".join(f"{name:>15}" for name in results))
    for key in next(iter(results.values())):
        cells = [results[name][key] for name in results]
        print(
            f"{key:>18}: " + "  ".join(f"{c:>15.2f}" if isinstance(c, float) else f"{c!s:>15}" for c in cells)
        )
    sys.exit(0 if all(r["status"] == "completed" for r in results.values()) else 1)


if __name__ == "__main__":
    main()
