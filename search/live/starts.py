"""A search start from a socket or an agent (search/api): the question checked with the same form
as the HTTP path, the person's credential and defaults read, the entry written
(search.live.asking.start_search). Each caller prepares its own start on the database thread; a
failure refuses that ask alone, with a sentence, and starts nothing."""

from __future__ import annotations

import logging

from django.db import IntegrityError
from django.http import Http404, QueryDict

from accounts.fields import UNREADABLE, DecryptionError
from accounts.services import NoCredential, catalogue
from search.attachments import Refused
from search.attachments import views as attachment_views
from search.display import catalogue_models
from search.forms import SearchForm
from search.live import asking
from search.models import Entry

log = logging.getLogger(__name__)
NOT_STARTED = "pplxweb could not start this search (an error on the server, logged); nothing was started."
REMOVED = "Your pplxweb account was removed, so nothing was started."


class NotStarted(Exception):
    """Nothing was started: `message` says why; `kind` is "invalid", "limit", "busy",
    "credential", "not_found", "removed" or "server"; `retry_after` in seconds for a limit."""

    def __init__(self, message: str, kind: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message, self.kind, self.retry_after = message, kind, retry_after


def prepare(user, data: QueryDict, exclusive: bool = False):
    """A sentence saying why nothing was started, or (entry, upstream request, what launch()
    needs preloaded). Runs on the database thread."""
    try:
        return start(user, data, exclusive=exclusive)
    except NotStarted as exc:
        return exc.message


def start(user, data: QueryDict, asked_by: str = "", exclusive: bool = False):
    """prepare(), raising NotStarted instead of returning its sentence (`asked_by`, `exclusive`:
    see asking.start_search)."""
    try:
        return _prepare(user, data, asked_by, exclusive)
    except NotStarted:
        raise
    except Exception:
        log.exception("search by user %s not started", getattr(user, "pk", None))
        raise NotStarted(NOT_STARTED, "server") from None


def _prepare(user, data: QueryDict, asked_by: str, exclusive: bool):
    current = catalogue()  # for the form's model choices and the run's model names
    form = SearchForm(data, catalogue=current)
    if not form.is_valid():
        raise NotStarted(" ".join(str(e) for errors in form.errors.values() for e in errors), "invalid")
    try:  # someone whose stored sign-in does not open starts nothing (no row)
        preloaded = asking.preload(user, catalogue_models(current))
    except DecryptionError as exc:
        log.error("search by user %s not started: %s", user.pk, exc)
        raise NotStarted(f"{UNREADABLE} Nothing was started.", "server") from None
    try:
        entry = _start(user, data, form, preloaded, asked_by, exclusive)
    except IntegrityError:
        # Someone was removed, or a thread deleted, between the checks and the commit: the
        # transaction rolled back whole (no row, no token), and this time the checks see it.
        entry = _start(user, data, form, preloaded, asked_by, exclusive)
    return _launchable(entry, form, preloaded)


def _start(user, data: QueryDict, form: SearchForm, preloaded: dict | None, asked_by: str, exclusive: bool):
    """The entry written, or NotStarted: removed from the household (their open socket stays: no
    row may be written), no credential at all, files not ready, a limit, not their thread."""
    defaults = asking.defaults_of_member(user)
    if defaults is None:
        raise NotStarted(REMOVED, "removed")
    if not preloaded:
        raise NotStarted(NoCredential.message, "credential")
    try:
        files = attachment_views.ready(user, data)
    except Refused as exc:
        raise NotStarted(f"{exc.message} Nothing was asked.", "invalid") from None
    try:
        return asking.start_search(
            user,
            form.cleaned_data["q"],
            form.options(defaults),
            form.cleaned_data.get("thread"),
            tuple(files),
            asked_by=asked_by,
            exclusive=exclusive,
            version=form.cleaned_data.get("version"),
        )
    except asking.ConversationBusy as exc:
        raise NotStarted(exc.message, "busy", exc.retry_after) from None
    except asking.SearchRefused as exc:
        raise NotStarted(exc.message, "limit", exc.retry_after) from None
    except Http404:
        raise NotStarted("That conversation was not found.", "not_found") from None


def _launchable(entry, form: SearchForm, preloaded: dict):
    """(entry, upstream request, preloaded); if the request cannot be built, the entry (already
    committed) is saved failed with a sentence, never left running without a run."""
    try:
        request = asking.build_request(entry, new_thread=not form.cleaned_data.get("thread"))
    except Exception:
        log.exception("entry %s: the upstream request could not be built", entry.pk)
        Entry.objects.filter(pk=entry.pk).update(status=Entry.Status.FAILED, error=NOT_STARTED)
        raise NotStarted(NOT_STARTED, "server") from None
    return (entry, request, preloaded)
