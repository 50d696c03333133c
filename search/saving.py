"""What goes into an entry is storable, and a save that fails never leaves a run stuck.

Upstream text is hostile: a NUL character (PostgreSQL's text types refuse it), a lone surrogate
(UTF-8 cannot encode it) or a field longer than its column make a save raise, and a text of any
length would fill the disk. Everything written from a run, an import or the library goes through
this module first (fitted(), or clean() and kept() for a single value; clean and deep are
pplxweb.perplexity.values', which accounts uses for what it saves of Perplexity's replies): the
same cleaning on every path. A final save that still fails saves the entry failed with what can be saved.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import models

from pplxweb.perplexity.values import MAX_TEXT, clean, cut_text, deep

__all__ = ["clean", "deep", "fitted", "kept", "save_outcome_failed"]  # clean, deep: values.py's

log = logging.getLogger(__name__)
NOT_SAVED = "pplxweb could not save this answer whole; what could be saved is kept. The server log says more."


def kept(text: str, what: str = "answer") -> str:
    """An answer's or report's text cleaned, at most MAX_TEXT characters; a longer one ends with
    a note saying it was cut (values.cut_text, as a live answer's is)."""
    return cut_text(clean(text), what)


def fitted(model: type[models.Model], fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` (name -> value, as for QuerySet.update) cleaned and cut to fit their columns (a
    text column to MAX_TEXT characters)."""
    out = {}
    for name, value in fields.items():
        field = model._meta.get_field(name)
        if isinstance(value, str):
            value = clean(value, field.max_length if isinstance(field, models.CharField) else MAX_TEXT)
        elif isinstance(field, models.JSONField):
            value = deep(value)
        out[name] = value
    return out


def save_outcome_failed(model: type[models.Model], pk: int, fields: dict[str, Any]) -> bool:
    """After a final save raised: save the entry failed with NOT_SAVED and as much of `fields` as
    the database takes (all but the answer's parts, then the answer alone, then nothing more).
    Returns whether the entry now says failed."""
    base = {"status": "failed", "error": NOT_SAVED}
    rest = {k: v for k, v in fields.items() if k not in ("status", "error")}
    answer_parts = {k: rest.pop(k) for k in ("answer", "report", "sources", "steps", "related") if k in rest}
    for attempt in (
        {**rest, **answer_parts},
        {**rest, **{k: v for k, v in answer_parts.items() if k in ("answer", "report")}},
        {k: v for k, v in answer_parts.items() if k in ("answer", "report")},
        {},
    ):
        try:
            model.objects.filter(pk=pk).update(**fitted(model, {**attempt, **base}))
        except Exception:
            log.exception("entry %s: saving it failed with %s also failed", pk, sorted(attempt))
            continue
        return True
    return False
