"""Rendering takes work linear in the text, for every text (issue 41): measured as the number of
Python calls (sys.setprofile), which no machine load changes. A text made of a unit repeated 4k
times may take at most 4.5x the calls of the unit repeated k times; any rescan of
the rest of a paragraph per `[`, per `$` or per line grows faster. The wall-clock figures for
1 MB inputs are `python -m tests.benchmarks.render`'s."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from search.live.fragments import AnswerStream, settled
from search.render import render_answer, render_report

SOURCES = [{"title": f"S{n}", "url": f"https://s{n}.example/", "snippet": "s"} for n in range(1, 6)]
# the pieces hostile Markdown is made of: brackets, emphasis runs, quotes, list markers and
# indentation, table pipes, code, math, links, citations, entities, line ends
PIECES = [
    "[", "]", "(", ")", "![", "[1]", "](", "*", "**", "_", "~~", ">", "> ", "- ", "1. ", "  ", "    ",
    "|", "|-", "\n", "\n\n", "`", "```", "$", "$$", "\\(", "\\)", "\\[", "\\]", "\\", "http://a.io/",
    "a ://", "www.", "a", " ", "x.io", "<", "&#", "#", "=", "-", '"', ":", "\t", "{", "}", "^",
]  # fmt: skip
UNITS = st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join)


def calls(render, text: str) -> int:
    """How many Python function calls rendering `text` makes."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += 1

    sys.setprofile(profile)
    try:
        render(text)
    finally:
        sys.setprofile(None)
    return count


def assert_linear(render, unit: str, small: int = 5000) -> None:
    """4x the text, at most 4.5x the calls: a part growing with the square of the length that is
    4% of the work at `small` characters already passes that. `small` is past every length limit
    of the renderer (a link's 2,048 characters, a formula's 4,000), where the work per character
    changes."""
    k = max(1, small // len(unit))
    few, many = calls(render, unit * k), calls(render, unit * 4 * k)
    if many > 4.5 * few + 1000:
        # A limit can still be coming into play at k (a unit with a link and a citation grew
        # 5.3x from 5 to 20 KB, then 4.2x from 20 to 80 KB); a square part only grows further.
        more = calls(render, unit * 16 * k)
        assert more <= 4.5 * many + 1000, (unit, few, many, more)


def answer(text: str) -> None:
    render_answer(text, SOURCES)


@pytest.mark.parametrize(
    "unit",
    [
        "[",  # 1 MB of `[` took minutes (every `[` walked the rest)
        "*",
        ">",
        "[a ",
        "[a](",
        '[a](b "',
        "![",
        "[[]",
        "*a ",
        "_a ",
        "*_",
        "`a",
        "a ://",
        "http://a.bc ",
        "> - ",
        "$5 and ",
        "$x",
        "\\(",
        "$$ a\n",
        "$$\n",
        "\\[ a\n",
        "x [1]",
        "|a",
        "|\n",
        "- a\n  ",
    ],
)
def test_pathological_units_render_in_linear_work(unit):
    assert_linear(answer, unit)


def test_a_wide_table_and_its_short_rows_are_linear():
    header = "|a" * 200 + "|\n" + "|-" * 200 + "|\n"
    few, many = calls(answer, header + "|\n" * 200), calls(answer, header + "|\n" * 800)
    assert many <= 4.4 * few
    # markdown-it-py fills short rows with empty cells up to the header's 200 columns (65,536 a
    # table): here the table ends where its cells pass 8 a character, the rest is text
    html = render_answer(header + "|\n" * 800)
    assert html.count("<td") <= 8 * len(header + "|\n" * 800)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(UNITS)
def test_any_repeated_markdown_renders_in_linear_work(unit):
    assert_linear(answer, unit)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(UNITS)
def test_a_report_renders_in_linear_work(unit):
    assert_linear(lambda text: render_report(text, SOURCES), unit)


def test_deep_nesting_keeps_its_text():
    """More nested quotes than markdown-it's nesting limit (100) dropped the text in them."""
    html = render_answer(">" * 200 + " deepest words\n\nafter")
    assert "deepest words" in html and "after" in html
    assert html.count("<blockquote>") == 16


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(UNITS)
def test_the_live_tail_is_linear_too(unit):
    """settled() runs at every update on the growing tail: one scan, never one per `[` or `$`."""
    assert_linear(settled, unit)

    def stream(text: str) -> None:
        AnswerStream(1).update(text, SOURCES)

    assert_linear(stream, unit)


def reference():
    """markdown-it as pplxweb configures it, without the bounds of search/bounded.py."""
    from markdown_it import MarkdownIt

    from search.latex import math_plugin
    from search.render import _highlight, _image_as_link, _Linkify

    md = MarkdownIt("js-default", {"linkify": True, "typographer": False, "highlight": _highlight})
    md.linkify = _Linkify()
    md.disable(["reference"])
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    return md.use(math_plugin)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from([*PIECES, "b", "c", "x](y)", "](http://a.io)", " "]), max_size=30).map("".join)
)
def test_the_bounds_change_nothing_in_ordinary_text(text):
    """Short of its limits (a link's 1,000 characters, 8 brackets deep, ...), the bounded renderer
    makes what markdown-it makes. Known difference: a bare URL ending in a backslash before a
    `[` (the escape is the URL's in markdown-it, an escaped `[` in the bracket pass)."""
    from search.render import _markdown

    assume(not re.search(r"://\S*\\", text))
    env = {"sources": [], "outline": [], "level": 1}
    ours = _markdown().render(text, env)
    theirs = reference().render(text)

    def strip(html: str) -> str:  # table alignment as classes, headings outlined
        return re.sub(r"<(/?)h\d", r"<\1h", re.sub(r' (style|class)="[^"]*"', "", html))

    assert strip(ours) == strip(theirs)
