"""Asking and remembering: the use-cases behind the search page, the socket and the commands."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from accounts import ratelimit
from accounts.models import SearchDefaults
from accounts.services import Credential, credentials_for, credentials_for_many
from pplxweb.perplexity.request import MAX_DOMAINS, MODES, RECENCY, SOURCES, AskOptions, AskRequest, FollowUp
from search import attachments as attachments_module
from search import versions
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
    """The search was not started; `message` says why, `retry_after` (seconds) when a limit did."""

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class ConversationBusy(SearchRefused):
    """A follow-up asked while the conversation is still answering (asked with `exclusive`)."""

    def __init__(self) -> None:
        super().__init__(
            "This conversation is still answering another question; ask again when it ends, "
            "or start a new conversation.",
            retry_after=5,
        )


def defaults_for(user) -> SearchDefaults:
    defaults, _ = SearchDefaults.objects.get_or_create(user=user)
    return defaults


def defaults_of_member(user) -> SearchDefaults | None:
    """defaults_for, or None for someone who no longer exists (removed while their socket stayed
    open: their defaults went with them)."""
    defaults = SearchDefaults.objects.filter(user=user.pk).first()
    if defaults is None and get_user_model().objects.filter(pk=user.pk).exists():
        defaults = defaults_for(user)  # a first search
    return defaults


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


def start_search(
    user,
    question: str,
    options: AskOptions,
    thread_id: int | None = None,
    attachments: tuple = (),
    asked_by: str = "",
    exclusive: bool = False,
    redo: Entry | None = None,
    version: int | None = None,
) -> Entry:
    """Check the person's limits, then write the entry (status running) and commit it.

    The run itself starts after this returns (search.live.runner.launch): nothing is sent upstream
    before the entry exists, and no transaction is open while it runs. Raises SearchRefused
    (a limit; ConversationBusy when `exclusive` and the conversation is answering already) or
    Http404 (not their conversation). `asked_by`: the agent token's name (search/api). `redo`: the
    entry is a new version of that one's turn (search/versions.py; its thread is `thread_id`);
    `version`: the version of the last turn the asking page shows, which a follow-up goes on from.
    """
    # One write transaction for the checks and the rows. The rate-limit bucket is read first:
    # its row lock (SQLite: the write lock of BEGIN IMMEDIATE) makes two tabs starting at the
    # same moment count running searches one after the other; a refusal takes no token.
    with transaction.atomic():
        bucket = ratelimit.Held("search", [str(user.pk)], PER_MINUTE, timedelta(minutes=1))
        verdict = bucket.verdict(str(user.pk))
        if not verdict.allowed:
            raise SearchRefused(
                f"That is {PER_MINUTE} searches this minute. Try again {verdict.wait_text}.",
                retry_after=verdict.retry_after,
            )
        running = Entry.objects.filter(user=user, status=Entry.Status.RUNNING).count()
        if running >= MAX_RUNNING:
            raise SearchRefused(
                f"You have {running} searches running; wait for one to finish or stop it.", retry_after=5
            )
        thread = _conversation(user, question, thread_id)
        if exclusive and thread_id and thread.entries.filter(status=Entry.Status.RUNNING).exists():
            raise ConversationBusy()
        turn = _turn(thread, redo) if redo is not None else None
        if thread_id and redo is None:
            versions.go_on_from(thread.pk, version)
        bucket.take(str(user.pk))
        bucket.save()
        entry = Entry.objects.create(
            thread=thread,
            user=user,
            question=question,
            options=options_as_json(options),
            model_asked=options.model,
            asked_by=asked_by,
            runner=RUNNER,
            heartbeat=timezone.now(),
            turn=turn,
        )
        if turn is not None:
            versions.show(entry)
        attachments_module.link(entry, list(attachments))
        if thread_id:  # a follow-up moves its thread to the top
            Thread.objects.filter(pk=thread_id).update(updated=timezone.now())
        return entry


def _conversation(user, question: str, thread_id: int | None) -> Thread:
    """The person's thread to follow up, locked until the entry is in (a tab deleting its last
    entry at the same moment then sees the new one and keeps the thread; PostgreSQL, as SQLite's
    write lock already orders the two), or a new one. Http404 when it is not theirs."""
    if not thread_id:
        return Thread.objects.create(user=user, title=question[:300])
    thread = Thread.objects.select_for_update().filter(pk=thread_id, user=user).first()
    if thread is None:
        raise Http404("No Thread matches the given query.")
    return thread


def _turn(thread: Thread, redo: Entry) -> int:
    """The turn a redo joins, read again under the thread's lock (a redo of an answer deleted or
    still arriving meanwhile is refused)."""
    entry = Entry.objects.filter(pk=redo.pk, thread=thread).first()
    if entry is None:
        raise Http404("No Entry matches the given query.")
    try:
        return versions.begin(entry)
    except (versions.StillRunning, versions.TooMany) as exc:
        raise SearchRefused(exc.message) from None


def build_request(entry: Entry, new_thread: bool = False) -> AskRequest:
    """The upstream request for a saved entry (a follow-up when the thread has earlier turns;
    `new_thread` says it has none, which saves looking), with the URLs of its files (the rows
    stay on the entry as `attachment_list`, for its run)."""
    options = options_from_json(entry.options)
    previous = None if new_thread else versions.previous_turn(entry)
    follow_up = None
    if previous is not None:  # its own thread's token (a conversation can span several there)
        token = previous.read_write_token or entry.thread.read_write_token
        follow_up = FollowUp(previous.backend_uuid, token, previous.context_uuid, previous.upstream_expires)
    files = getattr(entry, "attachment_list", None)  # set when the entry was just started
    if files is None:  # kept on the entry: its run marks the ones the answer cites (runner.launch)
        files = entry.attachment_list = versions.files(entry)  # a redo's are its turn's
    return AskRequest(
        entry.question, options, follow_up, attachments=tuple(a.remote_url for a in files if a.remote_url)
    )


def run_needs(user) -> tuple[dict, Credential]:
    """The model catalogue's models (for names) and the credential a run searches with."""
    return catalogue_models(), credentials_for(user)


def preload(user, models: dict) -> dict:
    """What a run needs from the database, read by a caller already on the database thread
    (`launch(..., **preload(...))`); empty without a credential (the start refuses then)."""
    credential = credentials_for_many([user])[user.pk]
    return {"models": models, "credential": credential} if credential else {}
