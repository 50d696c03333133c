from __future__ import annotations

from django.db import models


class TokenBucket(models.Model):
    """One rate-limit bucket; the key is a hash of what is limited (see ratelimit.py)."""

    key = models.CharField(max_length=100, unique=True)
    tokens = models.FloatField()
    updated = models.DateTimeField()

    def __str__(self) -> str:
        return self.key
