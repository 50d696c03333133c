"""Ask again, Retry and Edit question: a turn answered again inside its conversation.

The new answer is a new version of the turn (search/versions.py): asked with the thread's
context, as a follow-up to the turn before (its shown version's backend_uuid; the first turn
starts a new Perplexity thread), with the turn's options, or the question and model the person
edited. The earlier answer stays as a version; switching versions shows another in place. The
turn's files go again, the same rows uploaded afresh (Perplexity's links to an upload expire).
One version of a turn arrives at a time: a second Ask again while one runs is refused with a
sentence, so a double click never asks twice.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from channels.db import database_sync_to_async
from django.db import IntegrityError
from django.http import Http404, QueryDict
from django.template.loader import render_to_string

from accounts.fields import UNREADABLE, DecryptionError
from accounts.services import NoCredential, catalogue
from search import attachments, versions
from search.attachments import upload as attachment_upload
from search.display import catalogue_models, entry_html, mark
from search.forms import SearchForm
from search.live import asking
from search.models import Entry, entry_for

log = logging.getLogger(__name__)
NOT_FOUND = "That answer was not found (deleted, perhaps); reload the page."
NOT_STARTED = "pplxweb could not ask this again (an error on the server, logged); nothing was asked."


class NotStarted(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def edit_form(entry: Entry, data: dict | None = None, **kwargs) -> SearchForm:
    """The question, model and mode of a redo, as its turn asked them (or as `data` changes them);
    ids of its own, as several answers' forms may be open at once."""
    options = asking.options_from_json(entry.options)
    initial = {"q": entry.question, "model": options.model, "mode": options.mode}
    form = SearchForm(data, initial=initial, auto_id=f"edit{entry.pk}-%s", **kwargs)
    form.fields["q"].widget.attrs = {"rows": 3, "data-max": form.fields["q"].widget.attrs["data-max"]}
    return form


def id_of(value) -> int:
    """A row id from a form or message, else NotStarted (not found)."""
    text = str(value)
    if not (text.isascii() and text.isdigit() and 0 < len(text) < 19):
        raise NotStarted(NOT_FOUND)
    return int(text)


def _checked(user, entry_id, data: QueryDict):
    """The answer to ask again, its question and options (edited or not), its files and what its
    run needs; NotStarted with the sentence otherwise."""
    try:
        entry = entry_for(user, id_of(entry_id))
    except Http404:
        raise NotStarted(NOT_FOUND) from None
    if entry.running:
        raise NotStarted(versions.StillRunning.message)
    current = catalogue()
    asked = {
        "q": data.get("q") or entry.question,
        "model": data.get("model") or "",
        "mode": data.get("mode") or "",
    }
    form = edit_form(entry, asked, catalogue=current)
    if not form.is_valid():
        raise NotStarted(" ".join(str(e) for errors in form.errors.values() for e in errors))
    saved = asking.options_from_json(entry.options)
    options = replace(
        saved,
        model=form.cleaned_data.get("model") or saved.model,
        mode=form.cleaned_data.get("mode") or saved.mode,
    )
    try:
        preloaded = asking.preload(user, catalogue_models(current))
    except DecryptionError:
        raise NotStarted(f"{UNREADABLE} Nothing was asked.") from None
    if not preloaded:
        raise NotStarted(NoCredential.message)
    return entry, form.cleaned_data["q"], options, versions.files(entry), preloaded


def _begin(user, entry: Entry, question: str, options, files: list, preloaded: dict):
    try:
        new = asking.start_search(user, question, options, entry.thread_id, redo=entry)
    except asking.SearchRefused as exc:
        raise NotStarted(exc.message) from None
    except (Http404, IntegrityError):  # gone meanwhile (deleted, its person removed): rolled back whole
        raise NotStarted(NOT_FOUND) from None
    new.attachment_list = files  # its turn's rows (their fresh links)
    new.place = versions.place_of(new)
    try:
        request = asking.build_request(new)
    except Exception:
        log.exception("entry %s: the upstream request of a redo could not be built", new.pk)
        Entry.objects.filter(pk=new.pk).update(status=Entry.Status.FAILED, error=NOT_STARTED)
        raise NotStarted(NOT_STARTED) from None
    return new, request, preloaded


async def start(user, entry_id, data: QueryDict) -> tuple[Entry, object, dict]:
    """(the new version, its upstream request, what runner.launch needs); NotStarted with the
    sentence when nothing was started."""
    entry, question, options, files, preloaded = await database_sync_to_async(_checked)(user, entry_id, data)
    if files:
        for attachment in files:
            attachment.remote_url = ""  # sent afresh: the rows keep the new links
        try:
            await attachment_upload.send_upstream(user, files)
        except attachments.Refused as exc:
            raise NotStarted(exc.message) from None
    return await database_sync_to_async(_begin)(user, entry, question, options, files, preloaded)


def show(user, entry_id, instead=None) -> Entry:
    """Make version `entry_id` the one its turn shows (and goes on from); `instead`: the version
    the page showed, which must be of the same turn. NotStarted while the turn is answering."""
    try:
        entry = entry_for(user, id_of(entry_id))
    except Http404:
        raise NotStarted(NOT_FOUND) from None
    turn = versions.of_turn(entry)
    if instead is not None and not turn.filter(pk=id_of(instead)).exists():
        raise NotStarted(NOT_FOUND)
    if turn.filter(status=Entry.Status.RUNNING).exists():
        raise NotStarted("This answer is still arriving; its versions can be switched once it ends.")
    versions.show(entry)
    versions.place_of(entry)
    return entry


def in_place(entry: Entry, instead: int, kind: str) -> str:
    """`entry` drawn where the page shows version `instead` of its turn, and named as the version
    the page's follow-ups go on from. `kind`: "full" for a new version whose run follows (the page
    then follows it), "saved" for one from the database."""
    html = entry_html(entry).replace(
        f'<article class="entry" id="entry-{entry.pk}"',
        f'<article class="entry" id="entry-{entry.pk}" hx-swap-oob="outerHTML:#entry-{instead}"',
        1,
    )
    field = render_to_string("search/version_field.html", {"pk": entry.pk, "oob": True})
    follow = f'<div id="search-accepted" hidden hx-swap-oob="true" data-entry="{entry.pk}"></div>'
    return mark(entry.pk, 0, kind) + html + field + (follow if kind == "full" else "")


def refusal(entry_id, message: str, edited: bool = False) -> str:
    """A redo's sentence under the button that asked it (its answer's actions, or the edit form
    when `edited`), or under the box when that answer was not found."""
    try:
        slot = (
            "search-error"
            if message == NOT_FOUND
            else f"entry-{id_of(entry_id)}-{'editnote' if edited else 'redo'}"
        )
    except NotStarted:
        slot = "search-error"
    return render_to_string("search/redo_refused.html", {"slot": slot, "message": message})
