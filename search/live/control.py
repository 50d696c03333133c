"""Reaching a running answer wherever it runs: stop it, answer its clarifying questions, ask it
for its whole state. A run of this process is reached directly; one of another process (several
server processes on Redis) through its control group `run-<id>`, which it listens on
(search.live.runner.Run.listen)."""

from __future__ import annotations

from channels.layers import get_channel_layer

from pplxweb import sockets
from search.live import questions
from search.live.runner import RUNS, control_group


async def stop(entry_id: int) -> None:
    """Stop a running answer (what arrived is kept, as stopped)."""
    run = RUNS.get(entry_id)
    if run is not None:
        run.cancel(stop=True)
    else:
        await _to_run(entry_id, {"type": "run.stop"})


async def clarify(entry_id: int, answers: list[str]) -> None:
    """Answer (or, with no answers, skip) a running answer's clarifying questions."""
    run = RUNS.get(entry_id)
    if run is not None:
        questions.answer(run, answers)
    else:
        await _to_run(entry_id, {"type": "run.clarify", "answers": answers})


async def sync(entry_id: int, reply_to: str) -> None:
    """Have a running answer send its whole state to the channel `reply_to`."""
    run = RUNS.get(entry_id)
    if run is not None:
        run.sync(reply_to)
    else:
        await _to_run(entry_id, {"type": "run.sync", "reply_to": reply_to})


async def _to_run(entry_id: int, message: dict) -> None:
    """Through the run's control group (Redis away: the page is told of the outage and asks
    again when it reopens)."""
    await sockets.publish(get_channel_layer().group_send, control_group(entry_id), message)
