"""Which of the person's conversations a request continues.

A client names it (`metadata.conversation_id`, as every reply gives it), or sends the whole
conversation as messages, as most chat clients do: the earlier messages must then be exactly the
questions and answers of one of the person's own conversations (whitespace aside). Anyone else's
conversation, or one the messages do not match turn for turn, is never continued: the request
starts a new conversation.
"""

from __future__ import annotations

from search import versions
from search.display import with_footnotes
from search.models import Entry, Thread

CANDIDATES = 20  # conversations starting with the same first question that are compared whole
SPACED = 500  # questions starting with the same word looked at when none is exactly the first


def squashed(text: str) -> str:
    return "".join(str(text).split())


def reply_text(entry: Entry) -> str:
    """What an agent is given as the answer: a research run's report, else the answer, in
    Markdown with citations as footnotes and the sources listed under it (as Copy gives it)."""
    return with_footnotes(entry.report or entry.answer, entry.sources)


def shown(thread_id: int) -> list[Entry]:
    """A conversation's turns as its page shows them: each turn's shown version (search/versions.py)."""
    every = Entry.objects.filter(thread_id=thread_id).order_by("created", "pk")
    return [versions.shown_of(turn) for turn in versions.turns(every)]


def named(user, conversation_id) -> int | None:
    """The person's own conversation `conversation_id` names, else None."""
    text = str(conversation_id).strip()
    if not (text.isascii() and text.isdigit() and len(text) < 19):
        return None
    return Thread.objects.filter(pk=int(text), user=user).values_list("pk", flat=True).first()


def matching(user, earlier: list[tuple[str, str]]) -> int | None:
    """The person's conversation whose turns are exactly `earlier` ([(role, text)], "user" and
    "assistant" alternating from a question), else None."""
    pairs = _pairs(earlier)
    if not pairs:
        return None
    first = pairs[0][0].strip()
    if not first or not storable(first):  # no saved question is that (search/forms.py cleans each)
        return None
    mine = Entry.objects.filter(user=user).order_by("-pk")
    threads = list(mine.filter(question=first).values_list("thread_id", flat=True)[:CANDIDATES])
    if not threads:  # the same question with its spaces changed inside: its newest namesakes
        rows = mine.filter(question__startswith=first.split()[0]).values_list("thread_id", "question")
        threads = [t for t, q in rows[:SPACED] if squashed(q) == squashed(first)][:CANDIDATES]
    for thread_id in dict.fromkeys(threads):
        entries = shown(thread_id)
        if len(entries) == len(pairs) and all(_same(pair, e) for pair, e in zip(pairs, entries, strict=True)):
            return thread_id
    return None


def storable(text: str) -> bool:
    """Text a database can be asked about: no NUL (PostgreSQL refuses it), no lone surrogate
    (UTF-8 cannot carry one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _pairs(earlier: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
    turns = [(role, text) for role, text in earlier if role not in ("system", "developer")]
    if not turns or len(turns) % 2:
        return None
    pairs = []
    for (role_q, question), (role_a, answer) in zip(turns[::2], turns[1::2], strict=True):
        if role_q != "user" or role_a != "assistant":
            return None
        pairs.append((question, answer))
    return pairs


def _same(pair: tuple[str, str], entry: Entry) -> bool:
    question, answer = squashed(pair[0]), squashed(pair[1])
    if question != squashed(entry.question):
        return False
    return answer in {squashed(reply_text(entry)), squashed(entry.answer), squashed(entry.report)} - {""}
