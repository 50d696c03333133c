"""Rotate the keys that encrypt the Perplexity credentials.

    manage.py rotate_keys            add a new key (first) and re-encrypt every row with it
    manage.py rotate_keys --retire   drop every key but the first, after checking all rows open with it

With keys in the data dir's field_keys file both steps are done here. With PPLXWEB_FIELD_KEYS
(or _FILE) set, the command prints a new key to put first in that variable, and re-encrypts
once the server runs with it (`--reencrypt`).
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from accounts import fields
from accounts.models import LinkAttempt, PerplexityAccount

ENCRYPTED = ((PerplexityAccount, ("session", "api_key")), (LinkAttempt, ("state",)))


def _key_file() -> Path | None:
    if (
        os.environ.get("PPLXWEB_FIELD_KEYS", "").strip()
        or os.environ.get("PPLXWEB_FIELD_KEYS_FILE", "").strip()
    ):
        return None
    return Path(settings.DATA_DIR) / "field_keys"


def _write_keys(path: Path, keys: list[str]) -> None:
    tmp = path.with_name(f".{path.name}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(keys) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def _use_keys(keys: list[str]) -> None:
    settings.FIELD_ENCRYPTION_KEYS = keys
    fields._fernet.cache_clear()


def reencrypt() -> int:
    """Load and save every encrypted value: it is written again with the first key."""
    count = 0
    with transaction.atomic():
        for model, names in ENCRYPTED:
            for row in model.objects.select_for_update().all():
                row.save(update_fields=list(names))
                count += 1
    return count


class Command(BaseCommand):
    help = "Add a new encryption key and re-encrypt the stored credentials, or retire old keys."

    def add_arguments(self, parser) -> None:
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--retire", action="store_true", help="keep only the first key")
        group.add_argument("--reencrypt", action="store_true", help="only re-encrypt with the first key")

    def handle(self, *args, **options) -> None:
        try:
            if options["reencrypt"]:
                self.stdout.write(f"Re-encrypted {reencrypt()} rows with the first key.")
            elif options["retire"]:
                self._retire()
            else:
                self._rotate()
        except fields.DecryptionError as exc:
            raise CommandError(str(exc)) from None

    def _rotate(self) -> None:
        new = Fernet.generate_key().decode()
        path = _key_file()
        if path is None:
            self.stdout.write(
                "The keys come from PPLXWEB_FIELD_KEYS. Put this new key first in it (keep the old "
                "ones after it), restart pplxweb, then run: manage.py rotate_keys --reencrypt\n"
                f"{new}"
            )
            return
        keys = [new, *settings.FIELD_ENCRYPTION_KEYS]
        _write_keys(path, keys)  # first: the old keys stay, so every row keeps opening whatever happens next
        _use_keys(keys)
        count = reencrypt()
        self.stdout.write(
            f"Added a new key to {path} and re-encrypted {count} rows with it. Restart pplxweb, "
            "then retire the old keys with: manage.py rotate_keys --retire"
        )

    def _retire(self) -> None:
        first = settings.FIELD_ENCRYPTION_KEYS[:1]
        _use_keys(first)
        for model, names in ENCRYPTED:
            for row in model.objects.all():  # loading decrypts: every row must open with the first key
                for name in names:
                    getattr(row, name)
        path = _key_file()
        if path is None:
            self.stdout.write(
                "Every row opens with the first key. Remove the others from PPLXWEB_FIELD_KEYS."
            )
            return
        _write_keys(path, first)
        self.stdout.write(f"Every row opens with the first key; the others were removed from {path}.")
