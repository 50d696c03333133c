"""Threads the fake no longer has: the refusals of docs/protocol.md §12.3, and a follow-up into
such a thread answered in each form §12.4 holds possible (no capture shows the real one).

The thread detail (library.py) refuses a gone thread with `refusal(code)`. A follow-up ask (one
with `params.last_backend_uuid`) is steered by the ask plan (`POST /_control {"ask": {...}}`):

- `thread_gone`: why the thread is gone, a key of KINDS: `expired` (an incognito thread past its
  `expiry_time`, or one purged after months: ENTRY_EXPIRED), `deleted` (ENTRY_DELETED),
  `not_viewable` (VIEW_THREAD_NOT_ALLOWED), `not_found` (THREAD_NOT_FOUND);
- `gone_as`: how the refusal comes, one of FORMS: `status` (the default: the thread detail's own
  refusal for that kind, before any stream), `empty_403` (403 with body `{}`, as the reconnect
  endpoint answers a deleted run), `frame` (a 200 stream whose one frame is FAILED with the code),
  `new_thread` (no refusal: a normal answer, but in a new thread, with another `context_uuid`,
  `read_write_token` and slug, so the earlier turns' context is lost);
- `gone`: the `last_backend_uuid`s whose threads are gone; without it every follow-up is.

A new thread (no `last_backend_uuid`) is never refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KINDS = {
    "expired": "ENTRY_EXPIRED",
    "deleted": "ENTRY_DELETED",
    "not_viewable": "VIEW_THREAD_NOT_ALLOWED",
    "not_found": "THREAD_NOT_FOUND",
}
FORMS = ("status", "empty_403", "frame", "new_thread")
MESSAGES = {  # ENTRY_DELETED's is the one PT recorded; ENTRY_EXPIRED's body was never captured
    "ENTRY_DELETED": "This entry has been deleted",
    "ENTRY_EXPIRED": "This entry has expired",
}
NEW_IDS = {
    "context_uuid": "fake-c-new",
    "read_write_token": "fake-rw-new",
    "thread_url_slug": "fake-slug-new",
}


def refusal(code: str) -> tuple[int, Any]:
    """The status and JSON body a gone thread's detail is refused with (§12.3)."""
    if code == "VIEW_THREAD_NOT_ALLOWED":
        return 403, {"detail": {"error_code": code}}
    if code == "THREAD_NOT_FOUND":
        return 404, {"error": code}
    return 400, {"error": code, "message": MESSAGES.get(code, "This entry is gone")}


@dataclass(frozen=True)
class Gone:
    """How the fake answers a follow-up into a gone thread: a reply before any stream
    (`status`, `payload`), or a stream (`frames` instead of the planned answer, or the planned
    answer moved to a new thread when `rethread`)."""

    status: int = 200
    payload: Any = None
    frames: list[dict] | None = None
    rethread: bool = False


def answer(plan: dict, body: dict) -> Gone | None:
    """The fake's answer to an ask, when the plan makes it a follow-up into a gone thread."""
    kind = plan.get("thread_gone")
    params = body.get("params") if isinstance(body.get("params"), dict) else {}
    last = params.get("last_backend_uuid")
    if kind not in KINDS or not last or ("gone" in plan and last not in plan["gone"]):
        return None
    code, form = KINDS[kind], plan.get("gone_as", "status")
    if form == "empty_403":
        return Gone(403, {})
    if form == "frame":
        failed = {"status": "FAILED", "error_code": code, "error_message": MESSAGES.get(code, code)}
        return Gone(frames=[failed])
    if form == "new_thread":
        return Gone(rethread=True)
    return Gone(*refusal(code))


def new_thread(stream: list[dict]) -> None:
    """Move a built answer to a new thread: every frame that names the thread names another."""
    for event in stream:
        for key, value in NEW_IDS.items():
            if key in event or event is stream[0]:
                event[key] = value
