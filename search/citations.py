"""An answer's citations `[n]` in its Markdown, for Copy and the exports: rewritten outside code
and math only (`\\sqrt[3]{x}` and `` `a[1]` `` stay as they are), in one pass over the text."""

from __future__ import annotations

import re
from collections.abc import Callable

from search.latex import dollar_math, next_from

# a code fence at a line's start, a backtick run, a math opener, or a citation
_MARKS = re.compile(r"(?m)^[ \t]{0,3}(```|~~~)|`+|\$\$|\\\(|\\\[|\$|\[(\d{1,3})\]")
_CLOSERS = {"$$": "$$", "\\(": "\\)", "\\[": "\\]", "$": "$"}


def rewrite(text: str, count: int, replace: Callable[[int], str], eat_space: bool = False) -> str:
    """`text` with each `[n]` (1 <= n <= count) outside code and math replaced by replace(n)
    (`eat_space`: with the spaces before it)."""
    out: list[str] = []
    memo: dict = {}
    pos = done = 0
    while match := _MARKS.search(text, pos):
        mark, pos = match.group(), match.end()
        if match.group(2):
            n = int(match.group(2))
            if 1 <= n <= count:
                before = text[done : match.start()]
                out += [before.rstrip(" \t") if eat_space else before, replace(n)]
                done = pos
        elif match.group(1):  # a fence runs to its closing line, or to the end
            closing = next_from(memo, text, "\n" + match.group(1)[:3], pos)
            pos = len(text) if closing < 0 else closing + 4
        elif mark[0] == "`" or mark in _CLOSERS:
            closer = mark if mark[0] == "`" else _CLOSERS[mark]
            found = next_from(memo, text, closer, pos)
            if found > pos and (mark != "$" or dollar_math(text, text[pos:found], found)):
                pos = found + len(closer)
    out.append(text[done:])
    return "".join(out)


def as_footnotes(text: str, count: int) -> str:
    """`[n]` -> `[^n]`, the Markdown export's footnotes."""
    return rewrite(text, count, lambda n: f"[^{n}]")


def without(text: str, count: int) -> str:
    """The text without its citations (and the spaces before each)."""
    return rewrite(text, count, lambda n: "", eat_space=True)
