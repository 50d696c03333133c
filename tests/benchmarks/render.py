"""Benchmark: rendering hostile and large answers, and the pages that hold them.

    .venv/bin/python -m tests.benchmarks.render [--quick]

1. Each hostile Markdown input (1 MB of `[`, of `*`, of `>`, ...) rendered at 256 KB and 1 MB
   (`--quick`: 64 KB and 256 KB): the time, the time a character, and the growth from the
   smaller to the larger (4x the text: linear is 4x; the bound printed is 5x), each beside its
   bound. Before search/bounded.py, 1 MB of `[` took minutes and "a ://" repeated 97 s for
   100 KB.
2. In a scratch SQLite database, a conversation holding a realistic 300 KB answer (paragraphs,
   citations, a table, math, code): its page's first load (which renders and stores the
   answer), then the median of 5 loads (which read it back; bound: 1 s), the same for a 300 KB
   answer of `[`, and the history page of a person with twenty such answers (rows show the
   answer's first 240 characters, never render it).

Not a test: it only prints figures. Wall-clock figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.pop("DATABASE_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"

SOURCES = [
    {"title": f"Source {n}", "url": f"https://site{n}.example/page", "snippet": "A snippet."}
    for n in range(1, 9)
]
HOSTILE = {
    "[": "[",
    "*": "*",
    ">": ">",
    "[a ": "[a ",
    "*a ": "*a ",
    "a :// ": "a :// ",
    "$5 and ": "$5 and ",
    "\\( ": "\\( ",
    "$$ a\\n": "$$ a\n",
    "](([[![![": "]([[[[[![![",
    "nested lists": "- a\n  - b\n    - c\n      - d\n        - e\n",
    "wide table rows": "|a|b|c|d|e|f|g|h|\n|-|-|-|-|-|-|-|-|\n" + "|x|\n" * 20,
    "citations": "Paris is big [1][2]. ",
}
SECONDS_PER_MB = 60.0  # a generous bound: about 60 µs a character


def realistic(size: int) -> str:
    """A long answer as Perplexity writes one: headings, cited paragraphs, a table, math, code."""
    part = (
        "## Section\n\nBread rises because yeast ferments sugars into carbon dioxide [1][2]. "
        "The gluten network traps the gas, and the dough expands [3]. See https://example.org/bread.\n\n"
        "| Flour | Water | Salt |\n|:--|--:|--:|\n| 500 g | 350 g | 10 g |\n\n"
        "The hydration is $h = \\frac{w}{f} = 70\\%$ and costs $5 and $10.\n\n"
        "$$\nE = mc^2\n=\n\\sum_{i=1}^{n} x_i\n$$\n\n```python\nprint('rise')\n```\n\n- one **bold** point\n- another\n\n"
    )
    return (part * (size // len(part) + 1))[:size]


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def hostile(small: int, large: int) -> None:
    from search.render import render_answer

    print(
        f"hostile Markdown, {small // 1024} KB and {large // 1024} KB (bound: {SECONDS_PER_MB:.0f} s a MB, growth 5x)"
    )
    print(f"{'input':18} {'small s':>8} {'large s':>8} {'µs/char':>8} {'growth':>7}")
    for name, unit in {**HOSTILE, "realistic answer": None}.items():
        make = (
            realistic if unit is None else (lambda size, unit=unit: (unit * (size // len(unit) + 1))[:size])
        )
        a, b = timed(render_answer, make(small), SOURCES), timed(render_answer, make(large), SOURCES)
        per = b / large * 1e6
        ok = "ok" if b <= SECONDS_PER_MB * large / 2**20 and b <= 5 * a + 0.05 else "OVER"
        print(f"{name:18} {a:8.2f} {b:8.2f} {per:8.1f} {b / a:6.1f}x  {ok}", flush=True)


def pages() -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from search.models import Entry, Thread

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    person = get_user_model().objects.create_user(username=f"bench{time.time_ns()}", password="x" * 12)
    client = Client(HTTP_HOST="localhost")
    client.force_login(person)
    print("\npages (scratch SQLite; bound: 1 s)")
    for label, answer in (("300 KB answer", realistic(300 * 1024)), ("300 KB of [", "[" * 300 * 1024)):
        thread = Thread.objects.create(user=person, title=label)
        Entry.objects.create(
            thread=thread, question=label, answer=answer, sources=SOURCES, status="completed"
        )
        url = reverse("search:thread", args=[thread.pk])
        first = timed(client.get, url)
        later = statistics.median(timed(client.get, url) for _ in range(5))
        print(f"{label:18} first load {first:6.2f} s (renders, stores)   later loads {later:6.3f} s  "
              f"{'ok' if later < 1 else 'OVER'}", flush=True)  # fmt: skip
    thread = Thread.objects.create(user=person, title="many")
    for n in range(20):
        Entry.objects.create(thread=thread, question=f"huge {n}", answer="[" * 300 * 1024, status="completed")
    url = reverse("search:history")
    history = statistics.median(timed(client.get, url) for _ in range(5))
    print(f"history page with 22 answers of 300 KB: {history:.3f} s  {'ok' if history < 1 else 'OVER'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 KB and 256 KB instead of 256 KB and 1 MB")
    args = parser.parse_args(argv)
    if not os.environ.get("PPLXWEB_DATA_DIR"):
        os.environ["PPLXWEB_DATA_DIR"] = tempfile.mkdtemp(prefix="pplxweb-bench-")
    import django

    django.setup()
    small, large = (64 * 1024, 256 * 1024) if args.quick else (256 * 1024, 1024 * 1024)
    hostile(small, large)
    pages()


if __name__ == "__main__":
    main(sys.argv[1:])
