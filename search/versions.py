"""Versions of a turn: Ask again, Retry and Edit question answer a turn again inside its
conversation (search/live/redo.py), and the earlier answer stays as a version.

Every version is an Entry of its own (its question, answer, sources, images, run), so history
search, exports and imports see each one as they see any answer. The versions of a turn share
`Entry.turn`, the id of the turn's first answer (None while a turn has one answer), and one of
them is `shown`: the conversation shows it, and a follow-up or a redo of the next turn goes on
from it. Turns keep the place of their first answer: a conversation is its entries in the order
they were asked, each turn where its earliest version is. A redo has no files of its own: it
uses its turn's (the Attachment rows stay on the version they were asked with; a version
deleted hands them to another).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction

from search.models import Attachment, Entry

MAX_VERSIONS = 50  # of one turn; more is refused with a sentence


@dataclass(frozen=True)
class Place:
    """Where a version stands among its turn's: the `n`th of `of`, and its neighbours' ids."""

    n: int = 1
    of: int = 1
    previous: int | None = None
    next: int | None = None


ONLY = Place()


def label(place: Place | None, shown: bool) -> str:
    """ "version 2 of 3" for an answer of a turn asked more than once ("" for the only one), and
    whether its conversation shows another."""
    if place is None or place.of < 2:
        return ""
    return f"version {place.n} of {place.of}{'' if shown else ', not the one shown'}"


def key(entry: Entry) -> int:
    """The turn an entry answers (its own id while it is the only answer)."""
    return entry.turn or entry.pk


def turns(entries: Iterable[Entry]) -> list[list[Entry]]:
    """Entries in the order they were asked, grouped by turn: the turns in the order of their
    first versions, each turn's versions in the order they were asked."""
    grouped: dict[int, list[Entry]] = {}
    for entry in entries:
        grouped.setdefault(key(entry), []).append(entry)
    return list(grouped.values())


def shown_of(versions: list[Entry]) -> Entry:
    """The version a turn shows (its latest when none says so, as after a partial import)."""
    return next((v for v in reversed(versions) if v.shown), versions[-1])


def place_in(versions: list[Entry], entry: Entry) -> Place:
    ids = [v.pk for v in versions]
    if entry.pk not in ids or len(ids) == 1:
        return ONLY
    i = ids.index(entry.pk)
    return Place(i + 1, len(ids), ids[i - 1] if i else None, ids[i + 1] if i + 1 < len(ids) else None)


def layout(entries: Iterable[Entry], showing: int | None = None) -> list[Entry]:
    """A conversation as its page draws it: each turn's shown version (or the version `showing`
    names, for this view only), with its `place` and its turn's files (`attachment_list`, from
    prefetched attachments)."""
    out = []
    for versions in turns(entries):
        entry = next((v for v in versions if v.pk == showing), None) or shown_of(versions)
        entry.place = place_in(versions, entry)
        if len(versions) > 1:
            entry.attachment_list = [a for v in versions for a in v.attachments.all()]
        out.append(entry)
    return out


def every(entries: Iterable[Entry]) -> list[Entry]:
    """Every version, turn by turn (as exports write them), each with its `place`."""
    out = []
    for versions in turns(entries):
        for entry in versions:
            entry.place = place_in(versions, entry)
            out.append(entry)
    return out


def of_turn(entry: Entry):
    """The entries of `entry`'s turn (a queryset, in the order they were asked)."""
    if entry.turn is None:
        return Entry.objects.filter(pk=entry.pk)
    return Entry.objects.filter(turn=entry.turn)


def place_of(entry: Entry) -> Place:
    """`entry.place`, read once (no query for a turn with one answer)."""
    place = getattr(entry, "place", None)
    if place is None:
        place = entry.place = ONLY if entry.turn is None else place_in(list(of_turn(entry).only("pk")), entry)
    return place


def files(entry: Entry) -> list[Attachment]:
    """The files of `entry`'s turn: a redo asks about the same rows, never copies."""
    if entry.turn is None:
        return list(entry.attachments.all()) if entry.pk else []
    return list(Attachment.objects.filter(entry__turn=entry.turn))


def places(entries: list[Entry]) -> dict[int, Place]:
    """The places of these entries (a page of history rows) in one query: only redone turns
    have one."""
    keys = {e.turn for e in entries if e.turn is not None}
    if not keys:
        return {}
    grouped: dict[int, list[Entry]] = {}
    for row in Entry.objects.filter(turn__in=keys).order_by("created", "pk").only("pk", "turn"):
        grouped.setdefault(row.turn, []).append(row)
    return {e.pk: place_in(grouped.get(e.turn, []), e) for e in entries if e.turn is not None}


def earlier(entry: Entry, fields: tuple[str, ...] = ()) -> list[Entry]:
    """The shown versions of the turns before `entry`'s, in order (`fields`: only these are
    read, besides what grouping needs)."""
    rows = Entry.objects.filter(thread=entry.thread_id)
    if fields:
        rows = rows.only("pk", "turn", "shown", "created", *fields)
    mine, out = key(entry), []
    for versions in turns(rows):
        if key(versions[0]) == mine:
            break
        out.append(shown_of(versions))
    return out


def previous_turn(entry: Entry) -> Entry | None:
    """The answer a follow-up (or a redo) of `entry` goes on from: the shown version of the latest
    earlier turn that Perplexity knows."""
    fields = ("backend_uuid", "context_uuid", "read_write_token", "upstream_expires")
    return next((e for e in reversed(earlier(entry, fields)) if e.backend_uuid), None)


# --- changes, in the caller's transaction where there is one -------------------------------------


class TooMany(Exception):
    message = f"This answer has {MAX_VERSIONS} versions already; ask it as a new question to go on."


class StillRunning(Exception):
    message = "This answer is still arriving: stop it or wait for it to end before asking it again."


def begin(entry: Entry) -> int:
    """The turn a new version of `entry` joins (StillRunning, TooMany: refused). Its first
    answer learns its turn now."""
    versions = of_turn(entry)
    if versions.filter(status=Entry.Status.RUNNING).exists():
        raise StillRunning
    if versions.count() >= MAX_VERSIONS:
        raise TooMany
    if entry.turn is None:
        Entry.objects.filter(pk=entry.pk).update(turn=entry.pk)
        entry.turn = entry.pk
    return entry.turn


def show(entry: Entry) -> None:
    """Make `entry` the version its turn shows and goes on from."""
    if entry.turn is not None:
        with transaction.atomic():
            Entry.objects.filter(turn=entry.turn).exclude(pk=entry.pk).update(shown=False)
            Entry.objects.filter(pk=entry.pk).update(shown=True)
    entry.shown = True


def go_on_from(thread_id: int, pk: int | None) -> None:
    """A follow-up asked from a page that shows version `pk` of the conversation's last turn goes
    on from it (another tab may have shown another version since). Anything else is ignored."""
    if not pk:
        return
    chosen = Entry.objects.filter(pk=pk, thread=thread_id, shown=False).exclude(turn=None).first()
    if chosen is None:
        return
    last = turns(Entry.objects.filter(thread=thread_id).only("pk", "turn", "shown", "created"))[-1]
    if key(last[0]) == chosen.turn:
        show(chosen)


def before_delete(entries) -> None:
    """Before these entries (a queryset) are deleted: a turn that keeps other versions gets the
    files the deleted ones held, and shows another version if its shown one goes."""
    leaving = entries.values("pk")
    staying = Entry.objects.filter(turn__in=entries.exclude(turn=None).values("turn")).exclude(pk__in=leaving)
    survivors: dict[int, list[Entry]] = {}
    for row in staying.order_by("created", "pk").only("pk", "turn", "shown"):
        survivors.setdefault(row.turn, []).append(row)
    for turn, rows in survivors.items():
        Attachment.objects.filter(entry__turn=turn, entry__in=leaving).update(entry=rows[0])
        if not any(row.shown for row in rows):
            Entry.objects.filter(pk=rows[-1].pk).update(shown=True)


def from_file(entries: list[Entry], items: list[dict]) -> None:
    """The versions of each turn as the file groups them (entries of one conversation with the
    same `turn` number): one turn key each, one version shown (the last the
    file says is shown, else the latest). A file without turns has one answer a turn."""
    turns: dict[tuple[int, int], list[tuple[Entry, dict]]] = {}
    for entry, item in zip(entries, items, strict=True):
        number = item.get("turn")
        if isinstance(number, int) and not isinstance(number, bool):
            turns.setdefault((entry.thread_id, number), []).append((entry, item))
    for group in turns.values():
        if len(group) < 2:
            continue
        shown = [entry for entry, item in group if item.get("shown") is True] or [group[-1][0]]
        for entry, _ in group:
            entry.turn, entry.shown = group[0][0].pk, entry is shown[-1]
