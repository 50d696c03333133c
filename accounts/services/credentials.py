"""Which credential a search uses, and what a search tells us back about it.

Order: the person's own session link (unless it needs attention), then the owner's link when
the owner shares it, then the person's API key, then the own link anyway (its failure then
says what to do).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import F
from django.utils import timezone

from accounts.models import PerplexityAccount


class NoCredential(Exception):
    message = "Link your Perplexity account in Settings first (or ask the owner to share theirs)."


@dataclass(frozen=True)
class Credential:
    kind: str  # "session", "shared" or "api_key"
    account: PerplexityAccount = field(repr=False)
    cookies: dict = field(default_factory=dict, repr=False)
    user_agent: str = ""
    api_key: str = field(default="", repr=False)


def _session(account: PerplexityAccount, kind: str) -> Credential:
    data = account.session_data()
    return Credential(kind, account, dict(data.get("cookies") or {}), data.get("user_agent", ""))


def credentials_for(user) -> Credential:
    own = PerplexityAccount.objects.filter(user=user).first()
    if own and own.linked and own.status != PerplexityAccount.Status.NEEDS_ATTENTION:
        return _session(own, "session")
    shared = (
        PerplexityAccount.objects.filter(shared=True, user__is_superuser=True, session__isnull=False)
        .exclude(user=user)
        .exclude(status=PerplexityAccount.Status.NEEDS_ATTENTION)
        .first()
    )
    if shared and shared.linked:
        return _session(shared, "shared")
    if own and own.api_key:
        return Credential("api_key", own, api_key=own.api_key)
    if own and own.linked:
        return _session(own, "session")
    raise NoCredential


def record_search(user, credential: Credential, cookies: dict | None = None) -> None:
    """After a search: when, with what, and the session cookie as Perplexity rotated it."""
    import json

    now = timezone.now()
    account = credential.account
    updates = {"last_search_at": now, "last_credential": credential.kind}
    if credential.kind == "shared":
        updates["shared_searches"] = F("shared_searches") + 1
    PerplexityAccount.objects.filter(pk=account.pk).update(**updates)
    own = PerplexityAccount.objects.filter(user=user).exclude(pk=account.pk)
    own.update(last_search_at=now, last_credential=credential.kind)
    if cookies and credential.kind in ("session", "shared") and cookies != credential.cookies:
        fresh = PerplexityAccount.objects.get(pk=account.pk)
        fresh.session = json.dumps({**fresh.session_data(), "cookies": cookies})
        fresh.save(update_fields=["session"])
