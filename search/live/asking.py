"""Asking and remembering: the use-cases behind the search page, the socket and the commands."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count
from django.http import Http404
from django.utils import timezone

from accounts import ratelimit
from accounts.models import SearchDefaults
from accounts.services import Credential, credentials_for, credentials_for_many
from pplxweb.perplexity.request import MAX_DOMAINS, MODES, RECENCY, SOURCES, AskOptions, AskRequest, FollowUp
from search import attachments
from search.display import catalogue_models
from search.models import RUNNER, Entry, Thread

log = logging.getLogger(__name__)

MAX_RUNNING = 2
PER_MINUTE = 20

# what a saved option may be (see options_from_json)
SLUG = re.compile(r"[\w.-]{1,80}")
LANGUAGE = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?")
TIMEZONE = re.compile(r"[\w/+-]{1,64}")


class SearchRefused(Exception):
    """The search was not started; `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def defaults_for(user) -> SearchDefaults:
    defaults, _ = SearchDefaults.objects.get_or_create(user=user)
    return defaults


def defaults_for_many(users: list) -> dict[int, SearchDefaults]:
    """defaults_for of several people, by their pk, in one statement once they all have them.
    Someone who no longer exists (removed while their socket stayed open) is left out."""
    found = {d.user_id: d for d in SearchDefaults.objects.filter(user__in=[u.pk for u in users])}
    missing = [user for user in users if user.pk not in found]
    if missing:  # a first search, or someone removed (their defaults went with them)
        existing = set(
            get_user_model().objects.filter(pk__in=[u.pk for u in missing]).values_list("pk", flat=True)
        )
        for user in missing:
            if user.pk in existing:
                found[user.pk] = defaults_for(user)
    return found


def options_as_json(options: AskOptions) -> dict:
    return {
        "model": options.model,
        "mode": options.mode,
        "sources": list(options.sources),
        "recency": options.recency,
        "after": options.after.isoformat() if options.after else None,
        "before": options.before.isoformat() if options.before else None,
        "include_domains": list(options.include_domains),
        "exclude_domains": list(options.exclude_domains),
        "language": options.language,
        "incognito": options.incognito,
        "timezone": options.timezone,
    }


def options_from_json(data) -> AskOptions:
    """An entry's saved options. They may have come from an imported file: a value that is not a
    valid choice becomes the default's, so "Ask again" never fails on them."""
    from datetime import date

    data = data if isinstance(data, dict) else {}
    default = AskOptions()

    def text(name: str, valid, fallback: str) -> str:
        value = data.get(name)
        ok = isinstance(value, str) and (
            value in valid if isinstance(valid, tuple) else valid.fullmatch(value)
        )
        return value if ok else fallback

    def day(name: str) -> date | None:
        try:
            return date.fromisoformat(data[name])
        except (KeyError, TypeError, ValueError):
            return None

    def names(name: str, valid: tuple | None = None) -> tuple[str, ...] | None:
        value = data.get(name) or []  # missing: none (as saved before there were checks)
        if not isinstance(value, list):
            return None
        return tuple(v for v in value if isinstance(v, str) and (valid is None or v in valid))

    sources = names("sources", SOURCES)
    after, before = day("after"), day("before")
    if after and before and after > before:
        after = before = None
    include = (names("include_domains") or ())[:MAX_DOMAINS]
    exclude = (names("exclude_domains") or ())[: MAX_DOMAINS - len(include)]
    return AskOptions(
        model=text("model", SLUG, default.model),
        mode=text("mode", MODES, default.mode),
        sources=default.sources if sources is None else sources,
        recency=text("recency", RECENCY, default.recency),
        after=after,
        before=before,
        include_domains=include,
        exclude_domains=exclude,
        language=text("language", LANGUAGE, default.language),
        incognito=data["incognito"] if isinstance(data.get("incognito"), bool) else default.incognito,
        timezone=text("timezone", TIMEZONE, default.timezone),
    )


@dataclass(frozen=True)
class Ask:
    """One search someone asked for: who, what, how, and in which conversation (None: a new one)."""

    user: object
    question: str
    options: AskOptions
    thread_id: int | None = None
    attachments: tuple = ()  # its files (search.models.Attachment), already on Perplexity


def start_search(
    user, question: str, options: AskOptions, thread_id: int | None = None, attachments: tuple = ()
) -> Entry:
    """Check the person's limits, then write the entry (status running) and commit it.

    The run itself starts after this returns (search.live.runner.launch): nothing is sent upstream
    before the entry exists, and no transaction is open while it runs. Raises SearchRefused
    (a limit) or Http404 (not their conversation).
    """
    started = start_searches([Ask(user, question, options, thread_id, tuple(attachments))])[0]
    if isinstance(started, Exception):
        raise started
    return started


def start_searches(asks: list[Ask]) -> list[Entry | SearchRefused | Http404]:
    """start_search for several asks at once, with the same outcome as one after another in the
    order given: in each ask's place its entry, or the SearchRefused or Http404 it would raise.
    (The sockets start one ask at a time, through start_search; several asks share the checks'
    statements.)
    """
    # One write transaction for the checks and the rows. The rate-limit buckets are read first:
    # their row locks (SQLite: the write lock of BEGIN IMMEDIATE) make two tabs starting at the
    # same moment count running searches one after the other; a refusal takes no token.
    users = {ask.user.pk: ask.user for ask in asks}
    with transaction.atomic():
        buckets = ratelimit.Held("search", [str(pk) for pk in users], PER_MINUTE, timedelta(minutes=1))
        running = dict(
            Entry.objects.filter(user__in=list(users), status=Entry.Status.RUNNING)
            .values_list("user")
            .annotate(n=Count("pk"))
        )
        # Followed-up threads are locked until the entries are in: a tab deleting the thread's
        # last entry at the same moment then sees the new one and keeps the thread (PostgreSQL;
        # SQLite's write lock already orders the two).
        wanted = {ask.thread_id for ask in asks if ask.thread_id}
        threads = (
            {t.pk: t for t in Thread.objects.select_for_update().filter(pk__in=wanted)} if wanted else {}
        )
        outcomes: list = []
        for ask in asks:
            outcome = _judge(ask, buckets, running.get(ask.user.pk, 0), threads)
            if not isinstance(outcome, Exception):
                buckets.take(str(ask.user.pk))
                running[ask.user.pk] = running.get(ask.user.pk, 0) + 1
            outcomes.append(outcome)
        buckets.save()
        return _write_entries(asks, outcomes)


def _judge(ask: Ask, buckets: ratelimit.Held, running: int, threads: dict) -> Thread | Exception | None:
    """The ask's conversation (None: a new one), or why it is refused."""
    verdict = buckets.verdict(str(ask.user.pk))
    if not verdict.allowed:
        return SearchRefused(f"That is {PER_MINUTE} searches this minute. Try again {verdict.wait_text}.")
    if running >= MAX_RUNNING:
        return SearchRefused(f"You have {running} searches running; wait for one to finish or stop it.")
    if not ask.thread_id:
        return None
    thread = threads.get(ask.thread_id)
    if thread is None or thread.user_id != ask.user.pk:
        return Http404("No Thread matches the given query.")
    return thread


def _write_entries(asks: list[Ask], outcomes: list) -> list[Entry | SearchRefused | Http404]:
    """The entries (and new threads) of the asks judged fine, written in two statements."""
    now = timezone.now()
    fresh = [
        (i, Thread(user=ask.user, title=ask.question[:300]))
        for i, (ask, outcome) in enumerate(zip(asks, outcomes, strict=True))
        if outcome is None
    ]
    Thread.objects.bulk_create([thread for _, thread in fresh])
    for i, thread in fresh:
        outcomes[i] = thread
    started = [
        (i, _new_entry(ask, outcome, now))
        for i, (ask, outcome) in enumerate(zip(asks, outcomes, strict=True))
        if isinstance(outcome, Thread)
    ]
    Entry.objects.bulk_create([entry for _, entry in started])
    for i, entry in started:
        attachments.link(entry, list(asks[i].attachments))
    # a follow-up moves its thread to the top (a new one was just created)
    followed = {asks[i].thread_id for i, _ in started if asks[i].thread_id}
    if followed:
        Thread.objects.filter(pk__in=followed).update(updated=timezone.now())
    for i, entry in started:
        outcomes[i] = entry
    return outcomes


def _new_entry(ask: Ask, thread: Thread, now) -> Entry:
    return Entry(
        thread=thread,
        user=ask.user,
        question=ask.question,
        options=options_as_json(ask.options),
        model_asked=ask.options.model,
        runner=RUNNER,
        heartbeat=now,
    )


def previous_turn(entry: Entry) -> Entry | None:
    """The latest earlier entry of the thread that Perplexity knows (for a follow-up)."""
    return (
        Entry.objects.filter(thread=entry.thread_id, created__lte=entry.created)
        .exclude(pk=entry.pk)
        .exclude(backend_uuid="")
        .order_by("-created", "-pk")
        .first()
    )


def build_request(entry: Entry, new_thread: bool = False) -> AskRequest:
    """The upstream request for a saved entry (a follow-up when the thread has earlier turns;
    `new_thread` says it has none, which saves looking), with the URLs of its files (the rows
    stay on the entry as `attachment_list`, for its run)."""
    options = options_from_json(entry.options)
    previous = None if new_thread else previous_turn(entry)
    follow_up = None
    if previous is not None:
        follow_up = FollowUp(previous.backend_uuid, entry.thread.read_write_token)
    files = getattr(entry, "attachment_list", None)  # set when the entry was just started
    if files is None:  # kept on the entry: its run marks the ones the answer cites (runner.launch)
        files = entry.attachment_list = list(entry.attachments.all())
    return AskRequest(
        entry.question, options, follow_up, attachments=tuple(a.remote_url for a in files if a.remote_url)
    )


def run_needs(user) -> tuple[dict, Credential]:
    """The model catalogue's models (for names) and the credential a run searches with."""
    return catalogue_models(), credentials_for(user)


def preloads(users: list, models: dict) -> dict[int, dict]:
    """What the runs of several people need from the database, by their pk, read by a caller
    already on the database thread (`launch(..., **preloads(...)[user.pk])`); a missing credential
    is left for the run to report."""
    chosen = credentials_for_many(users)
    return {
        pk: {"models": models, "credential": credential} if credential else {}
        for pk, credential in chosen.items()
    }
