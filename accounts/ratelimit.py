"""A token bucket per key, kept in the database so every server process shares it.

Each bucket holds up to `capacity` tokens and refills at `capacity / period` tokens a second.
An attempt takes one token; with none left the caller is told how long until the next one.
Keys are hashed so no email address or IP lands in the table as it is.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import TokenBucket


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int  # seconds until one token is back; 0 when allowed

    @property
    def wait_text(self) -> str:
        return wait_text(self.retry_after)


def wait_text(seconds: int) -> str:
    """'in 40 seconds', 'in 12 minutes', 'in 2 hours'."""
    if seconds < 90:
        n, unit = max(seconds, 1), "second"
    elif seconds < 90 * 60:
        n, unit = math.ceil(seconds / 60), "minute"
    else:
        n, unit = math.ceil(seconds / 3600), "hour"
    return f"in {n} {unit}{'' if n == 1 else 's'}"


def _key(scope: str, value: str) -> str:
    digest = hashlib.sha256(f"{settings.SECRET_KEY}:{scope}:{value}".encode()).hexdigest()
    return f"{scope}:{digest[:64]}"[:100]


def _refilled(bucket: TokenBucket, capacity: int, period: timedelta, now) -> float:
    rate = capacity / period.total_seconds()
    elapsed = max((now - bucket.updated).total_seconds(), 0.0)
    return min(float(capacity), bucket.tokens + elapsed * rate)


def take(scope: str, value: str, capacity: int, period: timedelta, cost: float = 1.0) -> Verdict:
    """Take `cost` tokens from the bucket (scope, value); refuse with the wait when empty."""
    # no savepoint of its own: a caller's transaction ends as a whole anyway
    with transaction.atomic(savepoint=False):
        held = Held(scope, [value], capacity, period)
        verdict = held.verdict(value, cost)
        if verdict.allowed:
            held.take(value, cost)
            held.save()
    return verdict


class Held:
    """The buckets of several values of one scope, read and locked until the caller's transaction
    ends, so that many attempts can be judged in memory one after another and written back in one
    statement (a burst of search starts). Use inside transaction.atomic()."""

    def __init__(self, scope: str, values: list[str], capacity: int, period: timedelta) -> None:
        self.now = timezone.now()
        self.rate = capacity / period.total_seconds()
        self.keys = {value: _key(scope, value) for value in values}
        # sorted, so two processes locking overlapping sets cannot deadlock
        buckets = TokenBucket.objects.select_for_update()
        wanted = sorted(set(self.keys.values()))
        self.buckets = {b.key: b for b in buckets.filter(key__in=wanted).order_by("key")}
        self.tokens = {key: _refilled(b, capacity, period, self.now) for key, b in self.buckets.items()}
        for key in wanted:
            if key not in self.buckets:  # a first attempt: get_or_create copes with another process too
                bucket, created = buckets.get_or_create(
                    key=key, defaults={"tokens": float(capacity), "updated": self.now}
                )
                self.buckets[key] = bucket
                self.tokens[key] = (
                    float(capacity) if created else _refilled(bucket, capacity, period, self.now)
                )
        self.taken: set[str] = set()

    def verdict(self, value: str, cost: float = 1.0) -> Verdict:
        """Whether `cost` tokens are there for `value` now, without taking them."""
        tokens = self.tokens[self.keys[value]]
        if tokens >= cost:
            return Verdict(True, 0)
        return Verdict(False, max(1, math.ceil((cost - tokens) / self.rate)))

    def take(self, value: str, cost: float = 1.0) -> None:
        key = self.keys[value]
        self.tokens[key] -= cost
        self.taken.add(key)

    def save(self) -> None:
        """Write back the buckets tokens were taken from."""
        changed = [self.buckets[key] for key in sorted(self.taken)]
        for bucket in changed:
            bucket.tokens, bucket.updated = self.tokens[bucket.key], self.now
        if len(changed) == 1:
            changed[0].save(update_fields=["tokens", "updated"])
        elif changed:  # one statement; the rows exist and are locked, so the insert always updates
            TokenBucket.objects.bulk_create(
                changed, update_conflicts=True, unique_fields=["key"], update_fields=["tokens", "updated"]
            )
        self.taken.clear()


def peek(scope: str, value: str, capacity: int, period: timedelta) -> Verdict:
    """Whether one token is there, without taking it."""
    bucket = TokenBucket.objects.filter(key=_key(scope, value)).first()
    if bucket is None:
        return Verdict(True, 0)
    tokens = _refilled(bucket, capacity, period, timezone.now())
    if tokens >= 1:
        return Verdict(True, 0)
    rate = capacity / period.total_seconds()
    return Verdict(False, max(1, math.ceil((1 - tokens) / rate)))


def give_back(scope: str, value: str, capacity: int, period: timedelta, cost: float = 1.0) -> None:
    """Return `cost` tokens taken from the bucket (scope, value), never past `capacity`."""
    with transaction.atomic(savepoint=False):
        bucket = TokenBucket.objects.select_for_update().filter(key=_key(scope, value)).first()
        if bucket is not None:
            now = timezone.now()
            bucket.tokens = min(float(capacity), _refilled(bucket, capacity, period, now) + cost)
            bucket.updated = now
            bucket.save(update_fields=["tokens", "updated"])


def reset(scope: str, value: str) -> None:
    TokenBucket.objects.filter(key=_key(scope, value)).delete()


def prune(older_than: timedelta = timedelta(days=2)) -> int:
    """Drop buckets untouched for a while (they would be full again anyway)."""
    deleted, _ = TokenBucket.objects.filter(updated__lt=timezone.now() - older_than).delete()
    return deleted
