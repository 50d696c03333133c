"""Benchmark: what pplxweb adds over the network's own floor, against the fake Perplexity.

    .venv/bin/python -m tests.benchmarks.e2e

One stream (300 events, ~10 KB answer, 20 ms apart) is read (a) by a bare httpx client, the
floor, and (b) through pplxweb end to end (daphne subprocess, a websocket client timing each
update). Then 50 people search at once on one server process, in BENCH_CROWDS rounds (3;
the figures are pooled). Prints a table; not a test.
Both sides use plain httpx on the same sockets (PPLXWEB_IMPERSONATE=off, and the bare client
takes pplxweb's plain transport, pplxweb/perplexity/network.py), so the comparison is like for
like; the fake sends event i at i * 20 ms after the request, so both timelines share one
schedule. Its built stream carries the last chunk in the PENDING `final` event, as the captures do.

- first update over the floor: the first answer text's arrival through pplxweb minus its arrival
  at the bare client, start included (socket message, database, upstream request);
- pplxweb's start: from the question sent to the fake starting its stream, over the same for the
  bare client (the fake records when each stream's schedule started, on the machine's monotonic
  clock, which every process shares);
- added latency per update: for every update that brings new text, from the fake starting that
  stream to the update's arrival, over the same for the floor's arrival of that text. It is what
  pplxweb adds to each part it relays, its start apart (the start is the figure above). At 50 it
  is also split into each answer's first update, its middle ones and its last: the slow ones
  gather in the first (the starts' burst) and the last (the ends' burst);
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
import itertools
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
from tests.e2e.conftest import seen as fake_requests  # noqa: E402

EVENTS, PACE, ROUNDS = 300, 0.02, 5
CROWDS = int(os.environ.get("BENCH_CROWDS", 3))  # rounds of 50 at once
FLOORS = itertools.count()
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
    name: str = ""  # how the fake's record of its stream is found
    asked: float = 0.0  # time.monotonic() when the question (or the bare request) was sent
    lead: float = float("nan")  # from `asked` to the fake starting the stream's schedule


async def floor(fake: str, ready: asyncio.Barrier | None = None) -> Timeline:
    """Arrival time of each answer part with a bare httpx client (with `ready`, every client
    waits until all are set up, then all ask at once)."""
    import httpx

    from pplxweb.perplexity.transport import make_transport
    from tests.fake_perplexity.app import TOKEN

    seen = Timeline(name=f"floor {next(FLOORS)}")
    async with httpx.AsyncClient(transport=make_transport("off"), timeout=30) as client:  # set up first
        headers = {"cookie": f"__Secure-next-auth.session-token={TOKEN}", "x-bench": seen.name}
        if ready is not None:
            await ready.wait()
        started = seen.asked = time.monotonic()
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

    seen = Timeline(name=question)
    async with connect(
        server.replace("http", "ws") + "/ws/search/",
        origin=server,
        additional_headers={"Cookie": cookie},
        max_size=None,
    ) as ws:
        if ready is not None:
            await ready.wait()
        started = seen.asked = time.monotonic()
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
    """The floor for many clients at once: each part's median arrival over all of them, counted
    from the fake starting each one's stream, after the median lead."""
    base = Timeline(ok=True, lead=percentile([r.lead for r in runs], 0.5))
    for part in runs[0].parts:
        relays = [r.parts[part] - r.lead for r in runs if part in r.parts]
        base.parts[part] = base.lead + percentile(relays, 0.5)
    base.end = base.lead + percentile([r.end - r.lead for r in runs], 0.5)
    return base


async def floors(fake: str, count: int) -> list[Timeline]:
    ready = asyncio.Barrier(count)
    return await asyncio.gather(*(floor(fake, ready) for _ in range(count)))


def find_leads(fake: str, runs: list[Timeline]) -> None:
    """Each run's lead: when the fake started its stream (its record, found by the bare client's
    header or pplxweb's question), from when it was asked."""
    started = {}
    for record in fake_requests(fake):
        if "schedule_started" in record:
            name = record["headers"].get("x-bench") or json.loads(record["body"]).get("query_str")
            started[name] = record["schedule_started"]
    for run in runs:
        run.lead = started[run.name] - run.asked


def first_over_floor(run: Timeline, base: Timeline) -> float:
    arrival, part = run.updates[0]
    return (arrival - base.parts[part]) * 1000


def start_over_floor(run: Timeline, base: Timeline) -> float:
    return (run.lead - base.lead) * 1000


def added_latency(run: Timeline, base: Timeline) -> list[float]:
    """Per update: from the fake starting the stream to the update's arrival, over the same for
    the floor's arrival of that text (pplxweb's start before the stream is not in it)."""
    return [((arrival - run.lead) - (base.parts[part] - base.lead)) * 1000 for arrival, part in run.updates]


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
    """From the upstream's last byte to the answer shown as completed (its start apart)."""
    return ((run.end - run.lead) - (base.end - base.lead)) * 1000


def figures(pairs: list[tuple[Timeline, Timeline]]) -> dict[str, list[float]]:
    """The latency lists for searches through pplxweb, each with its floor."""
    out: dict[str, list[float]] = {
        **{key: [] for key in ("firsts", "starts", "adds", "raws", "parts")},
        **{key: [] for key in ("adds_first", "adds_middle", "adds_last")},
    }
    for run, base in pairs:
        out["firsts"].append(first_over_floor(run, base))
        out["starts"].append(start_over_floor(run, base))
        adds = added_latency(run, base)
        out["adds"] += adds
        if adds:  # where the slow ones are: an answer's first update, its middle, its last
            out["adds_first"].append(adds[0])
            out["adds_middle"] += adds[1:-1]
            out["adds_last"].append(adds[-1])
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
    stacks in FILE; `py-spy` must be installed in the venv: 0.3.14 reads this Python, 0.4 did
    not). BENCH_PROFILE_WINDOW=DELAY,SECONDS (whole seconds) samples only that part of them;
    BENCH_PROFILE_ROUND=N the Nth round (0, the first, is everyone's first search)."""
    out = os.environ.get("BENCH_PROFILE")
    if not out:
        return None
    spy = Path(sys.executable).with_name("py-spy")
    command = [
        str(spy),
        "record",
        "--pid",
        str(pid),
        "--format",
        "raw",
        "--rate",
        "500",
        "-o",
        out,
        *os.environ.get("BENCH_PROFILE_ARGS", "").split(),
    ]
    if os.environ.get("BENCH_PROFILE_WINDOW"):  # "delay,seconds": only that part of the 50
        delay, seconds = os.environ["BENCH_PROFILE_WINDOW"].split(",")
        command = ["sh", "-c", f"sleep {delay}; exec {' '.join(command)} --duration {seconds}"]
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


@dataclass
class Crowd:
    """One round of 50 at once: each search with the floor at 50, and what it cost."""

    pairs: list[tuple[Timeline, Timeline]]
    errors: int
    floor_firsts: list[float]
    floor_parts: list[float]
    floor_spread: list[float]
    cpu: float
    wall: float
    others: float

    @property
    def adds(self) -> list[float]:
        return figures(self.pairs)["adds"]


def crowd(fake: str, server: str, cookies: list[str], round_: int, fake_pid: int, server_pid: int) -> Crowd:
    """The floor at 50 (50 bare clients at once; the fake and the clients share this machine),
    then 50 people asking pplxweb at once."""

    async def everyone():
        ready = asyncio.Barrier(len(cookies))
        return await asyncio.gather(
            *(through_pplxweb(server, c, f"crowd {round_} {i}", ready) for i, c in enumerate(cookies)),
            return_exceptions=True,
        )

    single = asyncio.run(floor(fake))
    crowd_floor = asyncio.run(floors(fake, len(cookies)))
    cpu_before, wall_before = cpu_seconds(server_pid), time.monotonic()
    others_before = cpu_seconds(fake_pid) + cpu_seconds(os.getpid())
    spy = profile(server_pid) if round_ == int(os.environ.get("BENCH_PROFILE_ROUND", 0)) else None
    results = asyncio.run(everyone())
    if spy is not None:
        if not os.environ.get("BENCH_PROFILE_WINDOW"):
            spy.send_signal(2)
        spy.wait()
    cpu, wall = cpu_seconds(server_pid) - cpu_before, time.monotonic() - wall_before
    others = cpu_seconds(fake_pid) + cpu_seconds(os.getpid()) - others_before
    done = [r for r in results if not isinstance(r, BaseException) and r.ok]
    find_leads(fake, crowd_floor + done)
    base = typical(crowd_floor)
    if os.environ.get("BENCH_DUMP"):
        Path(f"{os.environ['BENCH_DUMP']}.{round_}").write_text(
            json.dumps({"floor": [vars(r) for r in crowd_floor], "runs": [vars(r) for r in done]})
        )
    return Crowd(
        pairs=[(r, base) for r in done],
        errors=len(results) - len(done),
        floor_firsts=[(r.parts[min(r.parts)] - single.parts[min(r.parts)]) * 1000 for r in crowd_floor],
        floor_parts=[(r.parts[p] - single.parts[p]) * 1000 for r in crowd_floor for p in r.parts],
        # how far one bare client's relay of a part strays from the 50's median: the machine's noise
        floor_spread=[
            ((r.parts[p] - r.lead) - (base.parts[p] - base.lead)) * 1000 for r in crowd_floor for p in r.parts
        ],
        cpu=cpu,
        wall=wall,
        others=others,
    )


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
        pairs, cpus, ratios = [], [], []
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
            ratios.append(run.bytes / html_size)
        find_leads(fake, [timeline for pair in pairs for timeline in pair])
        ends = [end_over_floor(run, base) for run, base in pairs]

        crowds = [
            crowd(fake, server, cookies[1:], round_, fake_proc.pid, server_proc.pid)
            for round_ in range(CROWDS)
        ]
        many = figures([pair for c in crowds for pair in c.pairs])
        errors = sum(c.errors for c in crowds)
        one = figures(pairs)
        import django  # noqa: F401 - set up in people()

        from search.models import Entry

        saved = Entry.objects.filter(question__startswith="crowd", status="completed").count()
        per_round = ", ".join(f"{percentile(c.adds, 0.95):.1f}" for c in crowds)

        def p50_95(values: list[float]) -> str:
            return f"{percentile(values, 0.5):.1f} / {percentile(values, 0.95):.1f}"

        rows = [
            ("first search after the server started: first update over the floor (ms)", f"{cold:.1f}"),
            (f"one search ({ROUNDS} warm rounds), p50 / p95 in ms:", ""),
            ("  first update over the floor (start included)", p50_95(one["firsts"])),
            ("  pplxweb's start: question sent -> Perplexity asked, over the floor's", p50_95(one["starts"])),
            ("  added latency per update (its start apart)", p50_95(one["adds"])),
            ("  update over the floor, start cost included", p50_95(one["raws"])),
            ("  every answer part: shown over the floor, with start and cadence", p50_95(one["parts"])),
            ("  upstream end -> shown completed", p50_95(ends)),
            ("websocket bytes / final answer HTML bytes", f"{max(ratios):.2f}"),
            ("server CPU seconds per search", f"{sum(cpus) / len(cpus):.3f}"),
            ("server peak memory (MB)", f"{peak_mb(server_proc.pid):.0f}"),
            (
                f"50 bare clients at once (the floor at 50), over one bare client ({CROWDS} rounds), p50 / p95 in ms:",
                "",
            ),
            ("  first answer part", p50_95([x for c in crowds for x in c.floor_firsts])),
            ("  every answer part", p50_95([x for c in crowds for x in c.floor_parts])),
            (
                "  every answer part, from its stream's start, over the 50's median",
                p50_95([x for c in crowds for x in c.floor_spread]),
            ),
            (
                f"50 at once through pplxweb on one process ({CROWDS} rounds), over the floor at 50, p50 / p95 in ms:",
                "",
            ),
            ("  first update over the floor (start included)", p50_95(many["firsts"])),
            (
                "  pplxweb's start: question sent -> Perplexity asked, over the floor's",
                p50_95(many["starts"]),
            ),
            ("  added latency per update (its start apart)", p50_95(many["adds"])),
            ("    the same, p95 of each round", per_round),
            (
                "    the same for each answer's first / middle / last updates (p50 / p95)",
                "; ".join(p50_95(many[k]) for k in ("adds_first", "adds_middle", "adds_last")),
            ),
            ("  update over the floor, start cost included", p50_95(many["raws"])),
            ("  every answer part: shown over the floor, with start and cadence", p50_95(many["parts"])),
            (
                "  server CPU seconds, all 50 / wall seconds (per round)",
                f"{sum(c.cpu for c in crowds) / CROWDS:.1f} / {sum(c.wall for c in crowds) / CROWDS:.1f}",
            ),
            (
                "  the fake's and the 50 clients' CPU seconds (same machine, per round)",
                f"{sum(c.others for c in crowds) / CROWDS:.1f}",
            ),
            ("  errors", str(errors)),
            ("  entries saved completed", f"{saved} / {50 * CROWDS}"),
        ]
        width = max(len(r[0]) for r in rows)
        for name, value in rows:
            print(f"{name:<{width}}  {value}")
    finally:
        stop(server_proc)
        stop(fake_proc)


if __name__ == "__main__":
    main()
