"""Reading untrusted JSON values: a string or nothing, a list or nothing, JSON inside strings."""

from __future__ import annotations

import json
from typing import Any


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


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
