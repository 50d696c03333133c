"""Benchmark: exporting and importing a large history, in a scratch SQLite database.

    .venv/bin/python -m tests.benchmarks.export [ENTRIES]

Fills one person's history with ENTRIES answers of realistic size (default 20,000: a ~4 KB
answer, 8 sources and 12 progress steps each), then prints for the history zip: time to write
it, its size, the peak Python memory while writing it; and for importing it into another
person: time, peak memory, and the time to import it once more (everything already there).
Peak memory is measured in a second pass under tracemalloc (the timed pass runs without it).
Not a test: it only prints figures.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
import tracemalloc

os.environ.setdefault("PPLXWEB_DATA_DIR", tempfile.mkdtemp(prefix="pplxweb-bench-"))
os.environ.pop("DATABASE_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"

from tests.benchmarks.history import WORDS, populate, sentence


def entry(rng: random.Random, thread):
    """A realistic answer: ~4 KB of text with citations, 8 sources, 12 progress steps."""
    from search.models import Entry

    return Entry(
        thread=thread,
        user_id=thread.user_id,
        question=sentence(rng, rng.randint(5, 14)).rstrip(".") + "?",
        answer="\n\n".join(sentence(rng, 25) + f" [{i % 8 + 1}]" for i in range(24)),
        sources=[
            {
                "title": sentence(rng, 6),
                "url": f"https://{rng.choice(WORDS)}.example/{i}",
                "snippet": sentence(rng, 20),
                "date": "2026-11-30",
            }
            for i in range(8)
        ],
        steps=[{"kind": "search", "text": sentence(rng, 8)} for _ in range(12)],
        related=[sentence(rng, 7) for _ in range(4)],
        status="completed",
        model="pplx_pro",
    )


def export_to(user, target) -> None:
    from search.history import export

    for part in export.history_zip(user):
        target.write(part)


def timed(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def peak_mb(work) -> float:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from search.history import imports

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    user = populate(count, entry, seed=11)
    print(f"generated {count:,} entries in {time.perf_counter() - started:.0f} s", flush=True)
    people = get_user_model().objects
    with tempfile.TemporaryFile() as archive, tempfile.TemporaryFile() as scratch:
        export_seconds = timed(lambda: export_to(user, archive))
        size = archive.tell()
        export_peak = peak_mb(lambda: export_to(user, scratch))
        first, traced = (people.create_user(username=n, password="x" * 12) for n in ("a", "b"))
        import_seconds = timed(lambda: imports.import_history(first, archive))
        again_seconds = timed(lambda: imports.import_history(first, archive))
        import_peak = peak_mb(lambda: imports.import_history(traced, archive))
    rows = [
        ("history zip: write", f"{export_seconds:.1f} s ({export_seconds / count * 1000:.2f} ms per entry)"),
        ("history zip: size", f"{size / 2**20:.0f} MB"),
        ("history zip: peak Python memory while writing", f"{export_peak:.0f} MB"),
        ("import into another person", f"{import_seconds:.1f} s ({import_seconds / count * 1000:.2f} ms per entry)"),
        ("import: peak Python memory", f"{import_peak:.0f} MB"),
        ("import again (all already there)", f"{again_seconds:.1f} s"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
