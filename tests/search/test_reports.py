"""Reports people keep (issue 42): Copy report and Download carry the numbered sources the
report's [n] refer to (the run's terminal source list, docs/protocol.md §6.4, §8.1) in a file named
after the report's title; the clarifying questions and what became of them are kept with the
entry (live, on the page, in history search, the exports and an import); a report with 500
citations keeps its page light and its sources list whole."""

from __future__ import annotations

import asyncio
import io
import json
import re
import zipfile

import pytest
from django.urls import reverse

from search.clarifications import shaped
from search.models import Entry, Thread
from search.reports import report_filename, report_markdown
from tests.fake_perplexity import streams_2026 as s26
from tests.search.conftest import HeldAt, Paced, serve
from tests.search.test_consumer import ask, connect, receive_until

pytestmark = pytest.mark.django_db
ITEM = re.compile(r"^(\d+)\. \[(.*)\]\((\S+)\)$", re.M)
CLARIFIED = [
    {
        "key": "tool-1",
        "title": "One definition will change the comparison",
        "questions": [
            {
                "question": "Which region matters most?",
                "options": ["Europe", "Patagonia"],
                "answer": "Patagonia",
            },
            {"question": "Preferred output format?", "options": [], "answer": ""},
        ],
        "outcome": "answered",
    }
]


@pytest.mark.django_db(transaction=True)
async def test_copy_report_numbers_the_sources_as_the_runs_final_list_does(
    owner, alinked, upstream, async_client
):
    """The terminal frame's source list (its FINAL step's web_results) is the one the numbers
    count, even when the streamed list had them in another order (§7.5): here reversed."""
    events = s26.research_events(s26.report_text(3_000), replaces=3)
    final = list(reversed(s26.SOURCES))
    steps = json.loads(events[-1]["text"])
    steps[-1]["content"]["answer"] = json.dumps({"answer": "".join(s26.COVER), "web_results": final})
    events[-1]["text"] = json.dumps(steps)
    serve(upstream, Paced(events, pause=0.005))
    await ask(owner, {"q": "nowcasting APIs", "mode": "research"}, "status-completed", timeout=20)
    entry = await Entry.objects.aget()
    await async_client.aforce_login(owner)
    response = await async_client.get(reverse("search:entry_report", args=[entry.pk]))
    text = response.content.decode()
    assert response["Content-Disposition"] == 'attachment; filename="Weather nowcasting APIs compared.md"'
    listed = {int(n): url for n, _, url in ITEM.findall(text.split("\n## Sources\n")[1])}
    assert listed == {
        n: s["url"].replace("(", "%28").replace(")", "%29") for n, s in enumerate(final, start=1)
    }
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", text.split("\n## Sources\n")[0])}
    assert cited == {1, 2, 3} and cited <= set(listed)  # each [n] names an item of the list
    assert (
        listed[3] == "https://en.wikipedia.org/wiki/Nowcasting_%28meteorology%29"
    )  # a ")" would end the link


def test_the_sources_list_is_markdown_that_stays_whole():
    sources = [
        {"title": "A [bracketed] title\nover lines", "url": "https://a.example/x y(1)"},
        {"title": "", "url": "https://b.example/"},
        {"title": "No link", "url": "javascript:alert(1)"},
        "junk",
    ]
    text = report_markdown("# T\n\nOne [1], two [2], three [3], four [4].\n\n", sources)
    assert text.endswith(
        "\n\n## Sources\n\n1. [A \\[bracketed\\] title over lines](https://a.example/x%20y%281%29)\n"
        "2. [https://b.example/](https://b.example/)\n3. No link\n4. Source 4\n"
    )
    assert report_markdown("# T\n\nNo sources.", []) == "# T\n\nNo sources.\n"


@pytest.mark.parametrize(
    ("report", "question", "name"),
    [
        ("# Weather nowcasting APIs compared\n\n## Summary", "q", "Weather nowcasting APIs compared.md"),
        ("Intro line\n\n# **Bold** and `code` [1]: a/b \\ c?\n", "q", "Bold and code a b c.md"),
        ("## Only second level\n\ntext", "What is 2/3?", "What is 2 3.md"),
        ("# CON\n", "q", "Report CON.md"),
        ("# lpt1.txt\n", "q", "Report lpt1.txt.md"),
        ("# ...\n", "", "Report.md"),
        ("# Über \u202edie\u0000 Brücke. \n", "q", "Über die Brücke.md"),
        ("# " + "é" * 300, "q", "é" * 75 + ".md"),  # 150 bytes of UTF-8
        ("#\tTabbed title #\n", "q", "Tabbed title.md"),
    ],
)
def test_a_report_file_is_named_after_its_title_safely_for_every_system(report, question, name):
    assert report_filename(report, question) == name


def test_a_non_ascii_name_goes_in_the_header_as_utf8(owner_client, owner):
    thread = Thread.objects.create(user=owner, title="t")
    entry = Entry.objects.create(thread=thread, question="q", report="# Crème brûlée, explained\n\nx")
    response = owner_client.get(reverse("search:entry_report", args=[entry.pk]))
    assert (
        response["Content-Disposition"]
        == "attachment; filename*=utf-8''Cr%C3%A8me%20br%C3%BBl%C3%A9e%2C%20explained.md"
    )


def test_a_report_with_500_citations_keeps_its_page_light_and_its_list_whole(owner_client, owner):
    sources = [
        {"title": f"Study {n}", "url": f"https://site{n}.example/paper/{n}", "snippet": f"Finding {n}. " * 20}
        for n in range(1, 501)
    ]
    report = "# Five hundred findings\n\n" + "".join(f"Finding {n} holds [{n}].\n\n" for n in range(1, 501))
    thread = Thread.objects.create(user=owner, title="t")
    entry = Entry.objects.create(
        thread=thread, question="q", status="completed", answer="Cover [1].", sources=sources, report=report
    )
    page = owner_client.get(reverse("search:thread", args=[thread.pk])).content.decode()
    body = page[page.index('class="report-body') : page.index(f'id="entry-{entry.pk}-meta"')]
    assert body.count('class="cite"') == 500 and "cite-card" not in body
    plain = re.sub(r"<[^>]+>", "", body)
    print(f"500 citations: report {len(body)} bytes of HTML for {len(plain)} of text; page {len(page)} bytes")
    assert len(body) - len(plain) < 500 * 70  # each chip costs under 70 bytes (was about 600 with its card)
    assert len(page) < 350_000  # the sources list with their snippets is most of it, once
    text = owner_client.get(reverse("search:entry_report", args=[entry.pk])).content.decode()
    listed = ITEM.findall(text.split("\n## Sources\n")[1])
    assert [int(n) for n, _, _ in listed] == list(range(1, 501))
    assert listed[499] == ("500", "Study 500", "https://site500.example/paper/500")


# --- clarifying questions ------------------------------------------------------------------------


def _held_question_events():
    events = s26.research_events(s26.report_text(1_000), replaces=3, question=s26.QUESTIONS)
    held = events.index(next(e for e in events if "RESEARCH_CLARIFYING_QUESTIONS" in json.dumps(e)))
    return events, held


@pytest.mark.django_db(transaction=True)
async def test_skipped_questions_are_kept_as_skipped(owner, alinked, upstream):
    events, held = _held_question_events()
    skipped = asyncio.Event()
    serve(upstream, HeldAt(events, held, skipped))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "nowcasting", "mode": "research"}))
    await receive_until(comm, "clarify-form")
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "clarify", "entry": str(entry.pk), "skip": "1"}))
    messages = await receive_until(comm, 'details class="clarified')
    skipped.set()
    await receive_until(comm, "status-completed", 10)
    await comm.disconnect()
    assert "before researching · skipped" in messages[-1]
    await entry.arefresh_from_db()
    [record] = entry.clarifications
    assert record["outcome"] == "skipped" and [q["answer"] for q in record["questions"]] == ["", ""]
    assert record["questions"][0]["question"] == s26.QUESTION["question_text"]
    assert record["questions"][1]["options"] == ["Report (Recommended)", "Spreadsheet"]


@pytest.mark.django_db(transaction=True)
async def test_questions_nobody_answers_are_kept_as_gone_on_by_itself(owner, alinked, upstream):
    events, _ = _held_question_events()
    serve(upstream, Paced(events, pause=0.2))  # a page shows it (a real run waits 60 s), then it goes on
    messages = await ask(owner, {"q": "nowcasting", "mode": "research"}, "status-completed", timeout=20)
    entry = await Entry.objects.aget()
    [record] = entry.clarifications
    assert record["outcome"] == "auto" and record["title"] == "One definition will change the comparison"
    assert any("the research went on by itself" in m for m in messages)


def test_the_saved_page_folds_them_under_the_question(owner_client, owner):
    thread = Thread.objects.create(user=owner, title="t")
    entry = Entry.objects.create(
        thread=thread, question="Fees of OCIOs?", status="completed", answer="x", clarifications=CLARIFIED
    )
    page = owner_client.get(reverse("search:thread", args=[thread.pk])).content.decode()
    folded = page[page.index(f'id="entry-{entry.pk}-question"') :]
    assert page.index("Fees of OCIOs?</h2>") < page.index(f'id="entry-{entry.pk}-question"')
    assert page.index(f'id="entry-{entry.pk}-question"') < page.index(f'id="entry-{entry.pk}-sources"')
    assert (
        '<details class="clarified small" data-outcome="answered"><summary>Perplexity asked 2 questions before researching · answered'
        in folded
    )
    assert "<dt>Which region matters most?</dt><dd>Patagonia" in folded
    assert '<dt>Preferred output format?</dt><dd><span class="muted">left open</span>' in folded


def test_they_are_found_exported_and_imported_back(owner, member):
    from search.history import export, imports
    from search.history import query as history

    thread = Thread.objects.create(user=owner, title="fees")
    entry = Entry.objects.create(
        thread=thread, question="Fees of OCIOs?", status="completed", answer="x", clarifications=CLARIFIED
    )
    assert [found.entry.pk for found in history.search(owner, history.Filters(text="patagonia"))] == [
        entry.pk
    ]
    markdown = export.thread_markdown(thread)
    assert (
        "**Perplexity asked before researching: One definition will change the comparison** (answered)\n\n"
        "- Which region matters most? — Patagonia\n- Preferred output format?\n"
    ) in markdown
    raw = zipfile.ZipFile(io.BytesIO(b"".join(export.history_zip(owner)))).read("history.json")
    assert imports.import_history(member, raw) == (1, 0)
    copy = Entry.objects.get(user=member)
    assert copy.clarifications == CLARIFIED
    assert [found.entry.pk for found in history.search(member, history.Filters(text="patagonia"))] == [
        copy.pk
    ]


def test_an_import_keeps_only_what_clarifications_can_be():
    hostile = [
        {"questions": [{"question": "Q" * 5000, "options": ["o"] * 50 + [3], "answer": ["not text"]}],
         "outcome": "waiting", "title": {"x": 1}},
        {"questions": "not a list"},
        {"questions": [{"question": "  "}]},
        "junk",
        *({"questions": [{"question": f"q{n}"}], "outcome": "skipped"} for n in range(10)),
    ]  # fmt: skip
    kept = shaped(hostile)
    assert len(kept) == 2  # only the first five items are read: two of them have a question
    first = kept[0]
    assert first["outcome"] == "auto" and first["title"] == ""  # a run imported as waiting has ended
    assert len(first["questions"][0]["question"]) == 2000 and first["questions"][0]["answer"] == ""
    assert first["questions"][0]["options"] == ["o"] * 10
    assert shaped("junk") == [] and shaped(None) == []


def test_a_reports_chips_are_light_and_its_in_page_links_stay_in_the_page():
    """The sanitizer's output as the light chips leave it: if nh3 ever writes the attributes in
    another order, this fails rather than a chip opening the page again in a new tab."""
    from search.render import render_report
    from tests.search.test_answer_page import SOURCES

    html, _ = render_report(
        "Salt [2][3]. Bread [1], see [x](#r-a) and [y](https://a.example/).", SOURCES, "s5-"
    )
    assert html == (
        '<p>Salt <a href="#s5-2" class="cite" data-cite="2 3">bbc<span class="cite-more">+1</span></a>. '
        'Bread <a href="#s5-1" class="cite">wikipedia</a>, see <a href="#r-a">x</a> and '
        '<a href="https://a.example/" target="_blank" rel="noopener noreferrer nofollow">y</a>.</p>\n'
    )
    full, _ = render_report("Bread [1].", SOURCES)  # without `refs` (replay_stream): an answer's chips
    assert 'class="cite-card"' in full and 'href="https://en.wikipedia.org/wiki/Bread"' in full


def test_a_stored_research_turns_clarifying_steps_come_with_an_import():
    """A library turn (docs/protocol.md §11.5) read as a live answer is: its clarifying steps,
    one let be (`answers: []` to the end, §8.4) and one answered elsewhere (the answer call's
    pairs; plain strings in the questions' order are read too)."""
    from pplxweb.perplexity.library import parse_turn
    from search.clarifications import record

    def step(uuid, answers):
        return {"step_type": "RESEARCH_CLARIFYING_QUESTIONS", "uuid": f"e-{uuid}", "content": {
            "uuid": uuid, "title": "", "answers": answers, "questions": [
                {"question_text": "Region?", "options": ["EU", "US"]}, {"question_text": "Format?"}]}}  # fmt: skip

    text = [
        {"step_type": "INITIAL_QUERY", "content": {"query": "fees"}},
        step("t-1", []),
        step("t-2", [{"question": "Format?", "answer": "Slides"}, {"question": "Region?", "answer": "EU"}]),
        step("t-3", ["US"]),
        step("t-1", []),  # the same step in another list: once
        {"step_type": "FINAL", "content": {"answer": json.dumps({"answer": "Cover.", "web_results": []})}},
    ]
    raw = {"backend_uuid": "b", "query_str": "fees", "status": "COMPLETED", "search_mode": "RESEARCH",
           "text": json.dumps(text)}  # fmt: skip
    kept = [record(a.question, a.answers) for a in parse_turn(raw).clarifying]
    assert [(r["key"], r["outcome"], [q["answer"] for q in r["questions"]]) for r in kept] == [
        ("t-1", "auto", ["", ""]),
        ("t-2", "answered", ["EU", "Slides"]),
        ("t-3", "answered", ["US", ""]),
    ]
    assert kept[0]["questions"][0] == {"question": "Region?", "options": ["EU", "US"], "answer": ""}
