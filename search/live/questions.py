"""A research run's clarifying questions (docs/protocol.md §8.4): the page's answers go to Perplexity.

Answers come one per question ("" for one left open); all empty skips them: Perplexity goes on by
itself after its countdown, and no client knows a call that skips sooner. The run (runner.Run) is
given, never imported: the runner calls this module.
"""

from __future__ import annotations

import asyncio
import logging

from pplxweb.perplexity.errors import PerplexityError

log = logging.getLogger(__name__)


def answer(run, answers: list[str]) -> None:
    """Answer the question the run waits on, once; the page shows it answered at once."""
    question = run.result.question if run.result else None
    if question is None or question.key in run.clarified:
        return
    run.clarified.add(question.key)
    pairs = [(ask.text, given) for ask, given in zip(question.asks, answers, strict=False) if given]
    if pairs and run.client is not None:
        run.clarifying = asyncio.ensure_future(_send(run, question.key, pairs))
    run.update_soon()


async def _send(run, key: str, pairs: list[tuple[str, str]]) -> None:
    try:
        await run.client.answer_question(key, pairs)
    except PerplexityError as exc:
        log.warning("answering the clarifying question of entry %s failed: %s", run.entry_id, exc.message)
