"""Load what a search needs when the server starts, so the first search after a restart is as
quick as the next (it used to pay 0.2-0.5 s for imports, templates and the markdown parser)."""

from __future__ import annotations

import gc
import time

from django.conf import settings
from django.template.loader import get_template

TEMPLATES = [
    "search/entry.html",
    "search/new_entry_fragment.html",
    "search/error_fragment.html",
    *(
        f"search/{name}_fragment.html"
        for name in ("answer", "blocks", "tail", "meta", "related", "sources", "status", "steps")
    ),
]


def up() -> float:
    """Compile the socket's templates, run the markdown parser and the highlighter once, load
    the upstream transport; then set everything loaded so far aside from the garbage collector.
    Returns the seconds it took.

    The server holds about 100,000 objects after start (Django, templates, parsers) that live as
    long as it does. Python's full collection walked them all: a 70 ms pause of every running
    answer at once, now and then. Frozen, a full collection walks only what came later (13-22 ms
    at 50 answers at once)."""
    from pplxweb.perplexity import transport
    from search.render import render_answer

    started = time.monotonic()
    for name in TEMPLATES:
        get_template(name)
    render_answer("**Warm** [1], https://example.org\n\n| a |\n|:-|\n| b |\n\n```python\nx = 1\n```\n", [])
    transport.load(settings.PERPLEXITY_IMPERSONATE)
    gc.collect()  # what start-up left behind goes now, not into the frozen set
    gc.freeze()
    return time.monotonic() - started
