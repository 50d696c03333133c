"""A follow-up asked in a new Perplexity thread when its own is gone there (search/live/upstream.py):
the question with the conversation's last few turns before it, each question and the start of its
answer, within the question limit (MAX_QUESTION; docs/protocol.md §12.4)."""

from __future__ import annotations

import re

from search import versions
from search.forms import MAX_QUESTION
from search.models import Entry

TURNS = 4  # the latest earlier turns carried
QUESTION_START, ANSWER_START = 400, 900  # characters of each, at most
CITATION = re.compile(r"\[\d{1,3}\]")
HEAD = "Earlier in this conversation:"
NOW = "Now, going on from that: {question}"


def _start(text: str, limit: int) -> str:
    """`text` on one line without citation marks, cut at a word before `limit` characters."""
    text = " ".join(CITATION.sub("", text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2 :] else cut) + "…"


def question_for(entry_id: int, question: str) -> str:
    """The question to ask in a new thread: `question` after the turns before entry `entry_id`'s
    (the shown versions), the oldest dropped first when they do not fit; the question alone
    when none does."""
    entry = Entry.objects.filter(pk=entry_id).only("pk", "turn", "thread_id").first()
    if entry is None:
        return question
    turns = versions.earlier(entry, ("question", "answer", "report"))[-TURNS:]
    told = [
        f"Q: {_start(e.question, QUESTION_START)}\nA: {_start(e.report or e.answer, ANSWER_START)}"
        for e in turns
        if (e.answer or e.report).strip()
    ]
    tail = NOW.format(question=question)
    while told:
        text = "\n\n".join([HEAD, *told, tail])
        if len(text) <= MAX_QUESTION:
            return text
        told.pop(0)
    return question
