"""Which runs are alive: rows left `running` by a run that is gone are swept within a minute.

A run can die without saving its end (a process killed; an end whose save raised). Each process
that has runs or open sockets keeps a watcher task: every TICK it writes the heartbeat of its own
runs (one statement) and sweeps what is dead (models.RUNNER tells whose a row is). A row of
this process is dead when its run is not in the runs table, one of another when that process is
gone or its heartbeat is stale. With no runs, no sockets and no other process's row running,
the watcher ends after one last sweep; the next socket or run starts it again (and sweeps at
once). A row of another process is watched until it ends or is found dead, so a restart's lost
answers are rejoined even when nobody opens a page.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import weakref
from collections.abc import Callable, Collection
from datetime import timedelta
from pathlib import Path

from channels.db import database_sync_to_async
from django.utils import timezone

from pplxweb.perplexity.request import AskRequest
from search.live import asking
from search.models import RUNNER, Entry

log = logging.getLogger(__name__)
TICK = 15.0  # seconds between heartbeats and sweeps
# A run's heartbeat is written every few seconds (progress saves, search.live.liveness's beat every
# 15 s): silence this long means it died. LAUNCH_GRACE: a new entry is written just before its
# run is registered.
STALE_AFTER = timedelta(seconds=45)
LAUNCH_GRACE = timedelta(seconds=20)
_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = weakref.WeakKeyDictionary()
sockets = 0  # this process's open search sockets


def keep_watch(runs: Collection[int], rejoin: Callable[[Entry, AskRequest], object]) -> None:
    """Make sure this event loop's watcher runs; `runs`: the process's runs table (its keys are
    the entry ids of live runs), read at every tick; `rejoin(entry, request)` starts the run of an
    entry whose run was lost and that Perplexity may still be working on (search.live.runner)."""
    loop = asyncio.get_running_loop()
    task = _watchers.get(loop)
    if task is None or task.done():
        # a context of its own: the socket or run that started it may end first
        _watchers[loop] = loop.create_task(
            _watch(runs, rejoin), name="liveness", context=contextvars.Context()
        )


async def _watch(runs: Collection[int], rejoin: Callable[[Entry, AskRequest], object]) -> None:
    while True:
        try:
            swept, claimed = await database_sync_to_async(beat_and_sweep)(set(runs))
            # rows of other processes still running: watched until they end or are found dead
            others = await Entry.objects.filter(status=Entry.Status.RUNNING).exclude(runner=RUNNER).aexists()
        except Exception:  # the database is away: try again next tick
            others = True
            log.exception("liveness: heartbeat or sweep failed")
        else:
            if swept:
                log.warning("liveness: %d answer(s) whose run was gone marked interrupted", swept)
            for entry, request in claimed:
                log.info("liveness: rejoining the run of entry %s on Perplexity", entry.pk)
                rejoin(entry, request)
        if not runs and not sockets and not others:
            return
        await asyncio.sleep(TICK)


def beat_and_sweep(alive: set[int]) -> tuple[int, list[tuple[Entry, AskRequest]]]:
    """Write the heartbeat of this process's live runs, claim the lost runs Perplexity may still
    be working on (to rejoin them), and sweep the other dead ones."""
    if alive:
        Entry.objects.filter(pk__in=alive, status=Entry.Status.RUNNING).update(heartbeat=timezone.now())
    claimed = claim_lost(alive)
    return sweep_interrupted(alive=alive | {entry.pk for entry, _ in claimed}), claimed


def claim_lost(alive: Collection[int]) -> list[tuple[Entry, AskRequest]]:
    """Entries whose run is gone but named its upstream run (a backend_uuid, on a session),
    claimed by this process (one conditional update each, so two processes never both rejoin
    one), with the request to rejoin them with (docs/protocol.md §9.1)."""
    dead, _ = _dead(alive)  # not this process's own lost runs: their end failed here once already
    claimed = []
    rows = Entry.objects.filter(pk__in=dead, status=Entry.Status.RUNNING).exclude(backend_uuid="")
    for entry in rows.exclude(credential="api_key").select_related("thread", "user"):
        if Entry.objects.filter(pk=entry.pk, runner=entry.runner, status=Entry.Status.RUNNING).update(
            runner=RUNNER, heartbeat=timezone.now()
        ):
            claimed.append((entry, asking.build_request(entry)))
    return claimed


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs: a killed one that nobody has reaped yet (a zombie, as a
    server's worker whose main process was killed too stays until init reaps it) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:  # no /proc here: the signal's answer is all there is
        return True
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


def sweep_interrupted(at_start: bool = False, alive: Collection[int] | None = None) -> int:
    """Mark entries whose run died (crash, kill, an end that could not save) as interrupted,
    keeping what they saved; at start, those Perplexity may still be working on (a backend_uuid)
    are left for the watcher to rejoin (claim_lost), owned by nobody.

    A run of this process is dead when it is not among `alive` (its runs, when the caller knows
    them; search.live.liveness) once past its launch; one of another process on this machine when
    that process is gone (at start: any earlier process of ours); any other when its heartbeat
    (every few seconds while it runs) is older than STALE_AFTER.
    """
    dead, lost = _dead(alive, at_start)
    running = Entry.objects.filter(status=Entry.Status.RUNNING)
    if at_start:
        running.filter(pk__in=dead).exclude(backend_uuid="").exclude(credential="api_key").update(runner="")
        running = running.filter(backend_uuid="") | running.filter(credential="api_key")
    return running.filter(pk__in=dead).update(
        status=Entry.Status.INTERRUPTED,
        error="The server stopped while this answer was arriving; what had arrived is kept.",
    ) + running.filter(pk__in=lost).update(
        status=Entry.Status.INTERRUPTED,
        error="This answer's run ended without saving its outcome; what had arrived is kept.",
    )


def _dead(alive: Collection[int] | None, at_start: bool = False) -> tuple[list[int], list[int]]:
    """The running rows whose run is gone: (dead processes', this process's lost ones)."""
    host, now = socket.gethostname(), timezone.now()
    dead, lost = [], []
    for entry in Entry.objects.filter(status=Entry.Status.RUNNING).only(
        "pk", "runner", "heartbeat", "created"
    ):
        runner_host, _, pid = entry.runner.rpartition(":")
        stale = entry.heartbeat is None or now - entry.heartbeat > STALE_AFTER
        if entry.runner == RUNNER:
            if (
                alive is not None
                and entry.pk not in alive
                and now - (entry.heartbeat or entry.created) > LAUNCH_GRACE
            ):
                lost.append(entry.pk)
        elif runner_host == host and pid.isdigit():
            if at_start or not pid_alive(int(pid)) or stale:
                dead.append(entry.pk)
        elif stale or not entry.runner:  # nobody's: left by a start to be rejoined
            dead.append(entry.pk)
    return dead, lost
