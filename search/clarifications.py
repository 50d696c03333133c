"""A research run's clarifying questions as they are kept with its entry (Entry.clarifications),
shown under the question, written by the exports and read back by an import.

A record is one step of questions (docs/protocol.md §8.4): `{"key", "title", "questions":
[{"question", "options", "answer"}], "outcome"}`, the outcome one of OUTCOMES. The live run keeps
them as it goes (search/live/questions.py).
"""

from __future__ import annotations

from typing import Any

OUTCOMES = {
    "answered": "answered",
    "skipped": "skipped",
    "auto": "no answer: the research went on by itself",
    "not_sent": "the answers could not be sent: the research went on by itself",
    "unanswered": "not answered before the research ended",
    "waiting": "waiting for an answer",
}
MAX_RECORDS = 5  # steps of questions kept for one answer (a real run asks one)
MAX_QUESTIONS = 10
MAX_OPTIONS = 10
MAX_TEXT = 2000  # characters of a question or an answer
MAX_OPTION = 300


def record(question, answers: tuple[str, ...] = (), outcome: str = "") -> dict:
    """A record of a clarifying step (pplxweb.perplexity.research.Question) and the answers it
    carries: answered when it carries any, else `outcome` ("waiting" while the run may still be
    waiting on it; search/live/questions.py turns that into what became of it)."""
    given = [*answers, *[""] * len(question.asks)]
    return {
        "key": question.key,
        "title": question.title,
        "questions": [
            {"question": ask.text, "options": list(ask.options), "answer": given[i]}
            for i, ask in enumerate(question.asks)
        ],
        "outcome": "answered" if any(answers) else outcome or "auto",
    }


def _text(value: Any, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def _question(item: Any) -> dict | None:
    if not isinstance(item, dict) or not (question := _text(item.get("question"), MAX_TEXT)):
        return None
    options = item.get("options") if isinstance(item.get("options"), list) else []
    return {
        "question": question,
        "options": [o for o in (_text(v, MAX_OPTION) for v in options[:MAX_OPTIONS]) if o],
        "answer": _text(item.get("answer"), MAX_TEXT),
    }


def shaped(value: Any) -> list[dict]:
    """Records as pplxweb keeps them, from anything (an imported file): strings only, bounded,
    an unknown outcome read as "went on by itself"."""
    records = []
    for item in value[:MAX_RECORDS] if isinstance(value, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("questions"), list):
            continue
        questions = [q for q in map(_question, item["questions"][:MAX_QUESTIONS]) if q]
        if questions:
            outcome = item.get("outcome")
            records.append(
                {
                    "key": _text(item.get("key"), 200),
                    "title": _text(item.get("title"), MAX_OPTION),
                    "questions": questions,
                    "outcome": outcome if outcome in OUTCOMES and outcome != "waiting" else "auto",
                }
            )
    return records


def shown(records: list[dict]) -> list[dict]:
    """The records the page shows folded under the question (not one still waiting: its form
    is shown instead), each with its outcome in words."""
    return [
        {**r, "said": OUTCOMES.get(r.get("outcome"), OUTCOMES["auto"])}
        for r in records
        if isinstance(r, dict) and r.get("outcome") != "waiting" and r.get("questions")
    ]


def markdown_lines(records: list[dict]) -> list[str]:
    """The records as the Markdown export writes them, under the question."""
    lines: list[str] = []
    for record in shown(records):
        title = f": {record['title']}" if record.get("title") else ""
        lines += [f"**Perplexity asked before researching{title}** ({record['said']})", ""]
        for item in record["questions"]:
            answer = f" — {' '.join(item['answer'].split())}" if item.get("answer") else ""
            lines.append(f"- {' '.join(item['question'].split())}{answer}")
        lines.append("")
    return lines
