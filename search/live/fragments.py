"""The HTML pieces a running answer sends over the websocket.

Each fragment is rendered from a template and replaces (or appends to) an element by id with
`hx-swap-oob`. The answer is sent so each byte of a finished block travels once:

- blocks of the answer that are complete (every top-level block but the last) are rendered
  once and appended to `entry-N-blocks`;
- the growing last block (the tail) is rendered as markdown and replaces `entry-N-tail` each
  time it grows, less what would show as raw markdown until more arrives (`settled`: a table's
  unfinished row, a link's `[label`, an unclosed `**`); a block over BIG_TAIL characters (one
  huge table) is re-rendered at most once a second, one over LONG_TAIL four times a second;
- if upstream rewrites text already sent, the whole answer is sent again.

Each update to the group carries a sequence number (`mark`), so a page that missed one (a
message lost on its way) knows and asks for the whole state, which a newcomer gets too
(`full_state`: the group's view, not the newest text, so the next update applies to it).

The other parts of a running entry (status, steps, sources, related questions, meta, images) are
re-rendered whole, each only when what it shows changed (`changed_parts`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.template.loader import render_to_string
from markdown_it import MarkdownIt

from pplxweb.perplexity.extract import Result
from pplxweb.perplexity.sources import file_hits
from search import attachments
from search.display import model_label, report_context
from search.models import Entry
from search.render import render_answer, render_sources, scrub

# The tail is re-rendered whole, so a long one is re-sent less often: at each update up to
# LONG_TAIL characters, then at most every TAIL_EVERY seconds, and every TAIL_RENDER_EVERY over BIG_TAIL.
LONG_TAIL, TAIL_EVERY = 300, 0.25
BIG_TAIL, TAIL_RENDER_EVERY = 4096, 1.0
OPEN_LINK = re.compile(r"!?\[[^\]\n]*(\](\([^)\n]*)?)?$")  # "[King A", "[King](https://ex"
CITED = re.compile(r"\[\d{1,3}\]$")
DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
REPORT_RENDER_EVERY = 2.0  # seconds between re-renders of a growing research report
STEPS_SHOWN = 30  # the latest steps a running answer shows


@cache
def _block_parser() -> MarkdownIt:
    """The answer's markdown dialect, block rules only: where blocks start needs no inline pass
    (linkify's scan of the text alone was most of the per-update parse)."""
    md = MarkdownIt("js-default")
    md.disable(["reference"])
    md.enable(["table"])
    md.core.ruler.enableOnly(["normalize", "block"])
    return md


def _block_starts(text: str) -> list[int]:
    """Character offsets where each top-level markdown block of `text` starts."""
    tokens = _block_parser().parse(text, {})
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    return [line_starts[t.map[0]] for t in tokens if t.level == 0 and t.nesting >= 0 and t.map]


@dataclass
class AnswerStream:
    """What of the answer the browser already has, and the fragments to bring it up to date."""

    entry_id: int
    committed: str = ""  # the markdown sent as rendered blocks
    tail_sent: str = ""  # markdown after `committed` already in the browser's tail
    tail_shown: str = ""  # what the browser shows of it (unclosed `**` closed)
    tail_rendered_at: float = 0.0
    sources_key: tuple = ()
    blocks_sources_key: tuple = ()
    html_sent: list[str] = field(default_factory=list)
    resync: bool = False  # the browser shows text this stream did not send: send it all next

    def update(self, text: str, sources: list[Any], final: bool = False) -> list[str]:
        """Fragments for the answer now being `text` (empty when nothing changed)."""
        text = scrub(text)
        if self.resync:
            self.resync = False
            return [self.full(text, sources)]
        # A rewrite of anything sent (Perplexity's diffs can replace earlier text) re-sends it all.
        if not self._extends(text) or (final and self.blocks_sources_key != self._key(sources)):
            return [self.full(text, sources)]
        fragments = []
        tail = text[len(self.committed) :]
        starts = _block_starts(tail) if tail else []
        if final:
            starts = [*starts, len(tail)]  # every block is complete at the end
        reset = False
        if len(starts) > 1:
            done = tail[: starts[-1]]
            fragments.append(self._blocks(done, sources))
            self.committed += done
            tail = tail[starts[-1] :]
            self.tail_sent, self.tail_shown, reset = "", "", True
        if final:
            return [*fragments, self._tail("")] if reset or self.tail_shown else fragments
        shown = settled(tail)
        now = time.monotonic()
        wait = TAIL_RENDER_EVERY if len(tail) > BIG_TAIL else TAIL_EVERY if len(tail) > LONG_TAIL else 0.0
        if (shown != self.tail_shown or reset) and (reset or now - self.tail_rendered_at >= wait):
            fragments.append(self._tail(render_answer(shown, sources, cards=False) if shown else ""))
            # what the browser has of the text: the settled part, less the markers it closed
            self.tail_sent = tail[: len(shown.rstrip("*`"))] if shown else ""
            self.tail_shown, self.tail_rendered_at = shown, now
        return fragments

    def shows(self, text: str) -> bool:
        """Whether the browser already has all of `text` (as sent so far, rendered or not)."""
        text = scrub(text)
        return len(text) == len(self.committed) + len(self.tail_sent) and self._extends(text)

    def _extends(self, text: str) -> bool:
        """Whether `text` begins with all the browser has (a memory compare, cheaper than any
        fragment's rendering)."""
        return text.startswith(self.committed) and text.startswith(self.tail_sent, len(self.committed))

    def full(self, text: str, sources: list[Any]) -> str:
        """The whole answer as rendered markdown: after a rewrite, a rejoin, or the end."""
        self.committed, self.tail_sent, self.tail_shown = text, "", ""
        self.blocks_sources_key = self._key(sources)
        return self._answer(render_answer(text, sources), "")

    def current(self, sources: list[Any]) -> str:
        """The answer as the group's pages show it now (for a newcomer), changing nothing."""
        blocks = render_answer(self.committed, sources) if self.committed else ""
        tail = render_answer(self.tail_shown, sources, cards=False) if self.tail_shown else ""
        return self._answer(blocks, tail)

    def _answer(self, blocks: str, tail: str) -> str:
        return render_to_string(
            "search/answer_fragment.html",
            {"entry_id": self.entry_id, "html": blocks, "tail": tail, "oob": True},
        )

    # The two fragments every update sends are formatted here, not by a template: a template's
    # render was most of an update's fixed cost. Both hold only the answer's own HTML (from the
    # one sanitizer) or its escaped text.

    def _blocks(self, markdown: str, sources: list[Any]) -> str:
        self.blocks_sources_key = self._key(sources)
        html = render_answer(markdown, sources)
        return f'<div id="entry-{self.entry_id}-blocks" hx-swap-oob="beforeend">{html}</div>'

    def _tail(self, html: str) -> str:
        """The tail: the sanitizer's HTML of its settled markdown (or nothing)."""
        return f'<div id="entry-{self.entry_id}-tail" class="tail" hx-swap-oob="true">{html}</div>'

    @staticmethod
    def _key(sources: list[Any]) -> tuple:
        return tuple(s.url if hasattr(s, "url") else s.get("url") for s in sources)


def _cells(line: str) -> int:
    return len(line.strip().strip("|").split("|"))


def settled(tail: str) -> str:
    """The growing last block without what would show as raw markdown until more arrives: a
    table before its delimiter row or its unfinished last row, a link's `[label` or `](url`, and
    an unclosed `**` or backtick (closed for the moment). Code blocks are shown as they are."""
    if tail.lstrip().startswith(("```", "~~~", "    ")):
        return tail
    if tail.lstrip().startswith("|"):
        lines = tail.split("\n")
        if len(lines) < 3 or not DELIMITER_ROW.match(lines[1]) or _cells(lines[0]) != _cells(lines[1]):
            return ""  # a table's header, still without the whole row that makes it one
        if not tail.endswith("\n"):
            tail = tail[: tail.rfind("\n") + 1]  # its unfinished row
        return tail
    line_start = tail.rfind("\n") + 1
    link = OPEN_LINK.search(tail, line_start)
    if link and not CITED.match(link.group(0)):
        tail = tail[: link.start()]
    tail = tail.rstrip("*`")
    if tail.count("**", line_start) % 2:
        tail += "**"
    if tail.count("`", line_start) % 2:
        tail += "`"
    return tail


# --- a run's fragments (`run` is a search.live.runner.Run) ---------------------------------------------


def part_keys(run, final: bool = False) -> dict[str, tuple]:
    """What each part of a running entry shows, as a key built from the result as it is (a run
    starts with the keys of its new, empty entry: the page already shows that)."""
    result = _result(run)
    running = run.status == Entry.Status.RUNNING
    return {
        "status": (run.status, run.error),
        "steps": (tuple((s.kind, s.text) for s in result.steps[-STEPS_SHOWN:]), running),
        "sources": tuple(s.url for s in result.sources),
        "related": tuple(result.related),
        "meta": (result.downgraded, run.error, final, running or result.model),  # the model shows at the end
        "images": tuple((r["n"], r.get("file"), r.get("error")) for r in run.downloads.records()),
        "report": (len(result.report), hash(result.report[-64:]), running),
        "question": _question(run) if running else None,
        "files": _cited(run),
    }


def changed_parts(run, final: bool = False) -> list[str]:
    """Fragments for what changed since the run's last update (all of them on `final`). The
    template context is only built when some part changed (mid-answer, most updates bring only
    text)."""
    keys = part_keys(run, final)
    changed = [name for name, key in keys.items() if run.sent.get(name) != key]
    result = _result(run)
    parts = []
    now = time.monotonic()
    if "report" in changed and not final and now - run.report_rendered_at < REPORT_RENDER_EVERY:
        changed.remove("report")  # a report grows by hundreds of whole replaces: a few renders do
    if changed:
        context = _context(run)
        for name in changed:
            run.sent[name] = keys[name]
            if name == "sources":
                parts.append(_sources_fragment(run.entry_id, result))
            elif name == "files":
                parts.append(_files_fragment(run))
            elif name == "report":
                run.report_rendered_at = now
                parts.append(_report_fragment(run, result))
            else:
                parts.append(_part(name, context))
    parts += run.answer.update(result.answer, result.sources, final=final)
    return parts


def full_state(run) -> str:
    """Every part of the run as the group's pages show it now, for a newcomer (the answer as
    sent so far: the next update applies to it)."""
    result = _result(run)
    context = _context(run)
    parts = [_part(n, context) for n in ("status", "steps", "related", "meta", "images", "question")]
    parts.append(_sources_fragment(run.entry_id, result))
    parts.append(_files_fragment(run))
    parts.append(_report_fragment(run, result))
    parts.append(run.answer.current(result.sources))
    return "".join(parts)


def _result(run) -> Result:
    """The run's result so far (an empty running one before the first extraction)."""
    return run.result or Result(status="running")


def _context(run) -> dict:
    result = _result(run)
    return {
        "entry_id": run.entry_id,
        "thread_id": run.thread_id,
        "status": run.status,
        "status_label": dict(Entry.Status.choices).get(run.status, run.status),
        "running": run.status == Entry.Status.RUNNING,
        "started_ms": int((time.time() - (time.monotonic() - run.started)) * 1000),
        "steps": [{"kind": s.kind, "text": scrub(s.text)} for s in result.steps[-STEPS_SHOWN:]],
        "related": [scrub(q) for q in result.related],
        "model": model_label(result.model, run.models),
        "downgraded": result.downgraded,
        "error": run.error,
        "seconds": round(time.monotonic() - run.started, 1),
        "first_text": round(run.first_text_ms / 1000, 1) if run.first_text_ms else None,
        "answered": bool(result.answer),  # Copy is offered only for an answer with text
        "images": run.downloads.records(),
        "question": _question(run) if run.status == Entry.Status.RUNNING else None,
        "oob": True,
    }


def _part(name: str, context: dict) -> str:
    return render_to_string(f"search/{name}_fragment.html", context)


def _question(run):
    """The clarifying question the run waits on, unless it was answered or skipped here."""
    question = _result(run).question
    return None if question is None or question.key in run.clarified else question


def _report_fragment(run, result: Result) -> str:
    running = run.status == Entry.Status.RUNNING
    return render_to_string(
        "search/report_fragment.html", report_context(run.entry_id, result.report, result.sources, running)
    )


def _cited(run) -> tuple[int, ...]:
    """The question's files the answer draws on so far (its attachment hits), as the saved page
    marks them at the end (attachments.mark_cited)."""
    if not run.files or run.snapshot is None:
        return ()
    return tuple(sorted(attachments.cited_by(run.files, file_hits(run.snapshot))))


def _files_fragment(run) -> str:
    """The question's files, the cited ones marked "your file" ("" when it has none)."""
    return render_to_string(
        "search/attachments_list.html",
        {
            "entry_id": run.entry_id,
            "attachments": attachments.shown(run.files, set(_cited(run))),
            "oob": True,
        },
    )


def _sources_fragment(entry_id: int, result: Result) -> str:
    return render_to_string(
        "search/sources_fragment.html",
        {
            "entry_id": entry_id,
            "sources": render_sources(result.sources),
            "count": len(result.sources),
            "oob": True,
        },
    )
