"""Load what a search needs when the server starts, so the first search after a restart is as
quick as the next (it used to pay 0.2-0.5 s for imports, templates and the markdown parser)."""

from __future__ import annotations

import time

from django.conf import settings
from django.template.loader import get_template

TEMPLATES = [
    "search/entry.html",
    "search/new_entry_fragment.html",
    "search/error_fragment.html",
    *(
        f"search/{name}_fragment.html"
        for name in ("answer", "meta", "related", "sources", "status", "steps", "images")
    ),
]


def up() -> float:
    """Compile the socket's templates, run the markdown parser and the highlighter once, load
    the upstream transport. Returns the seconds it took."""
    from pplxweb.perplexity import transport
    from search.render import render_answer

    started = time.monotonic()
    for name in TEMPLATES:
        get_template(name)
    render_answer("**Warm** [1], https://example.org\n\n| a |\n|:-|\n| b |\n\n```python\nx = 1\n```\n", [])
    transport.load(settings.PERPLEXITY_IMPERSONATE)
    return time.monotonic() - started
