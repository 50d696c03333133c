"""Math in answers (issue 42): MathML made on the server, through the one sanitizer; prices stay
text; bad LaTeX shows as LaTeX; Copy and the exports keep the LaTeX."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.citations import as_footnotes, without
from search.latex import LATEX_MAX
from search.render import render_answer
from tests.search.test_render import SOURCES, problems

# a real deep research answer's block: `=` and `-` lines inside made a setext h1 and h2 of it
OCIO = r"""The fee works out as follows:

$$
\text{OCIO fee} = \text{AUM} \times r
=
\$500\text{M} \times 0.35\%
-
\text{rebate}
$$

That is the total."""


def test_a_display_block_with_equals_and_dash_lines_is_one_formula_not_headings():
    html = render_answer(OCIO)
    assert "<h" not in html and "<hr" not in html and "$$" not in html
    assert html.count('<math display="block">') == 1
    assert "<mtext>OCIO\xa0fee</mtext>" in html or "OCIO&nbsp;fee" in html
    assert "The fee works out as follows:" in html and "That is the total." in html


@pytest.mark.parametrize(
    ("markdown", "display"),
    [
        ("$$x^2$$", "block"),
        ("\\[\n\\frac{a}{b}\n\\]", "block"),
        ("where $$E = mc^2$$ holds", "block"),
        ("the rate \\(r = a/b\\) here", "inline"),
        ("the mean $\\bar{x}$ is", "inline"),
        ("> quoted\n>\n> $$\n> a + b\n> $$", "block"),
        ("- item\n\n  $$\n  y = 1\n  $$", "block"),
    ],
)
def test_math_is_mathml(markdown, display):
    html = render_answer(markdown)
    assert f'<math display="{display}">' in html, html
    assert "$" not in html.replace("$$", "") or "\\(" not in html


@pytest.mark.parametrize(
    "text",
    [
        "It costs $5 and $10 a month.",
        "From $5-$10.",
        "Between $5 and 10$ per unit.",
        "US$5 or $6, and $7.",
        "A $5 bill; they spent $x$ later",  # the first `$` pairs with no closer: text; `$x$` is math
        "Save $1,000 or more this year and $2,000 next",
        "Costs $5 (or 3$).",
    ],
)
def test_prices_stay_text(text):
    html = render_answer(text)
    assert "<math" not in html or "$x$" in text
    plain = re.sub(r"<math.*?</math>", "", html)
    for amount in re.findall(r"\$[\d,]+", text):
        assert amount in plain


def test_bad_math_shows_its_latex_as_code_and_loses_nothing():
    never_closed = render_answer("$$\nx = 1\n\nmore text after")
    assert "$$" in never_closed and "x = 1" in never_closed and "more text after" in never_closed
    assert "<math" not in never_closed
    long = "$$" + "x+" * (LATEX_MAX // 2 + 10) + "x$$"
    html = render_answer(long)
    assert html.startswith('<pre class="math-source"><code>$$x+x+') and "<math" not in html
    raising = render_answer("$$a^b^c$$")  # latex2mathml: DoubleSuperscriptsError
    assert raising.strip() == '<pre class="math-source"><code>$$a^b^c$$</code></pre>'
    inline = render_answer("see \\(a^b^c\\) here")
    assert "<code>\\(a^b^c\\)</code>" in inline


@pytest.mark.parametrize(
    "latex",
    [
        "\\text{<script>alert(1)</script>}",
        "\\text{<img src=x onerror=alert(1)>}",
        "<b>bold</b> x",
        "\\href{javascript:alert(1)}{x}",
        "\\style{color:red}{x}",
        "x \\text{</math><img src=x onerror=alert(1)>}",
    ],
)
def test_html_inside_math_is_never_markup(latex):
    for wrapped in (f"$${latex}$$", f"\\({latex}\\)"):
        html = render_answer(wrapped, SOURCES)
        assert problems(html) == [], html
        assert "<script" not in html and "<img" not in html and "<b>" not in html
        assert "href" not in html and "style" not in html


LATEX_PIECES = [
    "\\frac{", "}", "{", "\\text{", "<", ">", "&", "\\", "^", "_", "x", "\\sqrt[", "]", "\\left(",
    "\\right)", "\\begin{matrix}", "\\end{matrix}", "&&", "\\\\", "$", "\\href{", "javascript:",
    "<script>", '"', "'", " ", "\n", "\\color{red}", "\\mathbb{R}", "%",
]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(LATEX_PIECES), max_size=14).map("".join),
    st.sampled_from(["$${}$$", "\\[{}\\]", "\\({}\\)", "${}$", "$$\n{}\n$$"]),
)
def test_any_latex_renders_to_allowed_mathml_or_code(latex, form):
    html = render_answer(form.replace("{}", latex), SOURCES)
    assert problems(html) == [], html  # every tag in the allow-list (MATH_TAGS among them)
    assert "<script" not in html and 'href="javascript' not in html


def test_copy_and_exports_keep_latex_and_code_as_they_are():
    text = "Root \\(\\sqrt[3]{x}\\) and $$a[2]$$ and `b[1]` cited [1][2].\n\n```\nc[3]\n```\n\nEnd [3]."
    assert as_footnotes(text, 3) == (
        "Root \\(\\sqrt[3]{x}\\) and $$a[2]$$ and `b[1]` cited [^1][^2].\n\n```\nc[3]\n```\n\nEnd [^3]."
    )
    assert (
        without(text, 3) == "Root \\(\\sqrt[3]{x}\\) and $$a[2]$$ and `b[1]` cited.\n\n```\nc[3]\n```\n\nEnd."
    )
    # a price is no math: the citation after it is a footnote all the same
    assert as_footnotes("Costs $5 [1] and $10 [2].", 2) == "Costs $5 [^1] and $10 [^2]."


def test_the_live_tail_holds_back_a_formula_until_it_closes():
    from search.live.fragments import AnswerStream, settled

    assert settled("Intro.\n\n$$\n\\text{fee}\n=") == "Intro."
    assert settled("the rate \\(r = a") == "the rate "
    assert settled("it costs $5") == "it costs $5"
    assert settled("the mean $\\bar{x") == "the mean "
    stream, text, sent = AnswerStream(1), "", []
    for chunk in ["Intro.\n\n", "$$\n", "\\text{fee}\n", "=\n", "- 5\n", "$$\n\n", "After."]:
        text += chunk
        sent += stream.update(text, [])
    sent += stream.update(text, [], final=True)
    joined = "".join(sent)
    assert "<h" not in joined and "$$" not in joined and "\\text" not in joined
    # whole each time: in the tail once it closed (unless the tail's renders were spaced out),
    # then as its block
    assert 1 <= joined.count('<math display="block">') <= 2
    assert all("<mn>5</mn>" in part for part in sent if "<math" in part)
