"""The model catalogue: fetched from Perplexity after linking and then daily, cached in the
database, with a shipped copy for before the first fetch."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

from django.utils import timezone

from accounts.models import ModelCatalogue
from pplxweb.perplexity.values import deep

log = logging.getLogger(__name__)
FALLBACK = Path(__file__).resolve().parent.parent / "data" / "models_fallback.json"
MAX_AGE = timedelta(days=1)
BEST = "pplx_pro"


@dataclass(frozen=True)
class ModelChoice:
    slug: str
    label: str
    tier: str  # "pro" or "max"


@cache
def _fallback() -> dict:
    return json.loads(FALLBACK.read_text())


# the newest catalogue's data by (row id, fetched_at): decoding 30 KB of JSON per search is not free
_decoded: dict[tuple[int, datetime], dict] = {}


def _newest() -> tuple[int, datetime] | None:
    return ModelCatalogue.objects.order_by("-fetched_at").values_list("pk", "fetched_at").first()


def catalogue() -> dict:
    newest = _newest()
    if newest is None:
        return _fallback()
    data = _decoded.get(newest)  # one lookup: another thread may clear it between two
    if data is None:
        data = ModelCatalogue.objects.filter(pk=newest[0]).values_list("data", flat=True).first()
        if data is None:  # replaced meanwhile
            return catalogue()
        _decoded.clear()
        _decoded[newest] = data
    return data


def stale() -> bool:
    newest = _newest()
    return newest is None or timezone.now() - newest[1] > MAX_AGE


def save_catalogue(data: dict) -> None:
    ModelCatalogue.objects.all().delete()
    # upstream JSON: every string cleaned as on every path that saves it (PostgreSQL's jsonb refuses NUL)
    ModelCatalogue.objects.create(data=deep(data), fetched_at=timezone.now())


# the choices of the newest catalogue, worked out once per catalogue (the search form wants them
# at every search): (the catalogue they came from, the choices)
_choices: tuple[dict, list[ModelChoice]] | None = None


def model_choices(data: dict | None = None) -> list[ModelChoice]:
    """Search models a person can pick: Best, then each picker slot (and its thinking twin)."""
    global _choices
    data = data or catalogue()
    memo = _choices  # read once: another thread may replace it meanwhile
    if memo is not None and memo[0] is data:
        return list(memo[1])
    choices = _model_choices(data)
    _choices = (data, choices)
    return list(choices)


def _model_choices(data: dict) -> list[ModelChoice]:
    models = data.get("models") if isinstance(data.get("models"), dict) else {}
    slots = data.get("config") or data.get("search_config") or []
    choices = [ModelChoice(BEST, "Best", "pro")]  # as Perplexity names it: it picks the model
    seen = {BEST}
    for slot in slots if isinstance(slots, list) else []:
        if not isinstance(slot, dict):
            continue
        tier = "max" if slot.get("subscription_tier") == "max" else "pro"
        label = str(slot.get("label") or "")
        for key, suffix in (("non_reasoning_model", ""), ("reasoning_model", " (thinking)")):
            slug = slot.get(key)
            info = models.get(slug) if isinstance(slug, str) else None
            if not isinstance(info, dict) or info.get("mode") != "search" or slug in seen:
                continue
            seen.add(slug)
            choices.append(ModelChoice(slug, f"{label or info.get('label') or slug}{suffix}", tier))
    return choices


def labelled(choices: list[ModelChoice], tier: str = "") -> list[tuple[str, str]]:
    """A model list's (id, name) pairs: a model above the account's tier marked "· Max" (every Max
    model while the tier is unknown, as before linking), so the list is the same before and after."""
    top = (tier or "").lower() in ("max", "enterprise")
    return [(c.slug, c.label if top or c.tier != "max" else f"{c.label} · Max") for c in choices]


async def refresh_catalogue(client) -> bool:
    """Fetch and store the catalogue with a linked client; False (logged) when it fails."""
    from asgiref.sync import sync_to_async

    from pplxweb.perplexity.errors import PerplexityError

    try:
        data = await client.models()
    except PerplexityError as exc:
        log.warning("model catalogue not refreshed: %s", exc.message)
        return False
    await sync_to_async(save_catalogue)(data)
    return True
