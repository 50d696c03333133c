"""Benchmark: a 25 MB PDF asked about through pplxweb, against the fake Perplexity.

    .venv/bin/python -m tests.benchmarks.attachments
    .venv/bin/python -m tests.benchmarks.attachments uploads [COUNT]   # (see uploads())

pplxweb (its server in a subprocess, plain httpx like the bare client) takes the file with the question
on the plain multipart form (POST /search/): it keeps the file, uploads it to the fake's storage,
waits for the processing stream, then asks. The bare client (pplxweb/perplexity/uploads.py
alone, in this process) uploads the same file from disk and asks. Both are timed from the moment
the question leaves to the fake starting the ask's stream (it records that on the machine's
monotonic clock, which every process shares). The server's resident memory is read before and
sampled every 5 ms during each search (its peak is what a 25 MB file costs it). Prints a table;
not a test. Figures are for this machine with the fake, pplxweb and the clients on it.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(tempfile.mkdtemp(prefix="pplxweb-attach-bench-"))
os.environ.update(
    {
        "PPLXWEB_DATA_DIR": str(DATA),
        "DJANGO_SETTINGS_MODULE": "pplxweb.settings",
        "PPLXWEB_IMPERSONATE": "off",
    }
)
os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)

import httpx  # noqa: E402

from tests.benchmarks.memory import Sampler, rss_mb  # noqa: E402
from tests.benchmarks.people import linked_person  # noqa: E402
from tests.e2e.conftest import control, start, start_pplxweb, stop  # noqa: E402
from tests.e2e.conftest import seen as fake_requests  # noqa: E402

ROUNDS = 3
SIZE = 25 * 1024 * 1024


def pdf(path: Path) -> Path:
    """A 25 MB PDF (text-only filler, so no chance of a script marker in it)."""
    line = b"0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ\n"
    head, tail = b"%PDF-1.7\n", b"\n%%EOF\n"
    body = line * ((SIZE - len(head) - len(tail)) // len(line))
    path.write_bytes(head + body + b"0" * (SIZE - len(head) - len(body) - len(tail)) + tail)
    return path


def last_ask(fake: str) -> dict:
    return [r for r in fake_requests(fake) if r["path"] == "/rest/sse/perplexity_ask"][-1]


def through_pplxweb(server: str, fake: str, session: str, file: Path, n: int) -> float:
    with httpx.Client(base_url=server, cookies={"pplxweb_sessionid": session}, timeout=300) as http:
        page = http.get("/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        with file.open("rb") as handle:
            started = time.monotonic()
            response = http.post(
                "/search/",
                data={"q": f"what is in it? {n}", "csrfmiddlewaretoken": token},
                files={"files": ("statement.pdf", handle, "application/pdf")},
            )
    assert response.status_code == 302, response.text[-2000:]
    for _ in range(1500):
        ask = (
            last_ask(fake)
            if any(r["path"] == "/rest/sse/perplexity_ask" for r in fake_requests(fake))
            else {"body": ""}
        )
        if f"what is in it? {n}" in ask["body"] and "schedule_started" in ask:
            return ask["schedule_started"] - started
        time.sleep(0.02)
    raise AssertionError("the ask never reached the fake")


async def bare(fake: str, file: Path, n: int) -> float:
    from pplxweb.perplexity.client import PerplexityClient
    from pplxweb.perplexity.request import AskRequest
    from pplxweb.perplexity.uploads import LocalFile, upload
    from tests.fake_perplexity.app import SESSION_COOKIE, TOKEN

    async with PerplexityClient(fake, impersonate="off", cookies={SESSION_COOKIE: TOKEN}) as client:
        started = time.monotonic()
        done = await upload(client, [LocalFile(file, "statement.pdf", "application/pdf", SIZE)], ())
        stream = client.ask(AskRequest(f"bare {n}", attachments=tuple(d.url for d in done)))
        async with stream:
            async for _ in stream:
                break
    return last_ask(fake)["schedule_started"] - started


def main() -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True)
    session = linked_person()
    file = pdf(DATA / "statement.pdf")
    fake_proc, fake_port = start("tests.fake_perplexity.app:application", {**os.environ}, DATA / "fake.log")
    fake = f"http://127.0.0.1:{fake_port}"
    server_proc, server_port = start_pplxweb(
        {**os.environ, "PPLXWEB_PERPLEXITY_URL": fake}, DATA / "server.log"
    )
    server = f"http://127.0.0.1:{server_port}"
    try:
        control(fake, ask={"answer": ["It is a statement."], "pace": 0.01})
        through_pplxweb(server, fake, session, file, -1)  # warm: templates, code, the first connection
        bares, ours, before, during = [], [], [], []
        for n in range(ROUNDS):
            bares.append(asyncio.run(bare(fake, file, n)))
            time.sleep(0.5)
            before.append(rss_mb(server_proc.pid))
            sampler = Sampler(server_proc.pid)
            ours.append(through_pplxweb(server, fake, session, file, n))
            during.append(sampler.stop())
        rows = [
            (f"25 MB PDF, median of {ROUNDS}: Search -> ask sent, bare client (s)", statistics.median(bares)),
            (
                "  the same through pplxweb (plain form: keep, upload, processing, ask) (s)",
                statistics.median(ours),
            ),
            ("  pplxweb over the bare client (x)", statistics.median(ours) / statistics.median(bares)),
            ("server resident memory before a search (MB)", statistics.median(before)),
            ("server resident memory, peak during a search (MB)", max(during)),
            ("  peak over before (MB)", max(d - b for d, b in zip(during, before, strict=True))),
        ]
        width = max(len(name) for name, _ in rows)
        for name, value in rows:
            print(f"{name:<{width}}  {value:8.2f}")
    finally:
        stop(server_proc)
        stop(fake_proc)


def uploads(count: int) -> None:
    """`uploads [COUNT]`: COUNT (default 10,000) uploads of one byte each, one after another, on
    the page's attach endpoint, as one person: what was kept, what was refused and why, what is on
    disk after, and the server's memory."""
    from collections import Counter

    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True)
    session = linked_person()
    fake_proc, fake_port = start("tests.fake_perplexity.app:application", {**os.environ}, DATA / "fake.log")
    fake = f"http://127.0.0.1:{fake_port}"
    server_proc, server_port = start_pplxweb(
        {**os.environ, "PPLXWEB_PERPLEXITY_URL": fake}, DATA / "server.log"
    )
    server = f"http://127.0.0.1:{server_port}"
    answers: Counter = Counter()
    try:
        with httpx.Client(base_url=server, cookies={"pplxweb_sessionid": session}, timeout=60) as http:
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', http.get("/").text).group(1)
            time.sleep(1.0)
            before, sampler, started = rss_mb(server_proc.pid), Sampler(server_proc.pid), time.monotonic()
            for n in range(count):
                response = http.post(
                    "/attachments/", files={"file": (f"{n}.txt", bytes([33 + n % 94]))},
                    headers={"X-CSRFToken": token, "Referer": f"{server}/"},
                )  # fmt: skip
                said = response.json().get("error", "kept") if response.status_code in (200, 400) else "?"
                answers[(response.status_code, re.sub(r"\d+ seconds?|\d+ minutes?|“[^”]*”", "…", said))] += 1
            took, peak = time.monotonic() - started, sampler.stop()
    finally:
        stop(server_proc)
        stop(fake_proc)
    files = [p for p in (DATA / "attachments").iterdir() if p.is_file()]
    print(f"{count:,} uploads of one byte in {took:.0f} s:")
    for (status, said), n in answers.most_common():
        print(f"  {n:6,} x {status} {said}")
    print(f"kept on disk: {len(files)} files, {sum(p.stat().st_size for p in files)} bytes")
    print(f"server memory: {before:.1f} MB before, peak {peak:.1f} MB ({peak - before:+.1f} MB)")


if __name__ == "__main__":
    uploads(int(sys.argv[2]) if len(sys.argv) > 2 else 10_000) if sys.argv[1:2] == ["uploads"] else main()
