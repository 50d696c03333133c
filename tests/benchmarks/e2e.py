"""Benchmark: what pplxweb adds over the network's own floor, against the fake Perplexity.

    .venv/bin/python -m tests.benchmarks.e2e

One stream (300 events, ~10 KB answer, 20 ms apart) is read (a) by a bare httpx client, the
floor, and (b) through pplxweb end to end (daphne subprocess, a websocket client timing each
update). Then 50 people search at once on one server process. Prints a table; not a test.
Both sides use plain httpx (PPLXWEB_IMPERSONATE=off) so the comparison is like for like; the
fake sends event i at i * 20 ms after the request, so both timelines share one schedule.

- first update over the floor: the first answer text's arrival through pplxweb minus its arrival
  at the bare client (pplxweb's start: socket message, database, upstream request);
- added latency per update, after the first: the same for every later update that brings new
  text, minus the first one's figure (so the one-off start is not counted 300 times);
- update over the floor, start cost included: the plain difference, for every such update;
- every answer part: for each of the 300 parts, when the first update showing it arrived, over
  the floor's arrival of it (a part waits for the next update: this includes the ~80 ms cadence);
- upstream end -> shown completed: from the stream's last byte to the update marking it done.
The final update (the whole answer rendered once more) brings no new text and is not counted
as an update. Figures are for this machine with the fake, pplxweb and the clients on it.

At 50 the floor is 50 bare clients asking at once (each part's median arrival over them): the
fake and the clients share this machine, and at 50 they are late on their own. Their own delay
over one bare client is printed first, then pplxweb's 50 over that floor.
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
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(tempfile.mkdtemp(prefix="pplxweb-e2e-bench-"))
os.environ.update(
    {
        "PPLXWEB_DATA_DIR": str(DATA),
        "DJANGO_SETTINGS_MODULE": "pplxweb.settings",
        "PPLXWEB_IMPERSONATE": os.environ.get("PPLXWEB_IMPERSONATE", "off"),
    }
)
os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)

from tests.e2e.conftest import control, start, stop  # noqa: E402

EVENTS, PACE, ROUNDS = 300, 0.02, 5
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


@dataclass
class Timeline:
    """When each answer part first arrived (seconds from the request), and when the stream ended
    (the floor: its last byte; through pplxweb: the update that marks the answer completed)."""

    parts: dict[int, float] = field(default_factory=dict)
    updates: list[tuple[float, int]] = field(default_factory=list)  # (arrival, newest part it brought)
    end: float = float("nan")
    bytes: int = 0
    ok: bool = False


async def floor(fake: str, ready: asyncio.Barrier | None = None) -> Timeline:
    """Arrival time of each answer part with a bare httpx client (with `ready`, every client
    waits until all are set up, then all ask at once)."""
    import httpx

    from tests.fake_perplexity.app import TOKEN

    seen = Timeline()
    async with httpx.AsyncClient(timeout=30) as client:  # set up (TLS context) before the clock starts
        headers = {"cookie": f"__Secure-next-auth.session-token={TOKEN}"}
        if ready is not None:
            await ready.wait()
        started = time.monotonic()
        async with client.stream(
            "POST", f"{fake}/rest/sse/perplexity_ask", content=b"{}", headers=headers
        ) as response:
            async for chunk in response.aiter_text():
                for match in PART.finditer(chunk):
                    seen.parts.setdefault(int(match.group(1)), time.monotonic() - started)
        seen.end, seen.ok = time.monotonic() - started, True
    return seen


async def through_pplxweb(
    server: str, cookie: str, question: str, ready: asyncio.Barrier | None = None
) -> Timeline:
    """Each update that brings new answer text: its arrival and the newest part in it. (The final
    update re-sends the whole answer, rendered; it brings nothing new and is timed as `end`.)
    The socket is open before the question is sent, as a page's is; with `ready`, every client
    waits until all sockets are open, then all ask at once."""
    from websockets.asyncio.client import connect

    seen = Timeline()
    async with connect(
        server.replace("http", "ws") + "/ws/search/",
        origin=server,
        additional_headers={"Cookie": cookie},
        max_size=None,
    ) as ws:
        if ready is not None:
            await ready.wait()
        started = time.monotonic()
        await ws.send(json.dumps({"q": question}))
        while True:
            message = await asyncio.wait_for(ws.recv(), 60)
            now = time.monotonic() - started
            seen.bytes += len(message.encode())
            newest = max((int(m.group(1)) for m in PART.finditer(message)), default=-1)
            if newest > max((part for _, part in seen.updates), default=-1):
                seen.updates.append((now, newest))
            if "status-completed" in message:
                seen.end, seen.ok = now, True
                return seen
            if "status-failed" in message or 'class="errors"' in message:
                if os.environ.get("BENCH_DEBUG"):
                    print(message[-600:])
                return seen


def typical(runs: list[Timeline]) -> Timeline:
    """The floor for many clients at once: each part's median arrival over all of them."""
    base = Timeline(ok=True)
    for part in runs[0].parts:
        base.parts[part] = percentile([r.parts[part] for r in runs if part in r.parts], 0.5)
    base.end = percentile([r.end for r in runs], 0.5)
    return base


async def floors(fake: str, count: int) -> list[Timeline]:
    ready = asyncio.Barrier(count)
    return await asyncio.gather(*(floor(fake, ready) for _ in range(count)))


def first_over_floor(run: Timeline, base: Timeline) -> float:
    arrival, part = run.updates[0]
    return (arrival - base.parts[part]) * 1000


def added_latency(run: Timeline, base: Timeline) -> list[float]:
    """Per update after the first: how much later than the floor it arrived, beyond the first
    update's delay (that one-off start cost is the first figure, not counted again per update)."""
    offset = first_over_floor(run, base)
    return [(arrival - base.parts[part]) * 1000 - offset for arrival, part in run.updates[1:]]


def raw_latency(run: Timeline, base: Timeline) -> list[float]:
    """Per update: arrival over the floor's arrival of the same text, start cost included."""
    return [(arrival - base.parts[part]) * 1000 for arrival, part in run.updates]


def part_latency(run: Timeline, base: Timeline) -> list[float]:
    """Per answer part (event): when the first update showing it arrived, over the floor's arrival
    of it, start cost included. Parts wait for the next update, so this includes the cadence."""
    out, updates = [], iter(run.updates)
    arrival, newest = next(updates, (float("nan"), -1))
    for part in sorted(base.parts):
        while newest < part:
            arrival, newest = next(updates, (float("nan"), 10**9))
        out.append((arrival - base.parts[part]) * 1000)
    return out


def end_over_floor(run: Timeline, base: Timeline) -> float:
    """From the upstream's last byte to the answer shown as completed, beyond the start cost."""
    return (run.end - base.end) * 1000 - first_over_floor(run, base)


def figures(pairs: list[tuple[Timeline, Timeline]]) -> dict[str, list[float]]:
    """The latency lists for searches through pplxweb, each with its floor."""
    out: dict[str, list[float]] = {"firsts": [], "adds": [], "raws": [], "parts": []}
    for run, base in pairs:
        out["firsts"].append(first_over_floor(run, base))
        out["adds"] += added_latency(run, base)
        out["raws"] += raw_latency(run, base)
        out["parts"] += part_latency(run, base)
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_mb(pid: int) -> float:
    line = next(
        row for row in Path(f"/proc/{pid}/status").read_text().splitlines() if row.startswith("VmHWM")
    )
    return int(line.split()[1]) / 1024


def profile(pid: int) -> subprocess.Popen | None:
    """With BENCH_PROFILE=FILE, py-spy samples the server during the 50 searches (raw folded
    stacks in FILE; `py-spy` must be installed in the venv)."""
    out = os.environ.get("BENCH_PROFILE")
    if not out:
        return None
    spy = Path(sys.executable).with_name("py-spy")
    command = [str(spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "500", "-o", out]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    return proc


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
        PerplexityAccount.objects.create(  # linked as by e-mail code: with Perplexity's account id
            user=user,
            session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}}),
            account_id=f"account-{n}",
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
        pairs, ends, cpus, ratios = [], [], [], []
        from search.render import render_answer

        html_size = len(render_answer("".join(answer())).encode())
        # the server's first search loads templates and code: timed on its own line, then warm rounds
        base = asyncio.run(floor(fake))
        cold = first_over_floor(asyncio.run(through_pplxweb(server, cookies[0], "cold")), base)
        for round_ in range(ROUNDS):
            base = asyncio.run(floor(fake))
            cpu_before = cpu_seconds(server_proc.pid)
            run = asyncio.run(through_pplxweb(server, cookies[0], f"one {round_}"))
            cpus.append(cpu_seconds(server_proc.pid) - cpu_before)
            assert run.ok, "the single search did not complete"
            pairs.append((run, base))
            ends.append(end_over_floor(run, base))
            ratios.append(run.bytes / html_size)

        async def crowd():
            ready = asyncio.Barrier(len(cookies) - 1)
            return await asyncio.gather(
                *(through_pplxweb(server, c, f"crowd {i}", ready) for i, c in enumerate(cookies[1:])),
                return_exceptions=True,
            )

        # the floor at 50: 50 bare clients at once (the fake and the clients share this machine)
        single = asyncio.run(floor(fake))
        crowd_floor = asyncio.run(floors(fake, len(cookies) - 1))
        base = typical(crowd_floor)
        floor_firsts = [(r.parts[min(r.parts)] - single.parts[min(r.parts)]) * 1000 for r in crowd_floor]
        floor_parts = [(r.parts[p] - single.parts[p]) * 1000 for r in crowd_floor for p in r.parts]
        cpu_before, wall_before = cpu_seconds(server_proc.pid), time.monotonic()
        others_before = cpu_seconds(fake_proc.pid) + cpu_seconds(os.getpid())
        spy = profile(server_proc.pid)
        results = asyncio.run(crowd())
        if spy is not None:
            spy.send_signal(2)
            spy.wait()
        crowd_cpu, crowd_wall = cpu_seconds(server_proc.pid) - cpu_before, time.monotonic() - wall_before
        others_cpu = cpu_seconds(fake_proc.pid) + cpu_seconds(os.getpid()) - others_before
        done = [r for r in results if not isinstance(r, BaseException) and r.ok]
        errors = len(results) - len(done)
        one, many = figures(pairs), figures([(r, base) for r in done])
        import django  # noqa: F401 - set up in people()

        from search.models import Entry

        saved = Entry.objects.filter(question__startswith="crowd", status="completed").count()

        def p50_95(values: list[float]) -> str:
            return f"{percentile(values, 0.5):.1f} / {percentile(values, 0.95):.1f}"

        rows = [
            ("first search after the server started: first update over the floor (ms)", f"{cold:.1f}"),
            (f"one search ({ROUNDS} warm rounds), p50 / p95 in ms:", ""),
            ("  first update over the floor", p50_95(one["firsts"])),
            ("  added latency per update, after the first", p50_95(one["adds"])),
            ("  update over the floor, start cost included", p50_95(one["raws"])),
            ("  every answer part: shown over the floor, with start and cadence", p50_95(one["parts"])),
            ("  upstream end -> shown completed", p50_95(ends)),
            ("websocket bytes / final answer HTML bytes", f"{max(ratios):.2f}"),
            ("server CPU seconds per search", f"{sum(cpus) / len(cpus):.3f}"),
            ("server peak memory (MB)", f"{peak_mb(server_proc.pid):.0f}"),
            ("50 bare clients at once (the floor at 50), over one bare client, p50 / p95 in ms:", ""),
            ("  first answer part", p50_95(floor_firsts)),
            ("  every answer part", p50_95(floor_parts)),
            ("50 at once through pplxweb on one process, over the floor at 50, p50 / p95 in ms:", ""),
            ("  first update over the floor", p50_95(many["firsts"])),
            ("  added latency per update, after the first", p50_95(many["adds"])),
            ("  update over the floor, start cost included", p50_95(many["raws"])),
            ("  every answer part: shown over the floor, with start and cadence", p50_95(many["parts"])),
            ("  server CPU seconds, all 50 / wall seconds", f"{crowd_cpu:.1f} / {crowd_wall:.1f}"),
            ("  the fake's and the 50 clients' CPU seconds (same machine)", f"{others_cpu:.1f}"),
            ("  errors", str(errors)),
            ("  entries saved completed", f"{saved} / 50"),
        ]
        width = max(len(r[0]) for r in rows)
        for name, value in rows:
            print(f"{name:<{width}}  {value}")
    finally:
        stop(server_proc)
        stop(fake_proc)


if __name__ == "__main__":
    main()
