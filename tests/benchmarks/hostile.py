"""Benchmark: what a hostile upstream's answer costs the server's memory (issue 41, point 6).

    .venv/bin/python -m tests.benchmarks.hostile [MEGABYTES]

pplxweb (its server process as `manage.py serve` starts it, a scratch SQLite data dir) asks the
fake Perplexity, which answers as hostile.py in tests/fake_perplexity says: an answer of
MEGABYTES (default 100) of words in 64 KB chunks, one frame of 50 MB, a million tiny frames. Each
runs on a fresh server; the search is started on the plain form (POST /search/). The server's
resident memory (granian's process and its worker) is read when it is idle after a warm-up
search (its floor), then sampled every 5 ms while the answer runs until its entry is saved.
Printed: each answer's status and sentence, its peak over the floor, and the memory after it.
The target: peak at most 100 MB over the floor. Not a test: it only prints figures.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(tempfile.mkdtemp(prefix="pplxweb-hostile-bench-"))
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


def ask(server: str, session: str, question: str) -> None:
    with httpx.Client(base_url=server, cookies={"pplxweb_sessionid": session}, timeout=60) as http:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', http.get("/").text).group(1)
        response = http.post("/search/", data={"q": question, "csrfmiddlewaretoken": token})
    assert response.status_code == 302, response.text[-2000:]


def ended(question: str, timeout: float = 900) -> tuple[str, str, int]:
    """(status, error, answer length) of the question's entry once its run has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(DATA / "db.sqlite3", timeout=30) as db:
            row = db.execute(
                "SELECT status, error, length(answer) FROM search_entry WHERE question = ?", (question,)
            ).fetchone()
        if row and row[0] != "running":
            return row
        time.sleep(0.2)
    raise AssertionError(f"{question!r} still running")


def one_case(fake: str, session: str, label: str, plan: dict) -> None:
    """A fresh server: warmed up, its floor read, then the hostile answer, its peak sampled."""
    server_proc, server_port = start_pplxweb(
        {**os.environ, "PPLXWEB_PERPLEXITY_URL": fake}, DATA / "server.log"
    )
    server = f"http://127.0.0.1:{server_port}"
    try:
        control(fake, ask={"answer": ["A warm-up answer."], "pace": 0.01})
        ask(server, session, f"warm up for {label}")
        ended(f"warm up for {label}")
        time.sleep(2.0)  # the idle collection (pplxweb/collector.py) runs a second after the last answer
        floor = rss_mb(server_proc.pid)
        control(fake, ask=plan)
        sampler = Sampler(server_proc.pid)
        started = time.monotonic()
        ask(server, session, label)
        status, error, length = ended(label)
        peak, took = sampler.stop(), time.monotonic() - started
        time.sleep(2.0)
        print(f"{label}: {status}, {length:,} characters kept, {took:.1f} s")
        print(f"  said: {error}")
        print(
            f"  server memory: floor {floor:.1f} MB (idle after a warm-up search), peak {peak:.1f} MB"
            f" ({peak - floor:+.1f} MB), {rss_mb(server_proc.pid):.1f} MB two seconds after"
        )
    finally:
        stop(server_proc)
    print("  server tracebacks:", (DATA / "server.log").read_text().count("Traceback"))


def main() -> None:
    megabytes = float(sys.argv[1]) if len(sys.argv) > 1 else 100
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True)
    session = linked_person()
    fake_proc, fake_port = start("tests.fake_perplexity.app:application", {**os.environ}, DATA / "fake.log")
    fake = f"http://127.0.0.1:{fake_port}"
    try:
        for label, plan in (
            (f"an answer of {megabytes:g} MB in 64 KB chunks", {"hostile": "answer", "megabytes": megabytes}),
            ("one frame of 50 MB", {"hostile": "frame", "megabytes": 50}),
            ("a million tiny frames", {"hostile": "tiny", "count": 1_000_000}),
        ):
            one_case(fake, session, label, plan)
    finally:
        stop(fake_proc)


if __name__ == "__main__":
    main()
