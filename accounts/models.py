from __future__ import annotations

import json

from django.conf import settings
from django.db import models

from accounts.fields import EncryptedTextField


class TokenBucket(models.Model):
    """One rate-limit bucket; the key is a hash of what is limited (see ratelimit.py)."""

    key = models.CharField(max_length=100, unique=True)
    tokens = models.FloatField()
    updated = models.DateTimeField()

    def __str__(self) -> str:
        return self.key


class PerplexityAccount(models.Model):
    """A person's link to their Perplexity account. The credentials are encrypted at rest."""

    class Status(models.TextChoices):
        OK = "ok", "ok"
        NEEDS_ATTENTION = "needs_attention", "needs attention"
        BLOCKED = "blocked", "blocked by Cloudflare"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="perplexity")
    email = models.CharField(max_length=254, blank=True)
    account_id = models.CharField(max_length=100, blank=True)
    tier = models.CharField(max_length=30, blank=True)
    expires = models.DateTimeField(null=True, blank=True)
    linked_at = models.DateTimeField(null=True, blank=True)
    # {"cookies": {...session cookie, cf_clearance...}, "user_agent": "..."}; empty when unlinked
    session = EncryptedTextField(null=True, blank=True)
    api_key = EncryptedTextField(null=True, blank=True)
    api_key_last4 = models.CharField(max_length=4, blank=True)
    via_cookie_fallback = models.BooleanField(default=False)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OK)
    status_reason = models.CharField(max_length=300, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    last_search_at = models.DateTimeField(null=True, blank=True)
    last_credential = models.CharField(max_length=20, blank=True)  # "session", "shared", "api_key"
    shared = models.BooleanField(default=False)  # the owner lets the household search with this link
    shared_searches = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"Perplexity link of {self.user}"

    @property
    def linked(self) -> bool:
        return bool(self.session)

    def session_data(self) -> dict:
        try:
            data = json.loads(self.session or "{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}


class LinkAttempt(models.Model):
    """The server-side state of a link in progress (its cookie jar never goes to the browser)."""

    class Step(models.TextChoices):
        CODE = "code", "waiting for the e-mailed code"
        TOTP = "totp", "waiting for the authenticator code"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="link_attempt"
    )
    email = models.CharField(max_length=254)
    step = models.CharField(max_length=10, choices=Step.choices, default=Step.CODE)
    state = EncryptedTextField()  # {"cookies": {...}, "csrf": "...", "challenge": "..."}
    tries = models.PositiveSmallIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"link attempt of {self.user}"


class ModelCatalogue(models.Model):
    """The latest /rest/models/config reply (one row)."""

    data = models.JSONField()
    fetched_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"model catalogue of {self.fetched_at:%Y-%m-%d %H:%M}"


class SearchDefaults(models.Model):
    """A person's preset options for new searches."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="search_defaults"
    )
    model = models.CharField(max_length=80, default="pplx_pro")
    mode = models.CharField(max_length=20, default="pro")
    sources = models.CharField(max_length=80, default="web")  # comma separated; empty: no web
    recency = models.CharField(max_length=10, blank=True)
    language = models.CharField(max_length=20, default="en-US")
    incognito = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"search defaults of {self.user}"

    def as_initial(self) -> dict:
        """The presets as a form's initial values (the Settings form, the search options)."""
        return {
            "model": self.model,
            "mode": self.mode,
            "sources": [s for s in self.sources.split(",") if s],
            "recency": self.recency,
            "language": self.language,
            "incognito": self.incognito,
        }


class StorageQuota(models.Model):
    """What a person may keep on this server (search.storage counts it), when the owner set it;
    without a row, settings.STORAGE_QUOTA_MB."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    megabytes = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"storage quota of {self.user}: {self.megabytes} MB"


class AgentToken(models.Model):
    """A token a person gave one of their agents (the API under /v1/, the MCP server at /mcp).
    Only its hash is kept: the token itself is shown once, when it is made
    (accounts.services.agent_tokens). It acts as its person and stands for nothing else."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_tokens")
    name = models.CharField(max_length=60)
    digest = models.CharField(max_length=64, unique=True)  # SHA-256 of the token, hex
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="agent_token_name")]

    def __str__(self) -> str:
        return f"agent token {self.name} of {self.user}"


class PasswordReset(models.Model):
    """A one-time code the owner made for a household member who forgot their password
    (accounts.services.resets): its hash only, valid once, until `expires`, for a few tries."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="password_reset"
    )
    code_hash = models.CharField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    tries = models.PositiveSmallIntegerField(default=0)

    def __str__(self) -> str:
        return f"password reset of {self.user}"
