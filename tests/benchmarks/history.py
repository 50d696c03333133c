"""Benchmark: history with 100,000 entries for one person, in a scratch database.

    .venv/bin/python -m tests.benchmarks.history [ENTRIES] [--one-core]
    DATABASE_URL=postgres://... .venv/bin/python -m tests.benchmarks.history --postgres  # a scratch database

Prints p50/p95 server time of the history page, a full-text search, a full-text search with a
filter (a status one answer in a hundred has, a model, a source site) and the suggestions
(target: p95 under 100 ms each). Not a test: it only prints figures.

The scratch database is SQLite in PPLXWEB_DATA_DIR (a new temporary directory unless it is set),
or, with --postgres, the PostgreSQL database DATABASE_URL names (without it DATABASE_URL is
ignored: the benchmark writes 100,000 entries wherever it runs). Given one where an earlier run made the person, it
measures those entries again instead of generating them (ENTRIES must then be the same number).

`--one-core` measures on CPU 1 alone (os.sched_setaffinity), with a second process keeping that
core half busy (10 ms of work, 10 ms of rest: a household's other searches). With one CPU, or
where the pinning is refused, it says so and measures anyway. Do not run it under `taskset`.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"

WORDS = [
    "paris",
    "france",
    "capital",
    "river",
    "seine",
    "population",
    "museum",
    "louvre",
    "tower",
    "eiffel",
    "history",
    "city",
    "europe",
    "python",
    "django",
    "database",
    "index",
    "query",
    "search",
    "answer",
    "source",
    "model",
    "research",
    "climate",
    "energy",
    "solar",
    "battery",
    "lithium",
    "price",
    "market",
    "economy",
    "inflation",
    "bank",
    "rate",
    "policy",
    "health",
    "sleep",
    "diet",
    "protein",
    "exercise",
    "heart",
    "brain",
    "memory",
    "music",
    "piano",
    "guitar",
    "film",
    "director",
    "award",
    "novel",
    "author",
    "poem",
    "space",
    "mars",
    "moon",
    "orbit",
    "rocket",
    "launch",
    "telescope",
    "galaxy",
    "star",
    "planet",
    "ocean",
    "whale",
    "coral",
    "reef",
    "forest",
    "tree",
]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def entry(rng: random.Random, thread):
    """A typical answer for the history benchmark: a few paragraphs and sources."""
    from search.models import Entry

    return Entry(
        thread=thread,
        user_id=thread.user_id,
        question=sentence(rng, rng.randint(5, 14)).rstrip(".") + "?",
        answer="\n\n".join(sentence(rng, rng.randint(15, 30)) for _ in range(rng.randint(4, 12))),
        sources=[
            {
                "title": sentence(rng, 4),
                "url": f"https://{rng.choice(WORDS)}.example/{i}",
                "snippet": "",
                "date": "",
            }
            for i in range(rng.randint(3, 10))
        ],
        # one in a hundred failed (by its conversation's id: the random answers stay as they were)
        status="failed" if thread.pk % 100 == 0 else "completed",
        model=rng.choice(["pplx_pro", "gpt55", "claude50sonnet"]),
    )


def populate(count: int, make=entry, seed: int = 7):
    """A person with `count` one-answer conversations, each answer made by make(rng, thread)."""
    from django.contrib.auth import get_user_model

    from search.models import Entry, Thread

    rng = random.Random(seed)
    user = get_user_model().objects.create_user(username="bench", password="x" * 12)
    batch = 2000
    for start in range(0, count, batch):
        threads = Thread.objects.bulk_create(
            [Thread(user=user, title=f"thread {start + i}") for i in range(min(batch, count - start))]
        )
        Entry.objects.bulk_create(make(rng, thread) for thread in threads)
    return user


def timed(client, path: str, params_list: list[dict], must_contain: str = "") -> tuple[float, float]:
    samples = []
    for params in params_list:
        started = time.perf_counter()
        response = client.get(path, params)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
        assert must_contain.encode() in response.content, (path, params)  # real results, not an empty page
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


CPU = 1
HALF_BUSY = "import time\nwhile True:\n    end = time.perf_counter() + 0.01\n    while time.perf_counter() < end: pass\n    time.sleep(0.01)\n"


def one_core() -> subprocess.Popen | None:
    """This process and a half-busy neighbour on CPU 1; None (and a sentence) when not possible."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if len(cpus) < 2 or CPU not in cpus:
        print(
            f"--one-core: {len(cpus) or 'an unknown number of'} CPU(s) here, none to pin to; measured unpinned."
        )
        return None
    try:
        os.sched_setaffinity(0, {CPU})
    except OSError as exc:
        print(f"--one-core: pinning to CPU {CPU} was refused ({exc}); measured unpinned.")
        return None
    busy = subprocess.Popen([sys.executable, "-c", HALF_BUSY])
    os.sched_setaffinity(busy.pid, {CPU})
    print(f"on CPU {CPU} alone, with a second process keeping it half busy")
    return busy


def arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line; without --postgres, DATABASE_URL is put aside (a scratch SQLite)."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.history", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "entries", nargs="?", type=int, default=100_000, help="entries for the one person (default 100000)"
    )
    parser.add_argument(
        "--one-core",
        action="store_true",
        help=f"measure on CPU {CPU} alone, kept half busy by a second process",
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="measure on the (scratch) PostgreSQL database DATABASE_URL names",
    )
    args = parser.parse_args(argv)
    if not args.postgres:
        os.environ.pop("DATABASE_URL", None)
    elif not os.environ.get("DATABASE_URL"):
        parser.error("--postgres measures on the database DATABASE_URL names; it is not set")
    if args.entries < 1000:
        parser.error("ENTRIES takes a number of entries, at least 1000 (the pages ask for older ones)")
    return args


def person(count: int):
    """The benchmark's person: made with `count` entries, or the one an earlier run made here."""
    from django.contrib.auth import get_user_model

    from search.models import Entry

    user = get_user_model().objects.filter(username="bench").first()
    if user is None:
        started = time.perf_counter()
        user = populate(count)
        print(f"generated {count:,} entries in {time.perf_counter() - started:.0f} s", flush=True)
        return user
    found = Entry.objects.filter(user=user).count()
    if found != count:
        sys.exit(
            f"{os.environ['PPLXWEB_DATA_DIR']} holds an earlier run's {found:,} entries, not {count:,}: "
            "ask for that number, or use another PPLXWEB_DATA_DIR."
        )
    print(f"measuring the {count:,} entries an earlier run made", flush=True)
    return user


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if not os.environ.get("PPLXWEB_DATA_DIR"):
        os.environ["PPLXWEB_DATA_DIR"] = tempfile.mkdtemp(prefix="pplxweb-bench-")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    count = args.entries
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    user = person(count)
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    rng = random.Random(3)
    pages = [{}] * 20 + [{"before_id": rng.randint(1000, count)} for _ in range(20)]
    searches = [{"q": " ".join(rng.sample(WORDS, rng.randint(1, 3)))} for _ in range(40)]
    suggestions = [{"q": " ".join(rng.sample(WORDS, 2))[: rng.randint(4, 12)]} for _ in range(40)]
    other = random.Random(5)  # (the lists above stay those of earlier runs)
    narrowed = [
        search
        | other.choice(
            [{"status": "failed"}, {"model": "gpt55"}, {"domain": f"{other.choice(WORDS)}.example"}]
        )
        for search in searches
    ]
    busy = one_core() if args.one_core else None
    try:
        timed(client, "/history/", [{}])  # warm up
        print(f"on {connection.vendor}; load average {os.getloadavg()[0]:.2f}")
        print(f"{'request':>14} {'p50 ms':>8} {'p95 ms':>8}")
        for name, path, params in (
            ("history page", "/history/", pages),
            ("full-text", "/history/", searches),
            ("+ a filter", "/history/", narrowed),
            ("suggestions", "/history/suggest/", suggestions),
        ):
            p50, p95 = timed(client, path, params)
            print(f"{name:>14} {p50:>8.1f} {p95:>8.1f}")
    finally:
        if busy is not None:
            busy.kill()


if __name__ == "__main__":
    main()
