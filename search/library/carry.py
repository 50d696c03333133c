"""A follow-up Perplexity refused (the thread was deleted or has expired there) asked again as a
new conversation: the earlier question and answer summarised into the new question."""

from __future__ import annotations

import re

from search.forms import MAX_QUESTION
from search.live.asking import previous_turn
from search.models import Entry

CITATION = re.compile(r"\[\d+\]")
HEAD = "Earlier in this conversation I asked:\n{question}\n\nThe answer was:\n{answer}\n\nNow: {follow_up}"


def question_with_context(entry: Entry) -> str:
    """The refused follow-up with the turn before it, under the question limit: the earlier
    answer is shortened first, then the earlier question."""
    earlier = previous_turn(entry)
    if earlier is None:
        return entry.question[:MAX_QUESTION]
    answer = " ".join(CITATION.sub("", earlier.answer).split())
    question = " ".join(earlier.question.split())
    parts = {"question": question, "answer": answer, "follow_up": entry.question}
    room = MAX_QUESTION - len(HEAD.format(question="", answer="", follow_up=entry.question))
    if room <= 0:
        return entry.question[:MAX_QUESTION]
    if len(question) > room // 4:
        parts["question"] = question[: room // 4 - 1] + "…"
    room -= len(parts["question"])
    if len(answer) > room:
        parts["answer"] = answer[: max(room - 1, 0)] + "…"
    return HEAD.format(**parts)
