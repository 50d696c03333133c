"""Math in answers: LaTeX between `$$ $$`, `\\[ \\]`, `\\( \\)` or `$ $` as MathML, made here.

Display math is a block (`$$` or `\\[` starting a line, closed on a later line before a blank
line) or inline (`$$...$$`, `\\[...\\]` inside a paragraph); inline math is `\\(...\\)` and `$...$`
where it cannot be a price: the opening `$` has no space after it, the closing one no space
before it and no digit after it, and the content does not start with an amount followed by a
space ("$5 and $10", "$5-$10", "costs $5 (or 3$)" stay text). Each closer is looked up once per
paragraph (`next_from`), so unclosed openers cost no rescans. latex2mathml turns the LaTeX into
MathML; what it rejects, what is too long and any output with a non-MathML tag is shown as its
LaTeX in a code span. The result passes through render.clean with MATH_TAGS and MATH_ATTRIBUTES:
presentation MathML only, no href, style, id, class or annotation-xml.
"""

from __future__ import annotations

import re
from functools import lru_cache

from django.utils.html import escape
from latex2mathml.converter import convert
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline

LATEX_MAX = 4000  # a longer formula is shown as LaTeX (latex2mathml: ~50 µs a character)
LATEX_BUDGET = 40_000  # characters of LaTeX converted per render; the rest shown as LaTeX

MATH_TAGS = {
    "math", "mrow", "mi", "mn", "mo", "ms", "mspace", "mtext", "mfrac", "msqrt", "mroot", "msub",
    "msup", "msubsup", "munder", "mover", "munderover", "mmultiscripts", "mprescripts", "none",
    "mtable", "mtr", "mtd", "mpadded", "mphantom", "mstyle", "merror", "menclose", "mfenced",
}  # fmt: skip
_MATH_ATTRIBUTES = {
    "display", "displaystyle", "scriptlevel", "mathvariant", "mathsize", "stretchy", "fence",
    "form", "separator", "lspace", "rspace", "largeop", "movablelimits", "accent", "accentunder",
    "symmetric", "minsize", "maxsize", "linethickness", "width", "height", "depth", "voffset",
    "columnalign", "columnspacing", "columnlines", "rowalign", "rowspacing", "rowlines", "frame",
    "rowspan", "columnspan", "notation", "open", "close", "separators",
}  # fmt: skip
MATH_ATTRIBUTES = {tag: _MATH_ATTRIBUTES for tag in MATH_TAGS}
_TAG = re.compile(r"<\s*/?\s*([a-zA-Z][\w:.-]*)")
_AMOUNT = re.compile(r"\d[\d,.]*\s")  # "$5 and ...": an amount, then words
_CLOSERS = {"$$": "$$", "\\[": "\\]"}  # a block's


def mathml(latex: str, display: bool, source: str, env: dict) -> str:
    """`latex` as MathML, else `source` (the LaTeX with its delimiters) as code."""
    budget = env.get("latex_budget", LATEX_BUDGET)
    env["latex_budget"] = budget - len(latex)
    html = _convert(latex.strip(), display) if len(latex) <= LATEX_MAX and len(latex) <= budget else ""
    if html:
        return html
    code = escape(source)
    return f'<pre class="math-source"><code>{code}</code></pre>\n' if display else f"<code>{code}</code>"


@lru_cache(maxsize=1024)
def _convert(latex: str, display: bool) -> str:
    """latex2mathml's MathML, or "" when it fails or emits a tag outside MATH_TAGS (`\\text{<b>}`
    is passed through as a tag)."""
    if not latex:
        return ""
    try:
        html = convert(latex, display="block" if display else "inline")
    except Exception:  # latex2mathml raises many kinds on bad LaTeX; each means "show the LaTeX"
        return ""
    if any(tag.lower() not in MATH_TAGS for tag in _TAG.findall(html)):
        return ""
    return html


def next_from(memo: dict, src: str, needle: str, pos: int) -> int:
    """src.find(needle, pos), remembered in `memo`: asked again from a place before the answer
    (openers are tried left to right), it is not searched again."""
    kept = memo.get(needle)
    if kept and kept[0] is src and kept[1] <= pos and (kept[2] == -1 or pos <= kept[2]):
        return kept[2]
    found = src.find(needle, pos)
    memo[needle] = (src, pos, found)
    return found


# --- blocks: `$$` or `\[` at the start of a line ---------------------------------------------------


def _line(state: StateBlock, line: int) -> str:
    return state.src[state.bMarks[line] + state.tShift[line] : state.eMarks[line]]


def math_block(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    begin = state.bMarks[start] + state.tShift[start]
    if state.src[begin : begin + 2] not in _CLOSERS or state.sCount[start] - state.blkIndent >= 4:
        return False
    text = _line(state, start)
    opener = text[:2]
    closer = _CLOSERS[opener]
    rest = text[len(opener) :].rstrip()
    first = rest.find(closer)
    if first >= 0 and first == len(rest) - len(closer):
        last, body = start, rest[:first]
    elif first >= 0:
        return False  # "$$x$$ and more": inline math in a paragraph
    else:
        last = _closing_line(state, start + 1, end, closer)
        if last < 0:
            return False  # never closed: the line stays text
        lines = [rest, *(_line(state, n) for n in range(start + 1, last))]
        lines.append(_line(state, last).rstrip()[: -len(closer)])
        body = "\n".join(lines)
    if silent:
        return True
    token = state.push("math_block", "math", 0)
    token.content, token.markup, token.block = body, opener, True
    token.map = [start, last + 1]
    state.line = last + 1
    return True


def _closing_line(state: StateBlock, line: int, end: int, closer: str) -> int:
    """The first line from `line` that ends with `closer`, or -1 when a blank line, the end of
    the container or `end` comes first. Remembered per closer, so the lines a failed search
    crossed are not searched again by the openers among them."""
    key = (state.src, state.blkIndent, end)
    memo = state.env.setdefault("math_lines", {})
    kept = memo.get(closer)
    if kept and kept[0] == key and kept[1] <= line <= kept[2]:
        return kept[3]
    stop, found = line, -1
    while stop < end and not state.isEmpty(stop) and state.sCount[stop] >= state.blkIndent:
        if _line(state, stop).rstrip().endswith(closer):
            found = stop
            break
        stop += 1
    memo[closer] = (key, line, stop, found)
    return found


# --- inline: `\(...\)`, `$$...$$`, `\[...\]`, `$...$` ----------------------------------------------


def math_inline(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if src.startswith("\\(", pos):
        opener, closer, display = "\\(", "\\)", False
    elif src.startswith("\\[", pos):
        opener, closer, display = "\\[", "\\]", True
    elif src.startswith("$$", pos):
        opener, closer, display = "$$", "$$", True
    elif src.startswith("$", pos):
        opener, closer, display = "$", "$", False
    else:
        return False
    begin = pos + len(opener)
    found = next_from(state.env.setdefault("math_next", {}), src, closer, begin)
    if found < 0 or found + len(closer) > state.posMax or found == begin:
        return False
    body = src[begin:found]
    if opener == "$" and not dollar_math(src, body, found):
        return False
    if not silent:
        token = state.push("math_inline", "math", 0)
        token.content, token.markup, token.info = body, opener, "display" if display else ""
    state.pos = found + len(closer)
    return True


def dollar_math(src: str, body: str, found: int) -> bool:
    """Whether `$body$` is math rather than money (see the module's docstring)."""
    after = src[found + 1 : found + 2]
    return not (
        body[0].isspace()
        or body[-1].isspace()
        or body.endswith("\\")  # `\$` is a dollar sign
        or after.isdigit()
        or _AMOUNT.match(body)
    )


def _render_block(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    closer = _CLOSERS[token.markup]
    return mathml(token.content, True, f"{token.markup}{token.content}{closer}", env) + "\n"


def _render_inline(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    closer = {"\\(": "\\)", "\\[": "\\]", "$$": "$$", "$": "$"}[token.markup]
    return mathml(token.content, token.info == "display", f"{token.markup}{token.content}{closer}", env)


def math_plugin(md: MarkdownIt) -> None:
    """Math blocks (they may interrupt a paragraph) and inline math (before `escape`, which
    would take `\\(` for an escaped parenthesis)."""
    md.block.ruler.before(
        "table", "math_block", math_block, {"alt": ["paragraph", "reference", "blockquote", "list"]}
    )
    md.inline.ruler.before("escape", "math_inline", math_inline)
    md.add_render_rule("math_block", _render_block)
    md.add_render_rule("math_inline", _render_inline)
