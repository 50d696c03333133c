"""Reading untrusted JSON values: a string or nothing, a list or nothing, JSON inside strings; text
made storable (clean, deep: the one cleaning of upstream text, wherever it is saved); how much
text is kept; how much a JSON document costs to read (parsed_size) and to hold once parsed (cost)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def scrub(text: str) -> str:
    """Lone surrogates (JSON can carry them; UTF-8 cannot) replaced with "?"."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def clean(text: str, limit: int | None = None) -> str:
    """Upstream text as a database takes it: no NUL (PostgreSQL refuses it), no lone surrogate
    (UTF-8 cannot encode it), at most `limit` characters."""
    text = scrub(text)
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text if limit is None else text[:limit]


def deep(value: Any) -> Any:
    """A JSON value with every string (keys too) cleaned."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list | tuple):
        return [deep(v) for v in value]
    if isinstance(value, dict):
        return {clean(str(k)): deep(v) for k, v in value.items()}
    return value


def decode(value: Any) -> Any:
    """JSON that may be encoded more than once; a string that is not JSON stays a string."""
    for _ in range(3):
        if not isinstance(value, str):
            return value
        stripped = value.strip()
        if not stripped or stripped[0] not in '[{"':
            return value
        try:
            value = json.loads(stripped)
        except ValueError:
            return value
    return value


# --- how much text is kept --------------------------------------------------------------------

# characters of one answer or report kept, wherever it comes from (a page renders the first 1 MiB
# of one: search.render.MAX_MARKDOWN; a real one is a few KB, a long research report 100 KB)
MAX_TEXT = 4_000_000
CUT_NOTE = "\n\n*(This {what} was longer than pplxweb keeps, {limit:,} characters; the rest was left out.)*"


def cut_text(text: str, what: str = "answer") -> str:
    """The text, or its first MAX_TEXT characters ending with a note that says so."""
    if len(text) <= MAX_TEXT:
        return text
    note = CUT_NOTE.format(what=what, limit=MAX_TEXT)
    return text[: MAX_TEXT - len(note)] + note


# --- how much a JSON document costs to read ------------------------------------------------------

MAX_DOCUMENT = 8 * 1024 * 1024  # bytes of one JSON document read whole: a stream frame, a library
# page, an imported conversation (a whole real answer is 3-4 MB of frames: docs/protocol.md §5.1)
MAX_PARSED = 64 * 1024 * 1024  # what reading one may hold at its peak, by parsed_size()
# bytes json.loads holds per object, list, item (a comma) and key (a colon), measured with
# tracemalloc on CPython 3.11 (tests/perplexity/test_values.py keeps them honest)
OBJECT_COST, LIST_COST, ITEM_COST, KEY_COST = 200, 72, 80, 96
ASTRAL = re.compile(rb"[\xf0-\xf4]")  # the first byte of a character beyond U+FFFF
WIDE = re.compile(rb"[\xc4-\xef]")  # ... of one beyond U+00FF


def parsed_size(raw: bytes) -> int:
    """About how many bytes json.loads(raw) holds at its peak, never much less: the bytes, the
    text decoded from them and the strings parsed from that (1, 2 or 4 bytes a character, as
    the widest character needs), and what each object, list, item and key costs. A few passes
    over the bytes in C; the parts are overcounted, since commas and colons in strings count."""
    width = 4 if ASTRAL.search(raw) else 2 if WIDE.search(raw) else 1
    return (
        (1 + 2 * width) * len(raw)
        + OBJECT_COST * raw.count(b"{")
        + LIST_COST * raw.count(b"[")
        + ITEM_COST * raw.count(b",")
        + KEY_COST * raw.count(b":")
    )


def cost(value: Any) -> int:
    """About the bytes Python holds for a parsed JSON value (walked without recursion: a value
    may be nested as deep as the parser allows)."""
    if not isinstance(value, dict | list):
        return sys.getsizeof(value)
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return total
