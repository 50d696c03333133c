"""What a run checks at its end: shapes of the stream pplxweb did not know, an answer that came
out empty although the stream carried blocks, whether a `turbo` answer really means the linked
session is signed out (docs/protocol.md §6.7), and what a run that failed is saved as."""

from __future__ import annotations

import logging
import time

from accounts.fields import UNREADABLE, DecryptionError
from accounts.services import Credential, NoCredential
from pplxweb.perplexity import drift
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import AuthError, PerplexityError, RunGone
from pplxweb.perplexity.extract import Result
from pplxweb.perplexity.merge import Snapshot

log = logging.getLogger(__name__)
FORMAT_CHANGED = "Perplexity's answer format changed; pplxweb may need an update. What arrived is kept."
UNEXPECTED = "pplxweb hit an error it did not expect; what had arrived is kept. The server log says more."
SESSION_CHECK_EVERY = 300.0  # seconds between two session checks of one linked account
_checked: dict[int, tuple[float, bool]] = {}  # account pk -> (when, signed out)
_noted: set[tuple[str, str]] = set()  # drift already logged by this process


def note_drift(entry_id: int, snapshot: Snapshot) -> dict[str, list[str]]:
    """The unknown shapes of a run's stream; each new one is logged once per process."""
    shapes = drift.unknown(snapshot)
    for kind, names in shapes.items():
        for name in names:
            if (kind, name) not in _noted:
                _noted.add((kind, name))
                log.warning(
                    "Perplexity sent %s %r, which pplxweb does not know (entry %s)", kind, name, entry_id
                )
    return shapes


def format_changed(result: Result, snapshot: Snapshot) -> bool:
    """A completed answer with nothing to show, although the stream carried blocks."""
    return (
        result.status == "completed"
        and not result.answer.strip()
        and not result.report
        and not result.images
        and bool(snapshot.blocks)
    )


async def signed_out(client: PerplexityClient, credential: Credential) -> bool:
    """Whether Perplexity says the credential's session is signed out, asked at most once per
    linked account every SESSION_CHECK_EVERY seconds. Anything but a clear "signed out" (a
    network fault, a challenge) counts as not signed out: nobody is told their link expired on
    a guess."""
    if credential.kind == "api_key":
        return False
    key = credential.account.pk
    now = time.monotonic()
    if key in _checked and now - _checked[key][0] < SESSION_CHECK_EVERY:
        return _checked[key][1]
    try:
        await client.session_info()
        out = False
    except AuthError:
        out = True
    except PerplexityError as exc:
        log.warning("checking the session after a turbo answer failed: %s", exc.message)
        out = False
    _checked[key] = (now, out)
    return out


def failure(exc: Exception, entry_id: int) -> tuple[str, str]:
    """The status and sentence a run that raised `exc` is saved with (an unexpected error, and a
    key that opens no credential, which is the owner's to fix, go to the log)."""
    if isinstance(exc, RunGone):  # a rejoin after a restart: Perplexity no longer has the run
        return "interrupted", exc.message
    if isinstance(exc, NoCredential | PerplexityError):
        return "failed", exc.message
    if isinstance(exc, DecryptionError):
        log.error("search run for entry %s: %s", entry_id, exc)
        return "failed", UNREADABLE
    log.error("search run for entry %s failed", entry_id, exc_info=exc)
    return "failed", UNEXPECTED
