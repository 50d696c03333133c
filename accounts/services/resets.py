"""Password resets: the owner makes a one-time code for a household member who forgot their
password, and tells it to them; the member types it with a new password at /accounts/reset/.

pplxweb sends no e-mail, so the code goes from the owner to the member by word of mouth or a
message. It is valid once, for RESET_VALID, and for MAX_TRIES wrong tries; only its hash is
kept, and a new code replaces the last one. The owner's own password is reset on the server
(`manage.py changepassword`), not here.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import PasswordReset
from accounts.services.people import SETUP_ALPHABET, normalise

log = logging.getLogger(__name__)
User = get_user_model()

RESET_VALID = timedelta(minutes=30)
MAX_TRIES = 5  # wrong codes for one user name before its code is void
REFUSED = (
    "That code does not match that user name, or it has expired or been used. "
    "Ask the owner of this pplxweb for a new one."
)


@dataclass(frozen=True)
class Issued:
    code: str  # shown once to the owner, never stored
    expires: datetime


class ResetRefused(Exception):
    message = REFUSED


def _hash(code: str) -> str:
    return hashlib.sha256(normalise(code).encode()).hexdigest()


def issue(person: AbstractBaseUser) -> Issued:
    """A fresh code for `person`, replacing any earlier one: three groups of four letters and
    digits (60 bits, read aloud or typed on a phone without 0/O or 1/I)."""
    code = "-".join("".join(secrets.choice(SETUP_ALPHABET) for _ in range(4)) for _ in range(3))
    expires = timezone.now() + RESET_VALID
    PasswordReset.objects.update_or_create(
        user=person, defaults={"code_hash": _hash(code), "expires": expires, "tries": 0}
    )
    log.info("password reset code made for %s, valid until %s", person.get_username(), expires)
    return Issued(code, expires)


def cancel(person: AbstractBaseUser) -> bool:
    return PasswordReset.objects.filter(user=person).delete()[0] > 0


def pending(people: list[AbstractBaseUser]) -> dict[int, datetime]:
    """user id -> until when their code is valid, for the codes still usable."""
    live = PasswordReset.objects.filter(user__in=people, expires__gt=timezone.now(), tries__lt=MAX_TRIES)
    return dict(live.values_list("user_id", "expires"))


def user_for(username: str) -> AbstractBaseUser | None:
    """The member a reset form names (for the password checks too: not like the user name)."""
    return User.objects.filter(username__iexact=username.strip(), is_superuser=False).first()


def redeem(username: str, code: str, password: str) -> AbstractBaseUser:
    """Set `password` for the member named `username` if `code` is their valid code (used up
    here); else ResetRefused, the same for every reason (no user, wrong, expired, used)."""
    person = user_for(username)
    with transaction.atomic():
        reset = PasswordReset.objects.select_for_update().filter(user=person).first() if person else None
        usable = reset is not None and reset.expires > timezone.now() and reset.tries < MAX_TRIES
        accepted = usable and hmac.compare_digest(reset.code_hash, _hash(code))
        if accepted:
            reset.delete()
            person.set_password(password)  # the other browsers' sessions end (their hash no longer matches)
            person.save(update_fields=["password"])
        elif reset is not None:
            PasswordReset.objects.filter(pk=reset.pk).update(tries=F("tries") + 1)
    if not accepted:
        raise ResetRefused
    log.info("password of %s reset with the owner's code", person.get_username())
    return person
