"""Benchmark: what pplxweb adds over the network's own floor, against the fake Perplexity.

    .venv/bin/python -m tests.benchmarks.e2e

One stream (300 events, ~10 KB answer, 20 ms apart) is read (a) by a bare httpx client, the
floor, and (b) through pplxweb end to end (daphne subprocess, a websocket client timing each
update). Then 50 people search at once on one server process. Prints a table; not a test.
Both sides use plain httpx (PPLXWEB_IMPERSONATE=off) so the comparison is like for like.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(tempfile.mkdtemp(prefix="pplxweb-e2e-bench-"))
os.environ.update(
    {
        "PPLXWEB_DATA_DIR": str(DATA),
        "DJANGO_SETTINGS_MODULE": "pplxweb.settings",
        "PPLXWEB_IMPERSONATE": "off",
    }
)
os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)

from tests.e2e.conftest import control, start, stop  # noqa: E402

EVENTS, PACE = 300, 0.02
PART = re.compile(r"Part (\d+) ")


def answer() -> list[str]:
    per = 10_000 // EVENTS
    return [
        (f"Part {i} of the answer. " * 3)[:per].ljust(per) + ("\n\n" if i % 12 == 11 else "")
        for i in range(EVENTS)
    ]


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else float("nan")


async def floor(fake: str) -> dict[int, float]:
    """Arrival time of each answer part with a bare httpx client."""
    import httpx

    from tests.fake_perplexity.app import TOKEN

    seen: dict[int, float] = {}
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=30) as client:
        headers = {"cookie": f"__Secure-next-auth.session-token={TOKEN}"}
        async with client.stream(
            "POST", f"{fake}/rest/sse/perplexity_ask", content=b"{}", headers=headers
        ) as response:
            async for chunk in response.aiter_text():
                for match in PART.finditer(chunk):
                    seen.setdefault(int(match.group(1)), time.monotonic() - started)
    return seen


async def through_pplxweb(
    server: str, cookie: str, question: str
) -> tuple[list[tuple[float, int]], int, bool]:
    """(arrival, highest part shown) per update, bytes, completed."""
    from websockets.asyncio.client import connect

    updates: list[tuple[float, int]] = []
    total = 0
    async with connect(
        server.replace("http", "ws") + "/ws/search/",
        origin=server,
        additional_headers={"Cookie": cookie},
        max_size=None,
    ) as ws:
        started = time.monotonic()
        await ws.send(json.dumps({"q": question}))
        while True:
            message = await asyncio.wait_for(ws.recv(), 60)
            total += len(message.encode())
            parts = [int(m.group(1)) for m in PART.finditer(message)]
            if parts:
                updates.append((time.monotonic() - started, max(parts)))
            if "status-completed" in message:
                return updates, total, True
            if "status-failed" in message or 'class="errors"' in message:
                if os.environ.get("BENCH_DEBUG"):
                    print(message[-600:])
                return updates, total, False


def added_latency(updates, base: dict[int, float]) -> list[float]:
    return [(arrival - base[part]) * 1000 for arrival, part in updates if part in base]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_mb(pid: int) -> float:
    line = next(
        row for row in Path(f"/proc/{pid}/status").read_text().splitlines() if row.startswith("VmHWM")
    )
    return int(line.split()[1]) / 1024


def people(count: int) -> list[str]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.models import PerplexityAccount
    from tests.fake_perplexity.app import TOKEN

    cookies = []
    for n in range(count):
        user = get_user_model().objects.create_user(username=f"p{n}", password="x" * 12)
        PerplexityAccount.objects.create(
            user=user, session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}})
        )
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        cookies.append(f"pplxweb_sessionid={client.cookies['pplxweb_sessionid'].value}")
    return cookies


def main() -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True)
    cookies = people(51)
    fake_proc, fake_port = start("tests.fake_perplexity.app:application", {**os.environ}, DATA / "fake.log")
    fake = f"http://127.0.0.1:{fake_port}"
    env = {**os.environ, "PPLXWEB_PERPLEXITY_URL": fake}
    server_proc, server_port = start("pplxweb.asgi:application", env, DATA / "server.log")
    server = f"http://127.0.0.1:{server_port}"
    try:
        control(fake, ask={"answer": answer(), "pace": PACE})
        firsts, adds, ratios = [], [], []
        base = asyncio.run(floor(fake))
        cpu_before = cpu_seconds(server_proc.pid)
        updates, total, ok = asyncio.run(through_pplxweb(server, cookies[0], "one"))
        cpu_one = cpu_seconds(server_proc.pid) - cpu_before
        assert ok, "the single search did not complete"
        firsts.append((updates[0][0] - base[updates[0][1]]) * 1000)
        adds += added_latency(updates, base)
        for _ in range(4):  # a few more rounds for stable percentiles
            base = asyncio.run(floor(fake))
            updates, total, ok = asyncio.run(through_pplxweb(server, cookies[0], "again"))
            firsts.append((updates[0][0] - base[updates[0][1]]) * 1000)
            adds += added_latency(updates, base)
        from search.render import render_answer

        html_size = len(render_answer("".join(answer())).encode())
        ratios.append(total / html_size)

        async def crowd():
            return await asyncio.gather(
                *(through_pplxweb(server, c, f"crowd {i}") for i, c in enumerate(cookies[1:])),
                return_exceptions=True,
            )

        base = asyncio.run(floor(fake))
        results = asyncio.run(crowd())
        errors = [r for r in results if isinstance(r, BaseException) or not r[2]]
        crowd_adds = [
            a for r in results if not isinstance(r, BaseException) for a in added_latency(r[0], base)
        ]
        import django  # noqa: F401 - set up in people()

        from search.models import Entry

        saved = Entry.objects.filter(question__startswith="crowd", status="completed").count()
        rows = [
            (
                "first update over the floor, p50 / p95 (ms)",
                f"{percentile(firsts, 0.5):.1f} / {percentile(firsts, 0.95):.1f}",
            ),
            (
                "added latency per update, p50 / p95 (ms)",
                f"{percentile(adds, 0.5):.1f} / {percentile(adds, 0.95):.1f}",
            ),
            ("websocket bytes / final answer HTML bytes", f"{ratios[0]:.2f}"),
            ("server CPU seconds per search", f"{cpu_one:.3f}"),
            ("server peak memory (MB)", f"{peak_mb(server_proc.pid):.0f}"),
            ("50 at once: update latency p95 over the floor (ms)", f"{percentile(crowd_adds, 0.95):.1f}"),
            ("50 at once: errors", str(len(errors))),
            ("50 at once: entries saved completed", f"{saved} / 50"),
        ]
        width = max(len(r[0]) for r in rows)
        for name, value in rows:
            print(f"{name:<{width}}  {value}")
    finally:
        stop(server_proc)
        stop(fake_proc)


if __name__ == "__main__":
    main()
