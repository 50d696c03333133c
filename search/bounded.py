"""markdown-it's rules held to linear time, wrapped at the ruler (its public seam).

Measured on markdown-it-py 4.3 before these wrappers: each `[` that opens no link walked the rest
of its paragraph (in links nested up to `maxNesting`, 100 deep), so "[a " repeated or 300 KB of
`[` took seconds to minutes; the inline linkify rule ran a regular expression over all the
pending text at each `://` ("a ://" repeated: 97 s for 100 KB) and copied the rest of the
paragraph for each link found; more than 100 nested `>` dropped the text past the 100th.

- A `[` is tried as a link (or `![` as an image) only when a `]` closes it within LABEL_MAX
  characters and fewer than BRACKET_DEPTH brackets deep (`brackets`: one pass over the
  paragraph, code spans and escapes aside) and is followed by `(` with a `)` within LINK_MAX
  characters (no reference definitions: nothing else makes a link); the rule then sees at most
  LINK_MAX characters past that `]`. Any other `[` is text, as an unmatched one was.
- `linkify_inline` is markdown-it-py's rule for `scheme://` with the scheme read from the few
  characters before `://` and linkify-it shown at most URL_MAX characters.
- `bounded_table` ends a table where its cells (markdown-it-py fills short rows up to the
  header's columns, 65,536 empty cells a table: a 2 KB table took 7 s) would pass CELLS_PER_CHAR
  for each character of its rows; the rows after it are a paragraph.
- `plain_run` takes a run of characters no inline rule starts at (`]`, `>`, `=`, ...) as text in
  one step, as `unclosed` does a run of `[` that nothing closes: one by one, each went through
  every inline rule (1 MB of `[` or of `]`: about 30 s).
- `flatten_quotes` keeps at most QUOTE_DEPTH `>` at a line's start (the text stays).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline

from search.latex import dollar_math, next_from

LABEL_MAX = 1000  # a link's text longer than this is shown as text
BRACKET_DEPTH = 8  # a link inside more brackets than this is shown as text
LINK_MAX = 2048  # the destination and title of one link
URL_MAX = 2048  # a bare URL is linked up to this many characters
QUOTE_DEPTH = 16
PLAIN = frozenset("]>=^{}%#+-@")  # terminators of markdown-it's text rule that no inline rule uses
CELLS_PER_CHAR, CELLS_FREE = 8, 512

_DESTINATION = re.compile(r"\((?:[^()\s\\]|\\.|\([^()\s]*\))*\)")
_MARKS = re.compile(r"\\[\s\S]|`+|\[+|\]+|\$\$?")
_MATH = {"\\(": "\\)", "\\[": "\\]", "$$": "$$", "$": "$"}
_SCHEME = re.compile(r"(?:^|[^a-z0-9.+-])([a-z][a-z0-9.+-]*)$", re.IGNORECASE)
_QUOTES = re.compile(rf"(?m)^((?:[ \t]{{0,3}}>){{{QUOTE_DEPTH}}})(?:[ \t]*>)+")


def flatten_quotes(text: str) -> str:
    """At most QUOTE_DEPTH `>` at the start of a line: markdown-it drops what lies deeper than
    its nesting limit."""
    return _QUOTES.sub(r"\1", text) if ">" in text else text


def brackets(src: str) -> dict[int, tuple[int, int]]:
    """Each `[` of `src` that a `]` closes: {its position: (the `]`'s position, how many
    brackets deep its label goes)}. Brackets in code spans, escaped ones and those in a link's
    `(destination)` or math do not count. One pass, runs of brackets taken whole; code spans are found
    as markdown-it finds them (the next run of as many backticks)."""
    runs: dict[int, list[int]] = {}  # backtick run length -> their positions, in order
    for m in re.finditer(r"`+", src):
        runs.setdefault(len(m.group()), []).append(m.start())
    taken: dict[int, int] = dict.fromkeys(runs, 0)  # per length, how many runs are behind us
    found: dict[int, tuple[int, int]] = {}
    memo: dict = {}
    opens: list[int] = []  # the `[` not closed yet, and how deep below each the brackets go
    depths: list[int] = []
    pos = 0
    while match := _MARKS.search(src, pos):
        mark, at, pos = match.group(), match.start(), match.end()
        if mark[0] == "`":
            pos = _code_span_end(runs.get(len(mark), []), taken, len(mark), at, pos)
        elif mark in _MATH:  # math is one token to markdown-it, as code is
            closer = _MATH[mark]
            end = next_from(memo, src, closer, pos)
            if end > pos and (mark != "$" or dollar_math(src, src[pos:end], end)):
                pos = end + len(closer)
        elif mark[0] == "[":
            opens.extend(range(at, pos))
            depths.extend([0] * len(mark))
        elif mark[0] == "]":
            for close in range(at, min(pos, at + len(opens))):
                depth = depths.pop()
                found[opens.pop()] = (close, depth)
                if depths:
                    depths[-1] = max(depths[-1], depth + 1)
            if destination := _DESTINATION.match(src, pos):
                pos = destination.end()  # `](url)`: its brackets are the link's, not text
    return found


def _code_span_end(positions: list[int], taken: dict[int, int], length: int, start: int, end: int) -> int:
    """Where scanning goes on after a run of `length` backticks at `start`: past the next run
    as long (a code span), else just after this one."""
    i = taken.get(length, 0)
    while i < len(positions) and positions[i] <= start:
        i += 1
    taken[length] = i
    if i < len(positions):
        taken[length] = i + 1
        return positions[i] + length
    return end


def bounded_link(rule: Callable, offset: int) -> Callable:
    """markdown-it's `link` (offset 0) or `image` (offset 1, after the `!`) rule, tried only
    where `brackets` finds a short, shallow label."""

    def bounded(state: StateInline, silent: bool) -> bool:
        start = state.pos + offset
        if start >= state.posMax or state.src[start] != "[":
            return False
        labels = _labels(state)
        label = labels.get(start)
        if label is None and offset == 0 and not silent:
            return _unclosed_run(state, labels)
        if label is None or label[0] - start > LABEL_MAX or label[1] >= BRACKET_DEPTH:
            return False
        close = _next_close(state, label[0] + 1)
        if state.src[label[0] + 1 : label[0] + 2] != "(" or close < 0 or close > label[0] + LINK_MAX:
            return False  # with no reference definitions, only `](...)` makes a link
        maximum = state.posMax
        state.posMax = min(maximum, label[0] + LINK_MAX)
        try:
            return rule(state, silent)
        finally:
            state.posMax = maximum

    return bounded


def plain_run(state: StateInline, silent: bool) -> bool:
    """A run of PLAIN characters as text (not when a label is being measured: there each `]`
    counts)."""
    pos, src = state.pos, state.src
    if silent or src[pos] not in PLAIN:
        return False
    end = pos + 1
    while end < state.posMax and src[end] in PLAIN:
        end += 1
    state.append_pending(src[pos:end])
    state.pos = end
    return True


def _unclosed_run(state: StateInline, labels: dict) -> bool:
    """A run of `[` that nothing closes, as text in one step. None of them can start a link or
    be inside one's label (a label's brackets all close): the text is what markdown-it made of
    them one by one."""
    end, src = state.pos + 1, state.src
    while end < state.posMax and src[end] == "[" and end not in labels:
        end += 1
    state.append_pending(src[state.pos : end])
    state.pos = end
    return True


def _labels(state: StateInline) -> dict[int, tuple[int, int]]:
    """`brackets` of the paragraph, computed once (kept in env, beside the paragraph it is for)."""
    kept = state.env.get("brackets")
    if kept is None or kept[0] is not state.src:
        kept = state.env["brackets"] = (state.src, brackets(state.src))
    return kept[1]


def _next_close(state: StateInline, pos: int) -> int:
    """The first `)` from `pos` (remembered: links are tried left to right)."""
    kept = state.env.get("next_close")
    if kept and kept[0] is state.src and kept[1] <= pos and (kept[2] < 0 or pos <= kept[2]):
        return kept[2]
    found = state.src.find(")", pos)
    state.env["next_close"] = (state.src, pos, found)
    return found


def linkify_inline(state: StateInline, silent: bool) -> bool:
    """markdown-it-py's inline linkify rule (`http://...` in text), in bounded steps."""
    pos, src = state.pos, state.src
    if state.linkLevel > 0 or pos + 3 > state.posMax or not src.startswith("://", pos):
        return False
    window = src[max(0, pos - 16) : pos]
    scheme = _SCHEME.search(window)
    if not scheme or (scheme.start(1) == 0 and pos > 16):
        return False  # no scheme, or one longer than any linkify-it knows
    proto = scheme.group(1)
    if not state.pending.endswith(proto):
        return False  # the scheme is part of an earlier token
    link = state.md.linkify.match_at_start(src[pos - len(proto) : min(state.posMax, pos + URL_MAX)])
    if not link:
        return False
    url = link.url.rstrip("*")  # a trailing `*` is emphasis, as markdown-it-py decides
    full_url = state.md.normalizeLink(url)
    if not state.md.validateLink(full_url):
        return False
    if not silent:
        state.pending = state.pending[: -len(proto)]
        token = state.push("link_open", "a", 1)
        token.attrs = {"href": full_url}
        token.markup, token.info = "linkify", "auto"
        token = state.push("text", "", 0)
        token.content = state.md.normalizeLinkText(url)
        token = state.push("link_close", "a", -1)
        token.markup, token.info = "linkify", "auto"
    state.pos += len(url) - len(proto)
    return True


def bounded_table(rule: Callable) -> Callable:
    """markdown-it's `table` rule, given only the rows its cells may fill (see the docstring).
    The rows are walked as the rule walks them (same end, same terminators): once a table."""

    def bounded(state: StateBlock, start: int, end: int, silent: bool) -> bool:
        if silent or start + 2 >= end or not rule(state, start, end, True):
            return rule(state, start, end, silent)  # no table starts here: the rule says so at once
        columns = _text(state, start + 1).strip().strip("|").count("|") + 1
        terminators = state.md.block.ruler.getRules("table")
        budget, line = CELLS_FREE, start + 2
        while line < end and state.sCount[line] >= state.blkIndent and not state.isEmpty(line):
            if any(terminate(state, line, end, True) for terminate in terminators):
                break
            budget += CELLS_PER_CHAR * (len(_text(state, line)) + 1) - columns
            if budget < 0:
                break
            line += 1
        return rule(state, start, line, silent)

    return bounded


def _text(state: StateBlock, line: int) -> str:
    return state.src[state.bMarks[line] + state.tShift[line] : state.eMarks[line]]
