"""Load what a search needs when the server starts, so the first search after a restart is as
quick as the next (it used to pay 0.2-0.5 s for imports, templates and the markdown parser)."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.template.loader import get_template

log = logging.getLogger(__name__)
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
    the upstream transport. Returns the seconds it took."""
    from pplxweb.perplexity import transport
    from search.render import render_answer

    started = time.monotonic()
    for name in TEMPLATES:
        get_template(name)
    render_answer("**Warm** [1], https://example.org\n\n| a |\n|:-|\n| b |\n\n```python\nx = 1\n```\n", [])
    if settings.PERPLEXITY_IMPERSONATE == "off":
        import anyio._backends._asyncio  # noqa: F401 - httpx's first connection imports these
        import h11  # noqa: F401

        transport._tls_context()
    else:
        import curl_cffi.requests  # noqa: F401 - its first import takes a few hundred ms
    return time.monotonic() - started
