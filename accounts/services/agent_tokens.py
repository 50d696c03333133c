"""Agent tokens: a person names one per agent, sees it once, and revokes it at once.

A token is `pplxweb_` and 43 random URL-safe characters (256 bits). Only its SHA-256 is stored,
so a copy of the database opens nothing, and a lookup by that hash needs no slow hashing: the
token is random, not a password. A token acts as its person (their link, or the owner's shared
one where the page would use it); it is never the Perplexity session and never leaves pplxweb.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import AgentToken

PREFIX = "pplxweb_"
SHAPE = re.compile(r"pplxweb_[A-Za-z0-9_-]{43}")
MAX_NAME = 60
USED_EVERY = timedelta(minutes=1)  # "last used" is written at most this often per token


class TokenRefused(Exception):
    """Nothing was made or revoked; `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def clean_name(name: str) -> str:
    name = " ".join(str(name or "").split())
    if not name:
        raise TokenRefused("Give the token a name, such as the agent that will use it.")
    if len(name) > MAX_NAME or not name.isprintable():
        raise TokenRefused(f"A token's name is at most {MAX_NAME} printable characters.")
    return name


def create(user, name: str) -> str:
    """A new token for `user` named `name`: returned once, kept only as its hash."""
    name = clean_name(name)
    token = PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            AgentToken.objects.create(user=user, name=name, digest=digest(token))
    except IntegrityError:
        raise TokenRefused(
            f"You already have a token named “{name}”; revoke it first or choose another name."
        ) from None
    return token


def revoke(user, name: str) -> None:
    """Revoke `user`'s token named `name`: every request with it is refused from now on."""
    deleted, _ = AgentToken.objects.filter(user=user, name=" ".join(str(name or "").split())).delete()
    if not deleted:
        raise TokenRefused(f"There is no token named “{name}”.")


def revoke_by_id(user, pk) -> str:
    """Revoke one of `user`'s tokens by its row id (Settings' buttons); returns its name."""
    token = AgentToken.objects.filter(user=user, pk=pk).first() if str(pk).isdigit() else None
    if token is None:
        raise TokenRefused("That token was already revoked.")
    token.delete()
    return token.name


def tokens_of(user) -> list[AgentToken]:
    return list(AgentToken.objects.filter(user=user))


def authenticate(token: str) -> AgentToken | None:
    """The live token row (with its person) that `token` is, else None: a malformed, unknown or
    revoked token, or one whose person may no longer sign in. Notes when it was used."""
    if not isinstance(token, str) or not SHAPE.fullmatch(token):
        return None
    found = AgentToken.objects.select_related("user").filter(digest=digest(token)).first()
    if found is None or not found.user.is_active:
        return None
    now = timezone.now()
    if found.last_used is None or now - found.last_used >= USED_EVERY:
        AgentToken.objects.filter(pk=found.pk).update(last_used=now)
        found.last_used = now
    return found


def still_valid(token_id: int) -> bool:
    """Whether a token is still there (a long answer checks now and then: revoking ends it)."""
    return AgentToken.objects.filter(pk=token_id, user__is_active=True).exists()
