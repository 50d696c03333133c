"""Threads as the fake keeps them: each answer's thread ids and, for an incognito thread, when it
expires, as the captures show (docs/protocol.md §4.4, §4.5):

- a new incognito thread's stream says `privacy_state: "INCOGNITO"`, `entry_created_datetime`
  and `expiry_time` a day later (naive ISO, UTC: the captures' form); any other says
  `privacy_state: "NONE"` and has no expiry;
- a follow-up's stream carries its thread's `context_uuid`, `read_write_token` and slug, whatever
  the built or replayed answer had, and the thread's expiry (a thread of the fake's library,
  library.py, included);
- a follow-up into an incognito thread past its expiry is refused as a thread that is gone
  (`expired`, in the form the plan's `gone_as` picks: gone.py).

The plan's `incognito_lifetime` (seconds, default a day) shortens the life of the threads it
starts.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fake_perplexity import library

LIFETIME = 24 * 3600.0
IDS = ("context_uuid", "read_write_token", "thread_url_slug")


def _params(body: dict) -> dict:
    return body.get("params") if isinstance(body.get("params"), dict) else {}


def expired(state: dict, body: dict) -> bool:
    """Whether this ask follows up an incognito thread past its expiry."""
    thread = state.get("threads", {}).get(_params(body).get("last_backend_uuid"))
    return bool(thread and thread["expires"] is not None and thread["expires"] <= time.time())


def place(state: dict, plan: dict, body: dict, stream: list[dict]) -> None:
    """Put a built or replayed answer in its thread: a follow-up's in the thread it continues, a
    new question's in a thread of its own; remembered under the answer's backend_uuid."""
    if not stream:
        return
    params = _params(body)
    threads: dict[str, Any] = state.setdefault("threads", {})
    last = params.get("last_backend_uuid")
    known = threads.get(last) or library.thread_of(last)  # a thread of the fake's library too
    head = stream[0]
    if known is not None:
        for event in stream:
            for name in IDS:
                if name in event or event is head:
                    event[name] = known[name]
        expires = known["expires"]
    else:
        incognito = params.get("is_incognito", True) is not False
        expires = time.time() + float(plan.get("incognito_lifetime", LIFETIME)) if incognito else None
    now = datetime.now(UTC)
    head["entry_created_datetime"] = now.isoformat()
    if expires is None:
        head["privacy_state"] = "NONE"
        head.pop("expiry_time", None)
    else:
        head["privacy_state"] = "INCOGNITO"
        head["expiry_time"] = datetime.fromtimestamp(expires, UTC).replace(tzinfo=None).isoformat()
    uuid = next((e["backend_uuid"] for e in stream if isinstance(e.get("backend_uuid"), str)), None)
    if uuid:
        ids = {name: next((e[name] for e in stream if isinstance(e.get(name), str)), "") for name in IDS}
        threads[uuid] = {**ids, "expires": expires}


def expiry_in(seconds: float) -> str:
    """An expiry_time `seconds` from now, as the captures write it (for tests)."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).replace(tzinfo=None).isoformat()
