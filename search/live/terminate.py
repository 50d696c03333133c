"""Stop stops Perplexity too: after a stopped run's read is cancelled, the terminate call
(docs/protocol.md §9.2) tells Perplexity to stop working (and counting) on its side.

Sent in the background, so the stop and its save never wait for it; bounded at TIMEOUT, and a
failure is only logged: the answer is stopped here whatever Perplexity says.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import TYPE_CHECKING

from accounts.services import Credential, make_client

if TYPE_CHECKING:
    from search.live.outcome import RunState

log = logging.getLogger(__name__)
TIMEOUT = 5.0  # seconds for the whole call
_sending: set[asyncio.Task] = set()  # a task nobody holds may be collected before it ends


def after_stop(run: RunState) -> asyncio.Task | None:
    """Send terminate for a run just stopped, when Perplexity has named it (its first event)."""
    result, credential = run.result, run.credential
    if result is None or not result.backend_uuid or credential is None or credential.kind == "api_key":
        log.debug("entry %s stopped before Perplexity named its run: nothing to terminate", run.entry_id)
        return None
    model = result.model or run.request.options.model
    return send(run.entry_id, credential, result.backend_uuid, result.context_uuid, model)


def send(
    entry_id: int, credential: Credential, entry_uuid: str, context_uuid: str, model: str
) -> asyncio.Task:
    """Terminate Perplexity's run `entry_uuid` in the background (also a run pplxweb stopped
    reading for another reason: search/live/upstream.py)."""
    task = asyncio.get_running_loop().create_task(
        _terminate(entry_id, credential, entry_uuid, context_uuid, model),
        name=f"terminate-{entry_id}",
        context=contextvars.Context(),
    )
    _sending.add(task)
    task.add_done_callback(_sending.discard)
    return task


async def _terminate(
    entry_id: int, credential: Credential, entry_uuid: str, context_uuid: str, model: str
) -> None:
    try:
        async with asyncio.timeout(TIMEOUT):
            async with make_client(
                cookies=credential.cookies,
                user_agent=credential.user_agent,
                account_id=credential.account.account_id,
            ) as client:
                await client.terminate(entry_uuid, context_uuid, model)
    except TimeoutError:
        log.warning("entry %s: Perplexity did not answer the stop within %.0f s", entry_id, TIMEOUT)
    except Exception as exc:  # PerplexityError carries a sentence; anything else its kind
        reason = getattr(exc, "message", None) or type(exc).__name__
        log.warning("entry %s: stopping the run on Perplexity failed: %s", entry_id, reason)
    else:
        log.info("entry %s: stopped on Perplexity too", entry_id)
