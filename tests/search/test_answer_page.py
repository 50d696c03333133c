"""The answer page's reading side (issue 21): citation chips, headings below the question, the
live tail never raw, Copy as Markdown, the Deep Research report reader, images while running,
and the pages' small promises (no-JS refresh, no entry before linking)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from search.live.fragments import AnswerStream, settled
from search.models import Entry, Thread
from search.render import render_answer, render_report, render_sources

pytestmark = pytest.mark.django_db
SOURCES = [
    {
        "title": "Bread - Wikipedia",
        "url": "https://en.wikipedia.org/wiki/Bread",
        "snippet": "Bread is a staple.",
    },
    {"title": "Salt", "url": "https://www.bbc.co.uk/food/salt", "snippet": ""},
    {"title": "", "url": "http://192.168.1.20:8080/page", "snippet": ""},
]


class _Visible(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text, self.depth = [], 0  # depth: spans open inside a card

    def handle_starttag(self, tag, attrs):
        if tag == "span" and (self.depth or ("class", "cite-card") in attrs):
            self.depth += 1

    def handle_endtag(self, tag):
        if tag == "span" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.text.append(data)


def visible(html: str) -> str:
    """The text a person sees: without tags and without the hidden source cards."""
    parser = _Visible()
    parser.feed(html)
    return "".join(parser.text)


def test_a_citation_is_a_chip_with_the_site_its_card_and_a_name_for_screen_readers():
    html = render_answer("Bread rises [1]. Salt too [2][3]. Unknown [9].", SOURCES)
    one = re.search(r'<a href="https://en.wikipedia.org/wiki/Bread"[^>]*>.*?</a>', html).group(0)
    assert 'class="cite"' in one and 'target="_blank"' in one and 'rel="noopener noreferrer nofollow"' in one
    assert 'aria-label="source 1: Bread - Wikipedia, en.wikipedia.org"' in one
    assert '<span class="cite-site">wikipedia</span>' in one
    assert '<span class="cite-title">Bread - Wikipedia</span>' in one and "Bread is a staple." in one
    # several together are one chip, as on Perplexity: the first site and "+1", linking the first,
    # its name naming each, and beside it (not inside: no link in a link) a card linking each;
    # an IP address stays whole; a number with no source stays text
    group = re.search(
        r'<span class="cite-group">(<a [^>]*>.*?</a>)<span class="cite-card">(.*?)</span></span>', html
    )
    chip, card = group.groups()
    assert chip.startswith('<a href="https://www.bbc.co.uk/food/salt" class="cite"')
    assert '<span class="cite-site">bbc</span><span class="cite-more">+1</span></a>' in chip
    assert 'aria-label="sources 2, 3: Salt, bbc.co.uk; 192.168.1.20"' in chip  # untitled: its host, once
    items = re.findall(r'<a href="([^"]+)" class="cite-item"[^>]*>(.*?)</a>', card)
    assert [url for url, _ in items] == ["https://www.bbc.co.uk/food/salt", "http://192.168.1.20:8080/page"]
    assert all('target="_blank"' in a for a in re.findall(r"<a [^>]*>", card))
    assert "Salt" in items[0][1] and "192.168.1.20" in items[1][1] and html.count('class="cite"') == 2
    assert "Unknown [9]." in visible(html)
    assert visible(html).strip() == "Bread rises wikipedia. Salt too bbc+1. Unknown [9]."


def test_answer_headings_sit_below_the_question_without_skipping_a_level():
    html = render_answer("# Top\n\n## Second\n\n###### Deep", [])
    assert "<h3>Top</h3>" in html and "<h4>Second</h4>" in html and "<h5>Deep</h5>" in html
    assert "<h1>" not in html and "<h2>" not in html
    # an answer that starts at `##` or `###` starts at h3 all the same (axe: heading-order)
    html = render_answer("### Intro\n\ntext\n\n##### Detail\n\n### Next\n\n# Big", [])
    assert re.findall(r"<(h\d)>", html) == ["h3", "h4", "h3", "h3"]


def test_bad_sources_stay_readable():
    many = [{"title": "x" * 2000, "url": f"https://s{n}.example/"} for n in range(60)]
    html = render_sources([{"title": "", "url": "https://xn--bcher-kva.example/"}, *many])
    assert "bücher" in html and "+57 more" in html and "x" * 301 not in html
    # an untitled source is named by its host once, in its chip and in the list
    shown = re.sub(r'="[^"]*"', "", html)  # the text, not the attributes (titles to hover)
    assert shown.count("bücher.example") == 1 and '<span class="host">bücher.example' not in html


@pytest.mark.parametrize(
    ("tail", "shown"),
    [
        ("| Ingredient | Grams |", ""),  # a table before its delimiter row is not one yet
        ("| a | b |\n|---|---|\n| Salt | 10 |\n| Yea", "| a | b |\n|---|---|\n| Salt | 10 |\n"),
        ("See the [King A", "See the "),
        ("See the [King](https://ex", "See the "),
        ("Cited [1]", "Cited [1]"),
        ("It is **very im", "It is **very im**"),
        ("Run `make te", "Run `make te`"),
        ("Ends with *", "Ends with "),
        ("```python\nx = [1", "```python\nx = [1"),
    ],
)
def test_the_live_tail_holds_back_what_would_show_as_raw_markdown(tail, shown):
    assert settled(tail) == shown


def test_a_streaming_answer_never_shows_raw_markdown():
    answer = (
        "Intro with a [link](https://a.example) and **bold** [1].\n\n"
        "| Item | Grams |\n|---|---:|\n| Flour | 500 |\n| Salt | 10 |\n\n"
        "The end, see [King Arthur](https://k.example)."
    )
    stream = AnswerStream(1)
    for i in range(1, len(answer) + 1):
        for fragment in stream.update(answer[:i], SOURCES):
            text = visible(fragment)
            assert "|" not in text and "[" not in text and "**" not in text, (i, text)
    final = "".join(stream.update(answer, SOURCES, final=True))
    assert "The end" in final or stream.shows(answer)


def test_render_report_gives_contents_ids_and_sanitized_html():
    report = "# Findings\n\nText <script>alert(1)</script>.\n\n## Details\n\n## Details\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    html, toc = render_report(report)
    assert toc == [
        {"level": 1, "text": "Findings", "id": "r-findings"},
        {"level": 2, "text": "Details", "id": "r-details"},
        {"level": 2, "text": "Details", "id": "r-details-2"},
    ]
    assert '<h4 id="r-findings">Findings</h4>' in html and '<h5 id="r-details-2">' in html
    assert "<script" not in html and "<table>" in html


def long_report(size: int) -> str:
    parts, n = [], 0
    while sum(map(len, parts)) < size:
        n += 1
        parts.append(f"## Part {n}\n\n" + "A long paragraph of findings [1]. " * 20 + "\n\n")
    return "# Report\n\n" + "".join(parts) + "| col | val |\n|---|---|\n| a | 1 |\n"


@pytest.fixture
def reported(owner):
    thread = Thread.objects.create(user=owner, title="Deep question")
    return Entry.objects.create(
        thread=thread, user=owner, question="Deep question", status="completed", answer="Cover note [1].",
        sources=SOURCES, report=long_report(15_000),
    )  # fmt: skip


def test_the_saved_page_shows_the_report_as_a_document(owner_client, reported):
    page = owner_client.get(reverse("search:thread", args=[reported.thread_id])).content.decode()
    assert f'id="entry-{reported.pk}-report"' in page and 'class="report-toc"' in page
    assert '<a href="#r-part-3">Part 3</a>' in page and 'id="r-part-3"' in page
    assert page.index("Cover note") < page.index('class="report-toc"')
    assert reverse("search:entry_report", args=[reported.pk]) in page


def test_an_entry_without_a_report_keeps_an_empty_element_for_live_updates(owner_client, reported):
    reported.report = ""
    reported.save()
    page = owner_client.get(reverse("search:thread", args=[reported.thread_id])).content.decode()
    assert f'<section id="entry-{reported.pk}-report" class="report-box"></section>' in page


def test_the_report_downloads_as_markdown_to_its_owner_only(owner_client, member, reported):
    from django.test import Client

    response = owner_client.get(reverse("search:entry_report", args=[reported.pk]))
    assert (
        response.status_code == 200 and response["Content-Disposition"] == 'attachment; filename="Report.md"'
    )
    assert response.content.decode().startswith(
        reported.report.strip() + "\n\n## Sources\n\n1. [Bread - Wikipedia]"
    )
    other = Client()
    other.force_login(member)
    assert other.get(reverse("search:entry_report", args=[reported.pk])).status_code == 404


def test_a_200_kb_report_renders(owner_client, reported):
    reported.report = long_report(200_000)
    reported.save()
    response = owner_client.get(reverse("search:thread", args=[reported.thread_id]))
    assert response.status_code == 200 and "Part 250" in response.content.decode()


def test_copy_gives_the_answer_as_markdown_with_footnotes_or_clean_text(owner_client, reported):
    reported.answer = "Bread rises [1] with **yeast** [2]. Not a source [7].\n\n| a |\n|---|\n| 1 |"
    reported.save()
    url = reverse("search:entry_markdown", args=[reported.pk])
    text = owner_client.get(url).content.decode()
    assert "Bread rises [^1] with **yeast** [^2]. Not a source [7]." in text
    assert "[^1]: [Bread - Wikipedia](https://en.wikipedia.org/wiki/Bread)" in text and "| a |" in text
    clean = owner_client.get(url + "?citations=0").content.decode()
    assert clean.startswith("Bread rises with **yeast**. Not a source [7].")


def test_a_running_entrys_image_is_served_once_its_file_is_there(owner_client, reported):
    from search import images

    reported.status = "running"
    reported.save()
    url = reverse("search:image", args=[reported.pk, 0])
    assert owner_client.get(url).status_code == 404  # still downloading
    folder = images.folder(reported.pk)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "0.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 20)
    assert owner_client.get(url).status_code == 200


@pytest.mark.django_db(transaction=True)  # the no-JS search view is async
def test_before_linking_the_home_page_says_so_and_a_search_writes_nothing(owner_client):
    page = owner_client.get(reverse("search:home")).content.decode()
    assert "link yours in Settings" in page and "<h1" in page
    response = owner_client.post(reverse("search:ask"), {"q": "hello"})
    assert "Link your Perplexity account in Settings first" in response.content.decode()
    assert not Entry.objects.exists()
    assert "hello" in response.content.decode()  # the question is still in the box


def test_a_too_long_question_is_refused_with_a_sentence_not_cut(owner_client):
    page = owner_client.get(reverse("search:home")).content.decode()
    assert 'maxlength="8000"' not in page and 'data-max="8000"' in page


@pytest.mark.parametrize(
    ("slug", "name"), [("gemini38flash", "Gemini 3.8 Flash"), ("gpt52", "GPT-5.2"), ("turbo", "Best")]
)
def test_an_answer_names_its_model_never_its_id(owner_client, reported, slug, name):
    reported.model = slug
    reported.save()
    page = owner_client.get(reverse("search:thread", args=[reported.thread_id])).content.decode()
    assert f"Answered by {name}" in page and f"({slug})" not in page and f"by {slug}" not in page


def test_copy_is_offered_only_for_an_answer_with_text(owner):
    from search.display import entry_html

    thread = Thread.objects.create(user=owner, title="t")
    failed = Entry.objects.create(
        thread=thread, question="q", status="failed", error="Perplexity answered with an error (500)."
    )
    answered = Entry.objects.create(thread=thread, question="q2", status="completed", answer="Bread rises.")
    html = entry_html(failed)
    assert "Perplexity answered with an error" in html and "Ask again" in html
    assert "data-copy" not in html
    assert html.count("data-copy") == 0 and entry_html(answered).count("data-copy") == 2
