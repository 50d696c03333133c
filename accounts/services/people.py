"""People: the owner (first person, created with the setup code or from the environment) and
the household members the owner adds in Settings."""

from __future__ import annotations

import hmac
import logging
import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.db import transaction

log = logging.getLogger(__name__)
User = get_user_model()

SETUP_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud and typed on a phone


class SetupClosed(Exception):
    """Somebody already owns this server."""


def _setup_code_path() -> Path:
    return Path(settings.DATA_DIR) / "setup_code"


def needs_setup() -> bool:
    return not User.objects.exists()


def issue_setup_code() -> str:
    """A fresh one-time setup code, stored 0600 in the data dir (any process can check it)."""
    code = "-".join("".join(secrets.choice(SETUP_ALPHABET) for _ in range(4)) for _ in range(3))
    path = _setup_code_path()
    tmp = path.with_name(f".setup_code.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(code)
    tmp.replace(path)
    return code


def normalise(code: str) -> str:
    """A typed code as compared: letters and digits only, upper case."""
    return "".join(ch for ch in code.upper() if ch.isalnum())


def setup_code_matches(code: str) -> bool:
    try:
        expected = _setup_code_path().read_text().strip()
    except OSError:
        return False
    given = normalise(code)[:64]
    return bool(expected) and hmac.compare_digest(given.encode(), normalise(expected).encode())


def create_owner(username: str, password: str) -> AbstractBaseUser:
    """Create the owner; SetupClosed if anybody exists already (checked inside the write lock)."""
    with transaction.atomic():
        if User.objects.exists():
            raise SetupClosed
        owner = User.objects.create_superuser(username=username, password=password, email="")
    _setup_code_path().unlink(missing_ok=True)
    log.info("owner %s created", username)
    return owner


def ensure_owner_from_env(env: dict[str, str] | None = None) -> str | None:
    """Create the owner from PPLXWEB_ADMIN_USER / PPLXWEB_ADMIN_PASSWORD when nobody exists yet.

    Returns the owner's name when one was created. An existing install is never changed, so
    leaving the variables set does not reset anybody's password.
    """
    env = os.environ if env is None else env
    username = env.get("PPLXWEB_ADMIN_USER", "").strip()
    password = env.get("PPLXWEB_ADMIN_PASSWORD", "")
    if not username and not password:
        return None
    if not username or not password:
        from pplxweb.env import ConfigError

        raise ConfigError("PPLXWEB_ADMIN_USER and PPLXWEB_ADMIN_PASSWORD must be set together.")
    if not needs_setup():
        return None
    validate_password(password, User(username=username))
    try:
        create_owner(username, password)
    except SetupClosed:
        return None
    return username


def household(owner: AbstractBaseUser) -> list[AbstractBaseUser]:
    return list(User.objects.exclude(pk=owner.pk).order_by("username"))


def add_member(username: str, password: str) -> AbstractBaseUser:
    return User.objects.create_user(username=username, password=password)


def member_of(owner: AbstractBaseUser, member_id: int) -> AbstractBaseUser | None:
    """A household member of `owner` (never the owner, never another owner), or None."""
    return User.objects.filter(pk=member_id, is_superuser=False).exclude(pk=owner.pk).first()
