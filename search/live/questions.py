"""A research run's clarifying questions (docs/protocol.md §8.4): the page's answers go to Perplexity,
and what was asked and answered is kept with the entry (search/clarifications.py).

Answers come one per question ("" for one left open); all empty skips them: Perplexity goes on by
itself after its countdown, and no client knows a call that skips sooner. The run (runner.Run) is
given, never imported: the runner calls this module.
"""

from __future__ import annotations

import asyncio
import logging

from pplxweb.perplexity.errors import PerplexityError
from search import clarifications

log = logging.getLogger(__name__)


def noticed(run) -> None:
    """Keep each clarifying step the run shows, the first time it shows (a later frame may drop
    the step: the record stays), with the answers it carries (answered elsewhere, say)."""
    for found in run.result.clarifying if run.result else ():
        key = found.question.key
        if key not in run.clarifications:
            run.clarifications[key] = clarifications.record(found.question, found.answers, "waiting")


def answer(run, answers: list[str]) -> None:
    """Answer the question the run waits on, once; the page shows it answered at once."""
    question = run.result.question if run.result else None
    if question is None or question.key in run.clarified:
        return
    run.clarified.add(question.key)
    pairs = [(ask.text, given) for ask, given in zip(question.asks, answers, strict=False) if given]
    record = run.clarifications.setdefault(question.key, clarifications.record(question, (), "waiting"))
    for item, given in zip(record["questions"], answers, strict=False):
        item["answer"] = given
    record["outcome"] = "answered" if pairs else "skipped"
    if pairs and run.client is not None:
        run.clarifying = asyncio.ensure_future(_send(run, question.key, pairs))
    run.update_soon()


async def _send(run, key: str, pairs: list[tuple[str, str]]) -> None:
    try:
        await run.client.answer_question(key, pairs)
    except PerplexityError as exc:
        log.warning("answering the clarifying question of entry %s failed: %s", run.entry_id, exc.message)
        run.clarifications[key]["outcome"] = "not_sent"
        run.update_soon()


def kept(run, final: bool = False) -> list[dict]:
    """The run's clarifying questions as saved: one the run no longer waits on (and nobody here
    answered) went on by itself; one it still waits on at its end was never answered."""
    question = run.result.question if run.result else None
    waiting = question.key if question is not None else None
    records = []
    for key, record in list(run.clarifications.items())[: clarifications.MAX_RECORDS]:
        outcome = record["outcome"]
        if outcome == "waiting" and (key != waiting or final):
            outcome = "unanswered" if key == waiting else "auto"
        records.append({**record, "outcome": outcome})
    return records
