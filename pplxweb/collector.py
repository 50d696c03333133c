"""The server's garbage-collection policy: Python's collector stops every running answer while it
works, so it works rarely, and fully only when nothing is arriving.

- At start (pplxweb/asgi.py), what is loaded by then (~100,000 objects that live as long as the
  process) is frozen: full collections skip it.
- Young collections run every YOUNG new objects instead of Python's 700. An answer in flight keeps
  its objects for seconds, so at 700 each collection walked the same live ones again (at 50
  answers at once: ~55 collections and ~25 ms per round of answers, a pause every ~100 ms).
- A full collection walks every object not frozen: 30-50 ms with 50 answers in flight, all of
  them waiting. Python starts one after 10 middle collections; here after FULL_AFTER, and
  `when_idle()` runs one when the last answer has ended and the server stays idle a second.

Only reference cycles wait for a collection; everything else is freed at once, as always. The
cycles an answer leaves (tasks, exceptions' frames, forms) are a few thousand small objects.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

YOUNG = 10_000  # new objects between young collections (Python: 700)
MIDDLE_AFTER = 10  # young collections between middle ones (Python's)
FULL_AFTER = 100  # middle collections between full ones (Python: 10)
IDLE = 1.0  # seconds without a running answer before the idle collection


def configure() -> None:
    """Freeze what the server loaded (its own start-up garbage collected first), then set the
    thresholds. Called once, after the application is built and warmed up."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE_AFTER, FULL_AFTER)


def when_idle(busy: Callable[[], bool]) -> None:
    """A full collection in IDLE seconds, if `busy()` is false then (call it when the last answer
    ends). Outside an event loop it does nothing."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    loop.call_later(IDLE, _collect_unless, busy)


def _collect_unless(busy: Callable[[], bool]) -> None:
    if not busy():
        gc.collect()
