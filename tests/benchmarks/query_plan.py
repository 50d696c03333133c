"""Benchmark: the full-text search's query plan at 100,000 entries, on SQLite (FTS5) or, with
DATABASE_URL set, PostgreSQL.

    .venv/bin/python -m tests.benchmarks.query_plan [ENTRIES]
    DATABASE_URL=postgres://... .venv/bin/python -m tests.benchmarks.query_plan   # a scratch database

Makes 2,000 answers as the history benchmark does and copies them (SQL, so the full-text
triggers or the expression index see every row) up to ENTRIES for one person, then prints the
plan of the search's statements and the time of a search for one, two and three common words,
alone and with filters (one answer in a hundred failed, so a status filter is selective).
Not a test: it only prints figures.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("PPLXWEB_DATA_DIR", tempfile.mkdtemp(prefix="pplxweb-bench-"))
os.environ["DJANGO_SETTINGS_MODULE"] = (
    "tests.settings" if not os.environ.get("DATABASE_URL") else "pplxweb.settings"
)


# one, two and three common words; then with the filters a person adds (a status few answers
# have, a model, a source site), which narrow the matches before they are ranked
SEARCHES = [
    ("paris", {}),
    ("solar battery", {}),
    ("music piano film", {}),
    ("paris", {"status": "failed"}),
    ("solar battery", {"models": ("gpt55",)}),
    ("music", {"domain": "piano.example"}),
]


def grow(count: int) -> None:
    """Copy the entries onto themselves until there are `count`."""
    from django.db import connection

    from search.models import Entry

    columns = [f.column for f in Entry._meta.concrete_fields if f.column != "id"]
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        while (have := Entry.objects.count()) < count:
            cursor.execute(
                f"INSERT INTO search_entry ({names}) SELECT {names} FROM search_entry "  # noqa: S608 - column names
                f"ORDER BY id LIMIT {min(have, count - have)}"
            )
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE search_entry")


def plans(user, text: str, filters: dict | None = None) -> list[str]:
    """The plan of the search's ranked page (search/history/query.py), as it runs."""
    from django.db import connection

    from search.history import query

    sql, params = query.ranked(user, query.Filters(text=text, **(filters or {})))
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return [row[-1] for row in cursor.fetchall()]
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS OFF) " + sql, params)
        return [row[0] for row in cursor.fetchall()]


def main() -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from search.history import query
    from tests.benchmarks.history import populate

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    user = populate(2_000)
    grow(count)
    print(f"{connection.vendor}: {count:,} entries in {time.perf_counter() - started:.0f} s", flush=True)
    for text, filters in SEARCHES:
        print(f"\n{text!r}{f' {filters}' if filters else ''}:")
        for line in plans(user, text, filters):
            print("  " + line)
        samples = []
        for _ in range(10):
            began = time.perf_counter()
            found = query.search(user, query.Filters(text=text, **filters))
            samples.append((time.perf_counter() - began) * 1000)
        print(
            f"  search(): {len(found)} results, median {statistics.median(samples):.1f} ms, max {max(samples):.1f} ms"
        )


if __name__ == "__main__":
    main()
