"""Benchmark: does one person's import slow another person's pages? The real server (granian, as
`manage.py serve` runs it), a scratch SQLite data dir; another person's history page (2,000
entries) timed from outside.

    .venv/bin/python -m tests.benchmarks.import_load
    .venv/bin/python -m tests.benchmarks.import_load memory

Prints the history page's p50/p95 idle, then while three people upload worst-case import files
one after another (BENCH_PAUSE seconds between two, default 1) (a zip of 16 MiB of blank lines, 20 MB of empty objects, deep nesting, a zip declaring
4 GB), then while three people import a real 3,000-conversation export at once. The target:
p95 under load at most twice idle.

`memory`: what hostile imports cost the server instead (issue 41): its resident memory idle
(the floor), then the peak (sampled every 5 ms) while one person imports, one after another, a
100 MB conversation, a 100 MB file in another layout, 51 MB and 7 MB of short strings, 20 MB of
`{}`, the largest conversation pplxweb takes (under 8 MB of prose), and a 25 KB zip whose listing
names one member 100,000 times (with the bytes it wrote to disk). The target: at most 100 MB over
the floor. Not a test: it only prints figures.
"""

from __future__ import annotations

import io
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import httpx

DATA = Path(tempfile.mkdtemp(prefix="pplxweb-import-bench-"))
os.environ.update({"PPLXWEB_DATA_DIR": str(DATA), "DJANGO_SETTINGS_MODULE": "pplxweb.settings"})
os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)

from tests.e2e.conftest import start_pplxweb, stop  # noqa: E402

HEADER = b'{"format": "pplxweb-history/1", "exported": "2026-01-01T00:00:00+00:00", "threads": [\n'
SAMPLES = 150
PAUSE = float(os.environ.get("BENCH_PAUSE", 1.0))  # seconds each uploader waits between uploads


def zipped(history: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("history.json", history)
    return out.getvalue()


def worst_cases() -> list[bytes]:
    blank = zipped(HEADER + b"\n" * (16 * 1024 * 1024) + b"]}\n")
    empties = b'{"threads": [' + b", ".join([b"{}"] * 5_000_000) + b"]}"
    deep = b"[" * 100_000 + b"]" * 100_000
    declared = bytearray(zipped(HEADER + b"]}\n"))
    struct.pack_into("<I", declared, declared.index(b"PK\x03\x04") + 22, 0xFFFFFFF0)
    struct.pack_into("<I", declared, declared.index(b"PK\x01\x02") + 24, 0xFFFFFFF0)
    return [blank, empties, deep, bytes(declared)]


def real_export(count: int) -> bytes:
    lines = []
    for n in range(count):
        created = f"2025-{n % 12 + 1:02}-{n % 28 + 1:02}T{n % 24:02}:{n % 60:02}:{n // 60 % 60:02}+00:00"
        entry = {
            "question": f"question {n} about paris and the seine",
            "created": created,
            "answer": "Paris lies on the Seine [1]. " * 60,
            "sources": [{"title": f"Source {i}", "url": f"https://example.com/{n}/{i}"} for i in range(6)],
            "steps": [{"kind": "search", "text": "searching the web"}] * 3,
            "related": ["What next?", "And then?"],
            "status": "completed",
        }
        lines.append(json.dumps({"title": entry["question"], "entries": [entry]}).encode())
    return zipped(HEADER + b",\n".join(lines) + b"\n]}\n")


def people() -> dict[str, str]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from search.models import Entry, Thread

    cookies = {}
    for name in ("viewer", "a", "b", "c"):
        user = get_user_model().objects.create_user(username=name, password="x" * 12)
        client = Client()
        client.force_login(user)
        cookies[name] = client.cookies["pplxweb_sessionid"].value
        if name == "viewer":
            for n in range(2000):
                thread = Thread.objects.create(user=user, title=f"q{n}")
                Entry.objects.create(thread=thread, user=user, question=f"q{n}", answer="words " * 200)
    return cookies


def timed_pages(server: str, session: str, count: int) -> list[float]:
    times = []
    with httpx.Client(base_url=server, cookies={"pplxweb_sessionid": session}) as client:
        for _ in range(count):
            started = time.perf_counter()
            response = client.get("/history/")
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.status_code
    return times


def uploader(server: str, session: str, files: list[bytes], stop_at: threading.Event, seen: list) -> None:
    with httpx.Client(base_url=server, cookies={"pplxweb_sessionid": session}, timeout=900) as client:
        page = client.get("/history/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        while not stop_at.is_set():
            for data in files:
                started = time.perf_counter()
                response = client.post(
                    "/history/import/",
                    data={"csrfmiddlewaretoken": token},
                    files={"file": ("history.zip", data)},
                    headers={"Referer": server + "/history/"},
                    follow_redirects=True,
                )
                message = re.search(r'<p class="message[^"]*">(.*?)</p>', response.text, re.S)
                seen.append(
                    (round(time.perf_counter() - started, 2), (message.group(1) if message else "?")[:70])
                )
                if stop_at.wait(PAUSE):  # a person uploading again and again, not a tight loop
                    return


def under_load(server: str, cookies: dict, files: list[bytes], label: str) -> list[float]:
    stop_at, seen = threading.Event(), []
    threads = [
        threading.Thread(target=uploader, args=(server, cookies[name], files, stop_at, seen))
        for name in "abc"
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    times = timed_pages(server, cookies["viewer"], SAMPLES)
    stop_at.set()
    for thread in threads:
        thread.join()
    print(f"  {label}: {len(seen)} uploads answered; e.g. {sorted(set(s for _, s in seen))[:4]}")
    print(f"  upload times (s): {sorted(t for t, _ in seen)[:3]} .. {sorted(t for t, _ in seen)[-3:]}")
    return times


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if q < 100 else max(values)


def main() -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True)
    cookies = people()
    proc, port = start_pplxweb({**os.environ}, DATA / "server.log")
    server = f"http://127.0.0.1:{port}"
    try:
        timed_pages(server, cookies["viewer"], 20)  # warm
        idle = timed_pages(server, cookies["viewer"], SAMPLES)
        print(f"history page idle: p50 {p(idle, 50):.1f} ms, p95 {p(idle, 95):.1f} ms")
        blank, empties, deep, declared = worst_cases()
        for label, files in (
            ("small worst-case zips (blank lines, nesting, 4 GB declared)", [blank, deep, declared]),
            ("20 MB of empty objects", [empties]),
            ("a real 3,000-conversation export", [real_export(3000)]),
        ):
            loaded = under_load(server, cookies, files, label)
            print(f"history page, 3 people uploading {label}: p50 {p(loaded, 50):.1f} ms,"
                  f" p95 {p(loaded, 95):.1f} ms ({p(loaded, 95) / p(idle, 95):.2f}x idle p95)")  # fmt: skip
    finally:
        stop(proc)
    log = (DATA / "server.log").read_text()
    print("server tracebacks:", log.count("Traceback"))


def hostile_imports() -> list[tuple[str, bytes]]:
    prose = "Paris lies on the Seine; it is the capital of France, with many bridges. "
    short = b", ".join([b'"ab"'] * (51 * 1024 * 1024 // 6))
    largest = json.dumps(
        {"entries": [{"question": "q", "created": "2026-01-01T00:00:00+00:00", "answer": prose * 100_000}]}
    )
    member = b"%PDF-1.7\n" + b"%" * 20_000 + b"\n%%EOF\n"
    listed = [{"name": f"copy{i}.pdf", "file": "attachments/x.pdf"} for i in range(10)]
    named = [
        json.dumps({"title": f"q{n}", "entries": [{"question": f"q{n}", "created": f"2026-01-01T{n // 3600 % 24:02}:{n // 60 % 60:02}:{n % 60:02}+00:00", "attachments": listed}]}).encode()
        for n in range(10_000)
    ]  # fmt: skip
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("history.json", HEADER + b",\n".join(named) + b"\n]}\n")
        archive.writestr("attachments/x.pdf", member)
    return [
        ("a conversation of 100 MB", HEADER + b'{"entries": [{"question": "q", "answer": "' + b"x" * (100 * 1024 * 1024) + b'"}]}\n]}\n'),
        ("a 100 MB file in another layout", b'{"entries": [{"question": "q", "answer": "' + b"x" * (100 * 1024 * 1024) + b'"}]}'),
        ("51 MB of short strings", zipped(HEADER + b'{"entries": [{"question": "q", "related": [' + short + b"]}]}\n]}\n")),
        ("7 MB of short strings", HEADER + b'{"entries": [{"question": "q", "related": [' + short[: 7 * 1024 * 1024].rsplit(b",", 1)[0] + b"]}]}\n]}\n"),
        ("20 MB of {}", worst_cases()[1]),
        ("the largest conversation taken (7.3 MB of prose)", HEADER + largest.encode() + b"\n]}\n"),
        (f"a {len(out.getvalue()) // 1024} KB zip naming one member 100,000 times", out.getvalue()),
    ]  # fmt: skip


def disk_bytes(folder: Path) -> int:
    """Bytes the files below `folder` take, each file once (hard links counted once)."""
    seen, total = set(), 0
    for path in folder.rglob("*"):
        status = path.stat()
        if path.is_file() and status.st_ino not in seen:
            seen.add(status.st_ino)
            total += status.st_blocks * 512
    return total


def memory() -> None:
    from tests.benchmarks.memory import Sampler, rss_mb

    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True)
    session = people()["a"]
    proc, port = start_pplxweb({**os.environ}, DATA / "server.log")
    server = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=server, cookies={"pplxweb_sessionid": session}, timeout=900) as client:
            token = re.search(
                r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get("/history/").text
            ).group(1)
            time.sleep(2.0)
            floor = rss_mb(proc.pid)
            print(f"server resident memory idle (the floor): {floor:.1f} MB")
            for label, data in hostile_imports():
                before, written = rss_mb(proc.pid), disk_bytes(DATA)
                sampler = Sampler(proc.pid)
                started = time.monotonic()
                response = client.post(
                    "/history/import/", data={"csrfmiddlewaretoken": token},
                    files={"file": ("history.zip", data)}, headers={"Referer": server + "/history/"},
                    follow_redirects=True,
                )  # fmt: skip
                peak, took = sampler.stop(), time.monotonic() - started
                said = re.search(r'<p class="message[^"]*">(.*?)</p>', response.text, re.S)
                print(f"{label} ({len(data) / 1024 / 1024:.1f} MB uploaded): {took:.1f} s")
                print(f"  said: {said.group(1).strip() if said else '?'}")
                print(f"  peak {peak:.1f} MB: {peak - floor:+.1f} MB over the floor, {peak - before:+.1f} MB over before it;"
                      f" {(disk_bytes(DATA) - written) / 1024 / 1024:+.1f} MB on disk in the data dir")  # fmt: skip
    finally:
        stop(proc)
    log = (DATA / "server.log").read_text()
    print("server tracebacks:", log.count("Traceback"))


if __name__ == "__main__":
    memory() if sys.argv[1:] == ["memory"] else main()
