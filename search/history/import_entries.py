"""An entry of a history file (search.history.export's layout) shaped and cleaned as pplxweb
saves one (search.saving), with what the person's storage quota counts of it (search.storage)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from search import clarifications, storage
from search.display import CARRIED
from search.models import Entry, Thread
from search.saving import fitted, kept

SOURCE_KEYS = ("title", "url", "snippet", "date")  # as extract.Source.as_dict() saves them
STEP_KEYS = ("kind", "text")
STILL_ARRIVING = "This answer was still arriving when it was exported; what had arrived is kept."


def moment(value) -> datetime | None:
    """A moment the file gives (ISO 8601; naive ones in the server's time zone), else None."""
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
        if parsed is not None:
            parsed = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)
            parsed.astimezone(UTC)  # an offset can carry it past the calendar's ends
    except (ValueError, OverflowError):
        return None
    return parsed


def entry(item: dict, thread: Thread, user, job=None) -> Entry:
    """An entry as the file has it, shaped and cleaned as pplxweb saves one (search.saving; its
    moment is set after), with what the quota counts of its text."""
    running = item.get("status") == "running"  # still arriving when it was exported: no more here
    fields = fitted(
        Entry,
        {
            "question": item["question"],
            "answer": kept(str(item.get("answer") or "")),
            "report": kept(str(item.get("report") or ""), "report"),
            "sources": shaped(item.get("sources"), SOURCE_KEYS),
            "related": [q for q in item.get("related") or [] if isinstance(q, str)][:20],
            "steps": shaped(item.get("steps"), STEP_KEYS),
            "clarifications": clarifications.shaped(item.get("clarifications")),
            "options": item["options"] if isinstance(item.get("options"), dict) else {},
            "model_asked": str(item.get("model_asked") or ""),
            "model": str(item.get("model") or ""),
            "error": str(item.get("error") or "") or (STILL_ARRIVING if running else ""),
            "backend_uuid": str(item.get("backend_uuid") or ""),
            "context_uuid": str(item.get("context_uuid") or ""),
            "read_write_token": str(item.get("read_write_token") or ""),
        },
    )
    # its files and images are rows and records too: the listing of them counts as its text
    listed = len(json.dumps([item.get("attachments"), item.get("images")], ensure_ascii=False, default=str))
    return Entry(
        thread=thread,
        user=user,
        import_job=job,
        status="interrupted" if running else item.get("status") or "completed",
        origin="perplexity" if item.get("origin") == "perplexity" else "",
        asked_by=" ".join(str(item.get("asked_by") or "").split())[:60],
        upstream_expires=moment(item.get("upstream_expires")),
        carried=item["carried"] if item.get("carried") in CARRIED else "",
        import_bytes=storage.text_size(fields) + listed,
        **fields,
    )


def shaped(items, keys: tuple[str, ...]) -> list[dict]:
    """A list of records as pplxweb saves them, string fields only: anything else a file puts
    there is left out (the full-text triggers read sources as JSON objects)."""
    if not isinstance(items, list):
        return []
    return [
        {key: value if isinstance(value := item.get(key), str) else "" for key in keys}
        for item in items
        if isinstance(item, dict)
    ]
