"""An encrypted text column on Fernet keys from the data dir or the environment.

The first key in settings.FIELD_ENCRYPTION_KEYS encrypts; every key decrypts, so a new key can
be put first and the old ones retired after `manage.py rotate_keys`. A value that no key opens
raises DecryptionError: the field never hands back ciphertext as if it were the secret.
"""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models


class DecryptionError(Exception):
    """No configured key opens a stored value (wrong or missing PPLXWEB_FIELD_KEYS)."""


UNREADABLE = (
    "pplxweb cannot read the stored Perplexity sign-in: none of its encryption keys "
    "(PPLXWEB_FIELD_KEYS, or the data dir's field_keys file) opens it. The owner can put back the key "
    "that was in use; the README's key rotation section says where keys live."
)
"""What a person is told when their credential row does not open (the log has DecryptionError's
own words, for the owner)."""


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def fernet() -> MultiFernet:
    return _fernet(tuple(settings.FIELD_ENCRYPTION_KEYS))


def encrypt(value: str) -> str:
    return fernet().encrypt(value.encode()).decode()


def decrypt(token: str, where: str = "an encrypted column") -> str:
    try:
        return fernet().decrypt(token.encode()).decode()
    except (InvalidToken, ValueError):
        raise DecryptionError(
            f"Cannot decrypt {where}: none of the keys in PPLXWEB_FIELD_KEYS (or the data dir's "
            "field_keys file) opens it. Restore the key that was in use."
        ) from None


def rotate(token: str) -> str:
    """The same secret encrypted with the first (newest) key."""
    try:
        return fernet().rotate(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError("Cannot re-encrypt a value no configured key opens.") from None


class EncryptedTextField(models.TextField):
    """Text stored as a Fernet token. Never index, filter or order by it."""

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if value is None:
            return None
        return encrypt(str(value))

    def from_db_value(self, value, expression, connection):
        if value is None:
            return None
        return decrypt(value, f"{self.model.__name__}.{self.name}")
