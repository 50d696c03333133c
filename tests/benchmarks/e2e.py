"""Benchmark: what pplxweb adds over the network's own floor, against the fake Perplexity.

    .venv/bin/python -m tests.benchmarks.e2e [--plain] [--crowd N] [--one-core] [--fake-port P] [--json]

The fake Perplexity is served over TLS (a self-signed certificate made at run time,
tests/benchmarks/tls.py), so pplxweb talks to it as a real install talks to Perplexity: through
its default transport, curl_cffi (`--plain`: httpx's own, PPLXWEB_IMPERSONATE=off). One stream
(300 events, ~10 KB answer, 20 ms apart) is read (a) by a bare client on the same transport, the
floor, and (b) through pplxweb end to end (`manage.py serve` in a subprocess, as people start
it; a websocket client timing each update): one search at a time (ROUNDS of them), then a
household's crowd asking at once (`--crowd N`, default 10; 50 is the old target), in CROWDS
rounds, each against the floor of N bare clients at once. The fake sends event i at i * 20 ms after the request, so both timelines
share one schedule. Prints a table (`--json`: one JSON object); not a test.

`--one-core` pins the server to CPU 1 (os.sched_setaffinity), as on a small machine; with one
CPU, or where the pinning is refused, it says so and measures anyway. Do not run the benchmark
under `taskset`: it pins the server itself. `--fake-port P` serves the fake on P (if P is taken,
it says so and takes a free one).

Figures, for 1 and N at once (p50 / p95 in ms):
- added latency per update: for every update that brings new text, from the fake starting that
  stream to the update's arrival, over the same for the floor's arrival of that text (pplxweb's
  start apart);
- first update over the floor: the first answer text's arrival through pplxweb minus its arrival
  at the bare client, start included (socket message, database, upstream request). The bare
  client connects afresh for each search (a TLS handshake) while pplxweb reuses its connection
  to the account's upstream (curl) or pays the same handshake (plain), so this can go below zero;
- server CPU seconds per answer (the server's user + system time over the searches, divided),
  and for one search also the bare client's own CPU per answer: what the transport alone costs
  (a fresh connection each time; the server keeps its connection), the part of the server's
  figure pplxweb cannot cut;
- server RSS: idle (after start and a first search, with nothing running) and peak (VmHWM).
The final update (the whole answer rendered once more) brings no new text and is not counted.
Figures are for this machine with the fake, pplxweb and the clients on it: say the load
(`uptime`) next to them.

BENCH_PROFILE=FILE samples the server with py-spy during the crowd's first round (raw folded
stacks; py-spy on PATH or beside this Python).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.benchmarks import tls

DATA = Path(tempfile.mkdtemp(prefix="pplxweb-e2e-bench-"))
AUTHORITY, CERT, KEY = tls.make(DATA)
os.environ.update(
    {
        "PPLXWEB_DATA_DIR": str(DATA),
        "DJANGO_SETTINGS_MODULE": "pplxweb.settings",
        "SSL_CERT_FILE": str(AUTHORITY),  # curl_cffi, httpx and urllib trust the fake's certificate
    }
)
os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)

from tests.benchmarks.servers import SERVERS, command, cpu_seconds, end_cleanly_on_sigterm, memory_mb, tree  # noqa: E402
from tests.e2e.conftest import ROOT, control, free_port, start, stop, wait_for  # noqa: E402
from tests.e2e.conftest import seen as fake_requests  # noqa: E402

EVENTS, PACE = 300, 0.02
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 5))  # single searches
CROWDS = int(os.environ.get("BENCH_CROWDS", 3))  # rounds of the crowd
SERVER_CPU = 1
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
    """When each answer part first arrived (seconds from the request)."""

    parts: dict[int, float] = field(default_factory=dict)
    updates: list[tuple[float, int]] = field(default_factory=list)  # (arrival, newest part it brought)
    ok: bool = False
    name: str = ""  # how the fake's record of its stream is found
    asked: float = 0.0  # time.monotonic() when the question (or the bare request) was sent
    lead: float = float("nan")  # from `asked` to the fake starting the stream's schedule


async def floor(fake: str, impersonate: str, ready: asyncio.Barrier | None = None) -> Timeline:
    """Arrival time of each answer part with a bare client on pplxweb's transport (with `ready`,
    every client waits until all are set up, then all ask at once)."""
    import httpx

    from pplxweb.perplexity.transport import make_transport
    from tests.fake_perplexity.app import TOKEN

    seen = Timeline(name=f"floor {next(FLOORS)}")
    async with httpx.AsyncClient(transport=make_transport(impersonate), timeout=30) as client:
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
        seen.ok = True
    return seen


async def through_pplxweb(
    server: str, cookie: str, question: str, ready: asyncio.Barrier | None = None
) -> Timeline:
    """Each update that brings new answer text: its arrival and the newest part in it. The socket
    is open before the question is sent, as a page's is; with `ready`, every client waits until
    all sockets are open, then all ask at once."""
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
            newest = max((int(m.group(1)) for m in PART.finditer(message)), default=-1)
            if newest > max((part for _, part in seen.updates), default=-1):
                seen.updates.append((now, newest))
            if "status-completed" in message:
                seen.ok = True
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
    return base


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


def figures(pairs: list[tuple[Timeline, Timeline]]) -> dict[str, list[float]]:
    """Per search: its first update over the floor (start included); per update: its added
    latency (from the fake starting the stream, over the floor's same; the start apart)."""
    out: dict[str, list[float]] = {"firsts": [], "adds": []}
    for run, base in pairs:
        arrival, part = run.updates[0]
        out["firsts"].append((arrival - base.parts[part]) * 1000)
        out["adds"] += [
            ((arrival - run.lead) - (base.parts[part] - base.lead)) * 1000 for arrival, part in run.updates
        ]
    return out


def serve_fake(env: dict, log: Path, port: int) -> subprocess.Popen:
    """The fake Perplexity on loopback, over TLS with the benchmark's certificate."""
    proc, _ = start("tests.fake_perplexity.app:application", env, log, port, tls=(CERT, KEY))
    return proc


def serve_pplxweb(env: dict, log: Path, server: str = "granian") -> tuple[subprocess.Popen, int]:
    """pplxweb as people start it: `manage.py serve`, which prepares, then becomes the server
    (pplxweb/server.py, the same process); or, to compare, under another ASGI server with its
    own options (tests/benchmarks/front_door.py `command`)."""
    port = free_port()
    env = {**env, "PPLXWEB_BIND": f"127.0.0.1:{port}"}
    if server == "granian":
        return started([sys.executable, "manage.py", "serve"], env, log, port), port

    return started(command(server, port), env, log, port), port


def floor_memory(fake: str, notes: list[str], pinned: bool, server_name: str = "granian") -> float:
    """The idle memory of the floor: the same server command line serving the same libraries
    with no pplxweb code (tests/benchmarks/floor.py), after a page and a request to the fake
    Perplexity through curl_cffi."""
    import urllib.parse
    import urllib.request

    port = free_port()
    env = {**os.environ, "FLOOR_DATA_DIR": str(DATA / "floor")}
    (DATA / "floor").mkdir(exist_ok=True)
    proc = started(command(server_name, port, app="tests.benchmarks.floor:application"), env,
                   DATA / "floor.log", port)  # fmt: skip
    try:
        if pinned:
            pin(proc.pid, notes)
        base = f"http://127.0.0.1:{port}"
        for path in ("/", f"/upstream?url={urllib.parse.quote(fake + '/_requests')}"):
            with urllib.request.urlopen(base + path, timeout=30) as response:  # noqa: S310 - loopback
                response.read()
        time.sleep(1.5)
        return memory_mb(proc.pid, "VmRSS")
    finally:
        stop(proc)


def started(command: list[str], env: dict, log: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    wait_for(proc, port, log)
    return proc


def fake_port(asked: int | None, notes: list[str]) -> int:
    """The port asked for if it is free, else a free one (said in `notes`)."""
    if not asked:
        return free_port()
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", asked))
        except OSError:
            port = free_port()
            notes.append(f"Port {asked} is taken, so the fake Perplexity serves on port {port} instead.")
            return port
    return asked


def pin(pid: int, notes: list[str]) -> bool:
    """The server on CPU SERVER_CPU alone; a sentence in `notes` when that cannot be done."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if len(cpus) < 2 or SERVER_CPU not in cpus:
        notes.append(
            f"--one-core: this machine lets the benchmark use {len(cpus) or 'an unknown number of'} CPU(s), "
            f"so the server could not be given CPU {SERVER_CPU} of its own; measured unpinned."
        )
        return False
    try:
        for proc in tree(pid):  # every thread of each process (the affinity is per thread)
            for task in Path(f"/proc/{proc}/task").iterdir():
                os.sched_setaffinity(int(task.name), {SERVER_CPU})
    except OSError as exc:
        notes.append(
            f"--one-core: pinning the server to CPU {SERVER_CPU} was refused ({exc}); measured unpinned."
        )
        return False
    return True


def profile(pid: int) -> subprocess.Popen | None:
    """With BENCH_PROFILE=FILE, py-spy samples the server (raw folded stacks in FILE)."""
    out = os.environ.get("BENCH_PROFILE")
    if not out:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    worker = tree(pid)[-1]
    command = [spy, "record", "--pid", str(worker), "--format", "raw", "--rate", "250", "-o", out]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=(DATA / "py-spy.log").open("w"))
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
    pairs: list[tuple[Timeline, Timeline]]
    errors: int
    cpu: float


def crowd(
    fake: str, server: str, cookies: list[str], round_: int, impersonate: str, server_pid: int
) -> Crowd:
    """The floor for N (N bare clients at once), then N people asking pplxweb at once."""

    async def floors():
        ready = asyncio.Barrier(len(cookies))
        return await asyncio.gather(*(floor(fake, impersonate, ready) for _ in cookies))

    async def everyone():
        ready = asyncio.Barrier(len(cookies))
        return await asyncio.gather(
            *(through_pplxweb(server, c, f"crowd {round_} {i}", ready) for i, c in enumerate(cookies)),
            return_exceptions=True,
        )

    crowd_floor = asyncio.run(floors())
    cpu_before = cpu_seconds(server_pid)
    spy = profile(server_pid) if round_ == 0 else None
    results = asyncio.run(everyone())
    if spy is not None:
        spy.send_signal(2)
        spy.wait()
    cpu = cpu_seconds(server_pid) - cpu_before
    done = [r for r in results if not isinstance(r, BaseException) and r.ok]
    find_leads(fake, crowd_floor + done)
    base = typical(crowd_floor)
    return Crowd(pairs=[(r, base) for r in done], errors=len(results) - len(done), cpu=cpu)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.e2e", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--plain", action="store_true", help="httpx's own transport (PPLXWEB_IMPERSONATE=off)"
    )
    parser.add_argument(
        "--crowd", type=int, default=10, metavar="N", help="people asking at once (default 10)"
    )
    parser.add_argument("--one-core", action="store_true", help=f"pin the server to CPU {SERVER_CPU}")
    parser.add_argument("--fake-port", type=int, metavar="P", help="serve the fake Perplexity on this port")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--server",
        choices=SERVERS,
        default="granian",
        help="the ASGI server (granian: as manage.py serve starts it; the others, to compare)",
    )
    args = parser.parse_args(argv)
    if args.crowd < 1:
        parser.error("--crowd takes a number of people, at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    end_cleanly_on_sigterm()
    args = arguments(argv)
    impersonate = "off" if args.plain else os.environ.get("PPLXWEB_IMPERSONATE", "chrome")
    notes: list[str] = []
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True, cwd=ROOT)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True, cwd=ROOT)
    cookies = people(args.crowd + 1)
    port = fake_port(args.fake_port, notes)
    fake_proc = serve_fake({**os.environ}, DATA / "fake.log", port)
    fake = f"https://127.0.0.1:{port}"
    env = {**os.environ, "PPLXWEB_PERPLEXITY_URL": fake, "PPLXWEB_IMPERSONATE": impersonate}
    server_proc, server_port = serve_pplxweb(env, DATA / "server.log", args.server)
    server = f"http://127.0.0.1:{server_port}"
    pinned = pin(server_proc.pid, notes) if args.one_core else False
    try:
        control(fake, ask={"answer": answer(), "pace": PACE})
        # the server's first search loads templates and code: not counted
        asyncio.run(through_pplxweb(server, cookies[0], "cold"))
        time.sleep(1.5)  # the idle collection after the last answer (pplxweb/collector.py)
        idle = memory_mb(server_proc.pid, "VmRSS")
        idle_floor = floor_memory(fake, notes, pinned, args.server)
        pairs, cpus, bare_cpus = [], [], []
        for round_ in range(ROUNDS):
            bare_before = time.process_time()  # this process runs the bare client alone here
            base = asyncio.run(floor(fake, impersonate))
            bare_cpus.append(time.process_time() - bare_before)
            cpu_before = cpu_seconds(server_proc.pid)
            run = asyncio.run(through_pplxweb(server, cookies[0], f"one {round_}"))
            cpus.append(cpu_seconds(server_proc.pid) - cpu_before)
            if not run.ok:
                raise SystemExit(f"the single search did not complete (server log: {DATA / 'server.log'})")
            pairs.append((run, base))
        find_leads(fake, [timeline for pair in pairs for timeline in pair])
        crowds = [
            crowd(fake, server, cookies[1:], round_, impersonate, server_proc.pid) for round_ in range(CROWDS)
        ]
        one, many = figures(pairs), figures([pair for c in crowds for pair in c.pairs])
        import django  # noqa: F401 - set up in people()

        from search.models import Entry

        saved = Entry.objects.filter(question__startswith="crowd", status="completed").count()
        result = {
            "server": args.server,
            "transport": "httpx (plain)" if impersonate == "off" else f"curl_cffi ({impersonate})",
            "server pinned to one CPU": pinned,
            "crowd": args.crowd,
            "rounds": {"one": ROUNDS, "crowd": CROWDS},
            "load": os.getloadavg()[0],
            "one": {
                "added latency per update p50": percentile(one["adds"], 0.5),
                "added latency per update p95": percentile(one["adds"], 0.95),
                "first update over the floor p50": percentile(one["firsts"], 0.5),
                "first update over the floor p95": percentile(one["firsts"], 0.95),
                "server CPU s per answer": sum(cpus) / len(cpus),
                "bare client CPU s per answer": sum(bare_cpus) / len(bare_cpus),
            },
            "crowd figures": {
                "added latency per update p50": percentile(many["adds"], 0.5),
                "added latency per update p95": percentile(many["adds"], 0.95),
                "added latency per update p95 per round": [
                    percentile(figures(c.pairs)["adds"], 0.95) for c in crowds
                ],
                "first update over the floor p50": percentile(many["firsts"], 0.5),
                "first update over the floor p95": percentile(many["firsts"], 0.95),
                "server CPU s per answer": sum(c.cpu for c in crowds) / (args.crowd * CROWDS),
                "errors": sum(c.errors for c in crowds),
                "saved completed": saved,
                "asked": args.crowd * CROWDS,
            },
            "idle RSS MB": idle,
            "floor idle RSS MB": idle_floor,
            "peak RSS MB": memory_mb(server_proc.pid, "VmHWM"),
            "notes": notes,
        }
    finally:
        stop(server_proc)
        stop(fake_proc)
    result["targets"] = {name: verdict for name, _, _, _, verdict in targets(result)}
    if args.json:
        print(json.dumps(result))
        return
    report(result)


def report(result: dict) -> None:
    for note in result["notes"]:
        print(note)
    n, one, many = result["crowd"], result["one"], result["crowd figures"]

    def both(figs: dict, name: str) -> str:
        return f"{figs[f'{name} p50']:.1f} / {figs[f'{name} p95']:.1f}"

    rows = [
        (
            "transport; server pinned to one CPU",
            f"{result['transport']}; {'yes' if result['server pinned to one CPU'] else 'no'}",
        ),
        ("load average (1 min) at the end", f"{result['load']:.2f}"),
        (f"one search ({result['rounds']['one']} rounds), p50 / p95 ms:", ""),
        ("  added latency per update", both(one, "added latency per update")),
        ("  first update over the floor (start included)", both(one, "first update over the floor")),
        ("  server CPU s per answer", f"{one['server CPU s per answer']:.3f}"),
        (
            "  the bare client's CPU s per answer (same transport)",
            f"{one['bare client CPU s per answer']:.3f}",
        ),
        (
            f"{n} at once ({result['rounds']['crowd']} rounds), over the floor of {n} bare clients, p50 / p95 ms:",
            "",
        ),
        ("  added latency per update", both(many, "added latency per update")),
        (
            "    p95 of each round",
            ", ".join(f"{x:.1f}" for x in many["added latency per update p95 per round"]),
        ),
        ("  first update over the floor (start included)", both(many, "first update over the floor")),
        ("  server CPU s per answer", f"{many['server CPU s per answer']:.3f}"),
        (
            "  errors; entries saved completed",
            f"{many['errors']}; {many['saved completed']} / {many['asked']}",
        ),
        ("server RSS MB: idle / peak", f"{result['idle RSS MB']:.0f} / {result['peak RSS MB']:.0f}"),
        ("", ""),
        ("targets (figure; its floor; the target):", ""),
        *[
            (f"  {name}", f"{verdict}: {figure}; {floor}; {target}")
            for name, figure, floor, target, verdict in targets(result)
        ],
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def targets(result: dict) -> list[tuple[str, str, str, str, str]]:
    """Each target beside its floor: (what, figure, floor, target, met or missed)."""
    one, many, n = result["one"], result["crowd figures"], result["crowd"]
    bare, cpu = one["bare client CPU s per answer"], one["server CPU s per answer"]
    idle, floor = result["idle RSS MB"], result["floor idle RSS MB"]
    rows = [
        ("added latency per update p95, alone", one["added latency per update p95"], "0 (the bare client)", 10.0, "ms"),
        (f"added latency per update p95, {n} at once", many["added latency per update p95"],
         f"0 ({n} bare clients)", 50.0, "ms"),
        ("server CPU per answer, alone", cpu, f"{bare:.3f} s (the bare client)", 2 * bare, "s"),
        ("idle RSS", idle, f"{floor:.1f} MB (the server, the libraries, no pplxweb)", floor + 15, "MB"),
    ]  # fmt: skip
    return [
        (name, f"{figure:.3f} {unit}" if unit == "s" else f"{figure:.1f} {unit}", floor_text,
         f"<= {limit:.3f} {unit}" if unit == "s" else f"<= {limit:.1f} {unit}", "met" if figure <= limit else "MISSED")
        for name, figure, floor_text, limit, unit in rows
    ]  # fmt: skip


if __name__ == "__main__":
    main()
