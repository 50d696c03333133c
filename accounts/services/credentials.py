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
    credential = credentials_for_many([user])[user.pk]
    if credential is None:
        raise NoCredential
    return credential


def credentials_for_many(users: list) -> dict[int, Credential | None]:
    """credentials_for of several people (by their pk) in one or two statements; None for whoever
    has no credential."""
    own = {a.user_id: a for a in PerplexityAccount.objects.filter(user__in=[u.pk for u in users])}
    shared: list[PerplexityAccount] | None = None  # read when someone needs it
    chosen: dict[int, Credential | None] = {}
    for user in users:
        account = own.get(user.pk)
        if account and account.linked and account.status != PerplexityAccount.Status.NEEDS_ATTENTION:
            chosen[user.pk] = _session(account, "session")
            continue
        if shared is None:
            shared = list(
                PerplexityAccount.objects.filter(shared=True, user__is_superuser=True, session__isnull=False)
                .exclude(status=PerplexityAccount.Status.NEEDS_ATTENTION)
                .order_by("pk")
            )
        owners = [a for a in shared if a.user_id != user.pk]
        if owners and owners[0].linked:
            chosen[user.pk] = _session(owners[0], "shared")
        elif account and account.api_key:
            chosen[user.pk] = Credential("api_key", account, api_key=account.api_key)
        elif account and account.linked:
            chosen[user.pk] = _session(account, "session")
        else:
            chosen[user.pk] = None
    return chosen


RELINK = " Re-link in Settings."


def link_notice(user, chosen: Credential | None) -> tuple[str, str]:
    """What the search page says when the link `user`'s searches rely on has a problem: (the
    sentence, the words of its link to Settings), or ("", "") when all is well. `chosen`: the
    credential their searches use now (credentials_for_many)."""
    own = PerplexityAccount.objects.filter(user=user).first()
    if own is not None and own.linked and own.status != PerplexityAccount.Status.OK:
        if own.status == PerplexityAccount.Status.BLOCKED:
            return own.status_reason or "Perplexity's Cloudflare check blocked this server.", "Open Settings"
        sentence = (own.status_reason or "Perplexity did not accept your linked session.").removesuffix(
            RELINK
        )
        meanwhile = {"shared": " Until then you search with the owner's shared link.",
                     "api_key": " Until then you search with your API key."}  # fmt: skip
        return sentence + meanwhile.get(chosen.kind if chosen else "", ""), "Re-link in Settings"
    if chosen is None and not user.is_superuser:
        broken = PerplexityAccount.objects.filter(
            shared=True, user__is_superuser=True, status=PerplexityAccount.Status.NEEDS_ATTENTION
        )
        if broken.exists():
            return (
                "The owner's shared Perplexity link needs attention: ask the owner to re-link it, "
                "or link your own.",
                "Open Settings",
            )
    return "", ""


def record_search(user, credential: Credential, cookies: dict | None = None) -> None:
    """After a search: when, with what, and the session cookie as Perplexity rotated it."""
    now = timezone.now()
    account = credential.account
    updates = {"last_search_at": now, "last_credential": credential.kind}
    if credential.kind == "shared":
        updates["shared_searches"] = F("shared_searches") + 1
    PerplexityAccount.objects.filter(pk=account.pk).update(**updates)
    if account.user_id != user.pk:  # someone else's account: the person's own row shows it too
        own = PerplexityAccount.objects.filter(user=user)
        own.update(last_search_at=now, last_credential=credential.kind)
    if credential.kind in ("session", "shared"):
        keep_rotated_cookies(account, credential.cookies, cookies)


def keep_rotated_cookies(account: PerplexityAccount, before: dict, after: dict | None) -> None:
    """After calls with a session: its cookies as Perplexity left them, if it changed them."""
    import json

    if after and after != before:
        fresh = PerplexityAccount.objects.filter(pk=account.pk).first()
        if fresh is None:  # its person was removed meanwhile
            return
        fresh.session = json.dumps({**fresh.session_data(), "cookies": after})
        fresh.save(update_fields=["session"])
