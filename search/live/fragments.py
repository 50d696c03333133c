"""A running answer's text as HTML fragments over the websocket (its other parts are
search/live/parts.py's).

Each fragment replaces (or appends to) an element by id with `hx-swap-oob`. The answer is sent
so each byte of a finished block travels once:

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
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.template.loader import render_to_string
from markdown_it import MarkdownIt
from markdown_it.rules_block import table

from search.bounded import bounded_table
from search.latex import LATEX_MAX, math_plugin
from search.render import render_answer, scrub

# The tail is re-rendered whole, so a long one is re-sent less often: at each update up to
# LONG_TAIL characters, then at most every TAIL_EVERY seconds, and every TAIL_RENDER_EVERY over BIG_TAIL.
LONG_TAIL, TAIL_EVERY = 300, 0.25
BIG_TAIL, TAIL_RENDER_EVERY = 4096, 1.0
# ... and, once a render took over SLOW_TAIL seconds (one huge hostile block), never sooner than
# TAIL_SHARE times that: the tail then takes at most a tenth of the event loop's time
SLOW_TAIL, TAIL_SHARE = 0.2, 10
CITED = re.compile(r"\[\d{1,3}\]")
MATH_LINE = re.compile(r"(?m)^[ \t]*(?:\$\$|\\\[).*$|^.*(?:\$\$|\\\])[ \t]*$")  # opens or closes a block
MATH_CLOSERS = {"$$": "$$", "\\[": "\\]"}
BLANK_LINE = re.compile(r"\n[ \t]*\n")
DOUBLE_DOLLAR = re.compile(r"\$\$")
SINGLE_DOLLAR = re.compile(r"(?<![$\\])\$(?!\$)")
DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


@cache
def _block_parser() -> MarkdownIt:
    """The answer's markdown dialect, block rules only: where blocks start needs no inline pass
    (linkify's scan of the text alone was most of the per-update parse)."""
    md = MarkdownIt("js-default")
    md.disable(["reference"])
    md.enable(["table"])
    md.block.ruler.at("table", bounded_table(table))
    md.use(math_plugin)  # a `$$` block is one block, whatever lines it holds
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
    tail_took: float = 0.0  # seconds the last render of the tail took
    sources_key: tuple = ()
    blocks_sources_key: tuple = ()
    html_sent: list[str] = field(default_factory=list)
    resync: bool = False  # the browser shows text this stream did not send: send it all next
    outline: list = field(default_factory=list)  # the headings open after `committed` (render.py)
    seen: int = 0  # the length of the text at the last update
    split_at: float = 0.0  # when the tail was last split into blocks
    unsplit: bool = False  # a line ended in the tail and no block has been split off since

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
        now = time.monotonic()
        starts = _block_starts(tail) if tail and (final or self._may_split(text, tail, now)) else []
        self.seen = len(text)
        if final:
            starts = [*starts, len(tail)]  # every block is complete at the end
        elif starts and (math := open_math(tail)) >= 0:
            starts = [at for at in starts if at <= math]  # "$$" and what follows wait for its closer
        reset = False
        if len(starts) > 1:
            self.unsplit = False
            done = tail[: starts[-1]]
            fragments.append(self._blocks(done, sources))
            self.committed += done
            tail = tail[starts[-1] :]
            self.tail_sent, self.tail_shown, reset = "", "", True
        if final:
            return [*fragments, self._tail("")] if reset or self.tail_shown else fragments
        shown = settled(tail)
        wait = TAIL_RENDER_EVERY if len(tail) > BIG_TAIL else TAIL_EVERY if len(tail) > LONG_TAIL else 0.0
        if self.tail_took > SLOW_TAIL:
            wait = max(wait, TAIL_SHARE * self.tail_took)
        if (shown != self.tail_shown or reset) and (reset or now - self.tail_rendered_at >= wait):
            html = render_answer(shown, sources, cards=False, outline=list(self.outline)) if shown else ""
            fragments.append(self._tail(html))
            # what the browser has of the text: the settled part, less the markers it closed
            self.tail_sent = tail[: len(shown.rstrip("*`"))] if shown else ""
            self.tail_shown, self.tail_rendered_at = shown, now
            self.tail_took = time.monotonic() - now
        return fragments

    def _may_split(self, text: str, tail: str, now: float) -> bool:
        """Whether the tail is to be split into blocks now: only once a line has ended since it
        last was (a block starts on a new line), and a tail over BIG_TAIL characters (one huge
        table) at most every TAIL_RENDER_EVERY, so an update's work does not grow with the
        block."""
        self.unsplit = self.unsplit or "\n" in text[self.seen :]
        if not self.unsplit or (len(tail) > BIG_TAIL and now - self.split_at < TAIL_RENDER_EVERY):
            return False
        self.split_at = now
        return True

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
        self.blocks_sources_key, self.outline, self.seen = self._key(sources), [], len(text)
        return self._answer(render_answer(text, sources, outline=self.outline), "")

    def current(self, sources: list[Any]) -> str:
        """The answer as the group's pages show it now (for a newcomer), changing nothing."""
        blocks = render_answer(self.committed, sources, outline=[]) if self.committed else ""
        tail = self.tail_shown and render_answer(
            self.tail_shown, sources, cards=False, outline=list(self.outline)
        )
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
        html = render_answer(markdown, sources, outline=self.outline)
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
    table before its delimiter row or its unfinished last row, math not yet closed, a link's
    `[label` or `](url`, and an unclosed `**` or backtick (closed for the moment). Code blocks
    are shown as they are. Each look is a scan of the tail or its last line, none repeated."""
    if tail.lstrip().startswith(("```", "~~~", "    ")):
        return tail
    if tail.lstrip().startswith("|"):
        lines = tail.split("\n", 2)
        if len(lines) < 3 or not DELIMITER_ROW.match(lines[1]) or _cells(lines[0]) != _cells(lines[1]):
            return ""  # a table's header, still without the whole row that makes it one
        if not tail.endswith("\n"):
            tail = tail[: tail.rfind("\n") + 1]  # its unfinished row
        return tail
    if (math := open_math(tail)) >= 0:
        return tail[:math].rstrip("\n")
    line_start = tail.rfind("\n") + 1
    tail = tail[: _open_inline(tail, line_start)]
    link = _open_link(tail, line_start)
    if link >= 0 and not CITED.fullmatch(tail, link):
        tail = tail[:link]
    tail = tail.rstrip("*`")
    if tail.count("**", line_start) % 2:
        tail += "**"
    if tail.count("`", line_start) % 2:
        tail += "`"
    return tail


def open_math(tail: str) -> int:
    """Where a display math block that is not closed yet starts (its `$$` or `\\[` line), or -1:
    also -1 when a blank line follows it or it is past LATEX_MAX (it shows as text then)."""
    start, closer = -1, ""
    for line in MATH_LINE.finditer(tail):
        text = line.group().strip()
        if start < 0:
            opener, rest = text[:2], text[2:]
            if opener not in MATH_CLOSERS:
                continue  # a line that only closes
            if rest.find(MATH_CLOSERS[opener]) == len(rest) - 2 >= 0:
                continue  # "$$ x $$": closed on its line
            start, closer = line.start(), MATH_CLOSERS[opener]
        elif text.endswith(closer) and line.start() > start:
            start = -1
    if start < 0 or len(tail) - start > LATEX_MAX or BLANK_LINE.search(tail, start):
        return -1
    return start


def _open_inline(tail: str, line_start: int) -> int:
    """Where inline math still open on the last line starts (`\\(x`, `$$x`, `$x` that cannot be
    a price), else the tail's end."""
    cut = len(tail)
    for opener, closer in (("\\(", "\\)"), ("\\[", "\\]")):
        at = tail.rfind(opener, line_start)
        if at >= 0 and tail.find(closer, at) < 0:
            cut = min(cut, at)
    doubles = [m.start() for m in DOUBLE_DOLLAR.finditer(tail, line_start)]
    if len(doubles) % 2:
        cut = min(cut, doubles[-1])
    singles = [m.start() for m in SINGLE_DOLLAR.finditer(tail, line_start)]
    if len(singles) % 2 and re.match(r"[^\s\d]", tail[singles[-1] + 1 : singles[-1] + 2]):
        cut = min(cut, singles[-1])
    return cut


def _open_link(tail: str, line_start: int) -> int:
    """Where an unfinished link on the last line starts ("[King A", "[King](https://ex"), or -1:
    the leftmost `[` followed by at most one `]`, itself last or opening a `(` not yet closed."""
    close = tail.rfind("]", line_start)
    if close < 0:
        start = tail.find("[", line_start)
    else:
        rest = tail[close + 1 :]
        if rest == "" or (rest.startswith("(") and ")" not in rest):
            before = tail.rfind("]", line_start, close)
            start = tail.find("[", before + 1 if before >= 0 else line_start, close)
            start = start if start >= 0 else tail.find("[", close + 1)
        else:
            start = tail.find("[", close + 1)
    if start > line_start and tail[start - 1] == "!":
        start -= 1
    return start
