"""History: the person's entries listed, searched, exported and imported.

Full-text search runs on SQLite's FTS5 table (kept in sync by triggers: migrations 0003, 0016)
or on PostgreSQL's stored document with its GIN index (0013, 0016). Each entry's document holds
its question, answer, report, sources and its conversation's title. What a person types is
turned into plain quoted words, so FTS syntax (`"`, `NEAR(`, `*`, `-`, parentheses) is just
text. The filters (dates, status, model, source site) narrow the matches before they are
ranked and paged, so every page of a filtered search is full.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from typing import NamedTuple

from django.db import connection
from django.db.models import QuerySet
from django.db.models.functions import Substr
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from search.models import Entry

MAX_QUERY = 500
PAGE = 50
MAX_PAGE = 200
CANDIDATES = 2000
START, STOP = "\x02", "\x03"
WORD = re.compile(r"\w+", re.UNICODE)
SITE_WORD = re.compile(r"[^\W_]+")  # a site name's words as FTS5's unicode61 splits them ("_" too)
HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?")  # a site name PostgreSQL's parser keeps whole
HEADLINE = f"StartSel={START}, StopSel={STOP}, MaxFragments=1, MaxWords=30, MinWords=10"
TITLE_HEADLINE = f"StartSel={START}, StopSel={STOP}, HighlightAll=true"
# Markdown's marks, in an excerpt of an answer (a piece of it: a mark may have lost its other half),
# each with the pieces an excerpt must hold for it to match (a regular expression costs ~10-40 µs an
# excerpt even where it finds nothing: 50 rows a page)
MARKS = [
    (re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)"), r"\1", ("[",)),  # [text](url) -> text
    (re.compile(r"[ \t]*\[\d{1,3}\]"), "", ("[",)),  # citations
    (re.compile(r"(?m)^[ \t|:-]*-{3,}[ \t|:-]*$"), "", ("---",)),  # rules, a table's header line
    (re.compile(r"(?m)^[ \t]*(?:#{1,6}|>|[-*+]|\d{1,3}[.)])[ \t]+"), "", ()),  # headings, quotes, list items
    # a table's rows: "| Water | 350 |" -> "Water · 350;" (cells and rows still told apart)
    (re.compile(r"(?m)[ \t]*\|[ \t]*$"), ";", ("|",)),
    (re.compile(r"(?m)^[ \t]*\|[ \t]*"), "", ("|",)),
    (re.compile(r"(?:[ \t]*\|)+[ \t]*"), " · ", ("|",)),
    (re.compile(r"\*\*|__|~~|`+|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)"), "", tuple("*_~`")),  # emphasis, code
]


# What a row shows (search/history/rows.py): loading no more is half the Python time of a page
SHOWN = (
    "thread_id",
    "thread__title",
    "thread__kept_from",
    "question",
    "status",
    "created",
    "origin",
    "asked_by",
    "model",
    "sources",
    "turn",
    "shown",
)  # fmt: skip (turn, shown: search/versions.py)


class QueryTooLong(Exception):
    message = f"That search is too long; use at most {MAX_QUERY} characters."


@dataclass
class Filters:
    text: str = ""
    after: date | None = None
    before: date | None = None
    status: str = ""
    models: tuple[str, ...] = ()  # model ids (those with one name go together)
    domain: str = ""


def words(text: str) -> list[str]:
    if len(text) > MAX_QUERY:
        raise QueryTooLong
    return WORD.findall(text.lower())[:20]


def fts5_query(text: str, prefix_last: bool = True) -> str:
    """Plain words as an FTS5 query: each one quoted (so nothing is syntax), all required."""
    terms = [f'"{w}"' for w in words(text)]
    if terms and prefix_last:
        terms[-1] += "*"
    return " ".join(terms)


def tsquery(text: str) -> str:
    """The same for PostgreSQL's to_tsquery: all the words, the last one as a prefix."""
    ws = words(text)
    return " & ".join([*ws[:-1], f"{ws[-1]}:*"])


def plain(excerpt: str) -> str:
    """An answer's excerpt as plain words: a list shows "Paris is the capital", not "**capital** [1]"."""
    for pattern, replacement, needs in MARKS:
        if not needs or any(piece in excerpt for piece in needs):
            excerpt = pattern.sub(replacement, excerpt)
    return " ".join(excerpt.split())  # runs of spaces and line ends as one space


def highlight(snippet: str) -> SafeString:
    """Our markers around matches -> <mark>; everything else escaped."""
    html = escape(snippet).replace(START, "<mark>").replace(STOP, "</mark>")
    return mark_safe(html)  # noqa: S308 - escaped above; only our own tags added


def entries_for(user) -> QuerySet[Entry]:
    return Entry.objects.filter(user=user)


MAX_MODELS = 200


def models_used(user) -> list[str]:
    """The model ids of the person's answers, each once (at most MAX_MODELS): one seek on the
    (user, model) index per model, not a scan of every answer (a DISTINCT read them all)."""
    found: list[str] = []
    ids = entries_for(user).order_by("model").values_list("model", flat=True)
    model = ids.first()
    while model is not None and len(found) < MAX_MODELS:
        if model:
            found.append(model)
        model = ids.filter(model__gt=model).first()
    return found


def day_bounds(filters: Filters) -> tuple[datetime | None, datetime | None]:
    """The From and To days as moments in the server's time zone: from the start of the first
    day up to (not including) the start of the day after the last."""
    zone = timezone.get_current_timezone()
    start = datetime.combine(filters.after, time.min, tzinfo=zone) if filters.after else None
    end = None
    if filters.before and filters.before < date.max:
        end = datetime.combine(filters.before + timedelta(days=1), time.min, tzinfo=zone)
    return start, end


def filtered(user, filters: Filters) -> QuerySet[Entry]:
    entries = entries_for(user)
    start, end = day_bounds(filters)
    if start:
        entries = entries.filter(created__gte=start)
    if end:
        entries = entries.filter(created__lt=end)
    if filters.status:
        entries = entries.filter(status=filters.status)
    if filters.models:
        entries = entries.filter(model__in=filters.models)
    if filters.domain:
        entries = entries.filter(sources__icontains=f"//{filters.domain}")
    return entries


def filter_sql(filters: Filters) -> tuple[str, dict]:
    """The same filters as `filtered`, as SQL conditions on `e` (search_entry) with named
    parameters, for the ranked searches below: " AND e.status = %(status)s ..."."""
    adapt = connection.ops.adapt_datetimefield_value
    start, end = day_bounds(filters)
    parts, params = [], {}
    if start:
        parts.append("e.created >= %(after)s")
        params["after"] = adapt(start)
    if end:
        parts.append("e.created < %(before)s")
        params["before"] = adapt(end)
    if filters.status:
        parts.append("e.status = %(status)s")
        params["status"] = filters.status
    if filters.models:
        names = [f"model{n}" for n in range(len(filters.models))]
        parts.append(f"e.model IN ({', '.join(f'%({name})s' for name in names)})")
        params.update(zip(names, filters.models, strict=True))
    if filters.domain:
        parts.append(SITE_LIKE[connection.vendor].format("e"))
        params["domain"] = site_pattern(filters.domain)
    return "".join(f" AND {part}" for part in parts), params


# a source site as `icontains` has it (filtered): a LIKE with its own wildcards escaped
SITE_LIKE = {
    "sqlite": "{}.sources LIKE %(domain)s ESCAPE '\\'",
    "postgresql": "UPPER({}.sources::text) LIKE UPPER(%(domain)s)",
}


def site_pattern(domain: str) -> str:
    escaped = domain.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%//{escaped}%"


def page(user, filters: Filters, before_id: int | None, size: int = PAGE) -> list[Entry]:
    """Newest first by when they were asked (an imported older answer takes its place in time);
    the next page starts after the last entry shown (a cursor, stable under inserts)."""
    entries = filtered(user, filters).select_related("thread").only(*SHOWN)
    entries = entries.annotate(preview=Substr("answer", 1, 240))
    if before_id:
        moment = entries_for(user).filter(pk=before_id).values_list("created", flat=True).first()
        # as a range on (user, created), which the index answers; the ties at that moment go by id
        entries = (
            entries.filter(created__lte=moment).exclude(created=moment, pk__gte=before_id)
            if moment
            else entries.filter(pk__lt=before_id)
        )
    rows = list(entries.order_by("-created", "-pk")[: max(1, min(size, MAX_PAGE))])
    for row in rows:
        row.preview = plain(row.preview or "")
    return rows


class Found(NamedTuple):
    """One search result: the entry and its highlighted question, answer excerpt and
    conversation title (our markers made into <mark>, everything else escaped)."""

    entry: Entry
    question: SafeString
    excerpt: SafeString
    title: SafeString


def search(user, filters: Filters, offset: int = 0, size: int = PAGE) -> list[Found]:
    """Best match first, then newest (by date: an imported library's entries are not stored in
    date order), among the entries the filters leave."""
    if not words(filters.text):
        return []
    size = max(1, min(size, MAX_PAGE))
    offset = max(0, min(offset, 100_000))
    match = _sqlite_match if connection.vendor == "sqlite" else _postgres_match
    ids = match(user, filters, offset, size)
    if not ids:
        return []
    # .order_by(): with Entry's default order SQLite walks the (user, created) index through every
    # entry of the person to avoid a sort, instead of finding these few by primary key (45 ms)
    found = entries_for(user).filter(pk__in=[row[0] for row in ids]).select_related("thread")
    rows = {e.pk: e for e in found.only(*SHOWN).order_by()}
    return [
        Found(rows[i], highlight(q), highlight(plain(a)), highlight(t)) for i, q, a, t in ids if i in rows
    ]


# Ranking every match of common words costs time in proportion to the history, so only the
# person's CANDIDATES newest matches by date (among those the filters leave) are ranked: the
# matches' rowids (FTS5 lists them without ranking them), walked through the (user, created)
# index newest first. By date, not by rowid: an imported library is stored in Perplexity's
# order, newest first. The rank is then read for those rows alone (`+rowid`: a filter, not a
# lookup; a rowid list given to FTS5 runs the MATCH once per row). Snippets are made for the
# page's rows alone, in a second statement.
SQLITE_RANKED = """
        WITH recent AS MATERIALIZED (
            SELECT e.id FROM search_entry e
            WHERE e.user_id = %(user)s
                AND e.id IN (SELECT rowid FROM search_entry_fts WHERE search_entry_fts MATCH %(terms)s)
                {filters}
            ORDER BY e.created DESC, e.id DESC LIMIT %(candidates)s)
        SELECT f.rowid FROM search_entry_fts f JOIN search_entry e ON e.id = f.rowid
        WHERE search_entry_fts MATCH %(terms)s
            AND f.rowid BETWEEN (SELECT min(id) FROM recent) AND (SELECT max(id) FROM recent)
            AND +f.rowid IN (SELECT id FROM recent)
        ORDER BY f.rank, e.created DESC, f.rowid DESC LIMIT %(size)s OFFSET %(offset)s"""
SQLITE_SNIPPETS = f"""
        SELECT rowid, snippet(search_entry_fts, 0, '{START}', '{STOP}', '…', 40),
               snippet(search_entry_fts, 1, '{START}', '{STOP}', '…', 32),
               highlight(search_entry_fts, 3, '{START}', '{STOP}')
        FROM search_entry_fts WHERE search_entry_fts MATCH %s
        AND rowid BETWEEN %s AND %s AND +rowid IN ({{marks}})"""  # noqa: S608 - placeholders only


def ranked(user, filters: Filters, offset: int = 0, size: int = PAGE) -> tuple[str, dict]:
    """The statement that ranks a page of matches on this database, and its parameters."""
    page = {"user": user.pk, "candidates": CANDIDATES, "size": size, "offset": offset}
    if connection.vendor == "sqlite":
        where, params = filter_sql(filters)
        return SQLITE_RANKED.format(filters=where), params | page | {"terms": _sqlite_terms(filters)}
    terms = tsquery(filters.text)
    page.update(terms=terms, match=terms, options=HEADLINE, whole=TITLE_HEADLINE)
    if not HOST.fullmatch(filters.domain):
        where, params = filter_sql(filters)
        return POSTGRES_RANKED.format(filters=where, exact=""), params | page
    # A source site: its host (or an address beginning with it) as a prefix in the text search
    # (PostgreSQL's parser keeps "https://piano.example/0" as 'piano.example' and
    # 'piano.example/0'), and the exact LIKE on the window of candidates that leaves. With the LIKE
    # in the window's own statement PostgreSQL guessed a few rows and read and sorted every entry
    # (3.4 s at 100,000); like this it walks the newest entries, as without a site.
    where, params = filter_sql(replace(filters, domain=""))
    page.update(match=f"{terms} & {filters.domain}:*", domain=site_pattern(filters.domain))
    exact = f"WHERE {SITE_LIKE['postgresql'].format('c')}"
    return POSTGRES_RANKED.format(filters=where, exact=exact), params | page


def _sqlite_terms(filters: Filters) -> str:
    """The FTS5 query: the typed words, and with a source site, the site's words as a phrase in
    the sources column ("bbc.co.uk": "bbc co uk", as the tokenizer splits www.bbc.co.uk), so
    FTS5 lists only entries that can cite it; the LIKE of filter_sql then keeps the exact ones
    (walking every entry to test the LIKE on each cost 60 ms at 100,000)."""
    terms = fts5_query(filters.text)
    site = " ".join(SITE_WORD.findall(filters.domain.lower()))
    return f'({terms}) AND sources : "{site}"' if site else terms


def _sqlite_match(user, filters: Filters, offset: int, size: int) -> list[tuple[int, str, str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(*ranked(user, filters, offset, size))
        ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            return []
        marks = ", ".join(["%s"] * len(ids))
        params = [fts5_query(filters.text), min(ids), max(ids), *ids]
        cursor.execute(SQLITE_SNIPPETS.format(marks=marks), params)
        snippets = {row[0]: row for row in cursor.fetchall()}
    return [snippets[i] for i in ids if i in snippets]


# As on SQLite, only the CANDIDATES newest matches by date are ranked; the document is the stored
# search_document column (migrations 0013, 0016), so neither the match nor the rank recomputes
# it, and only the page's rows get headlines.
POSTGRES_RANKED = """
        WITH candidates AS (
            SELECT e.id, e.created, e.search_document, e.sources FROM search_entry e
            WHERE e.user_id = %(user)s AND e.search_document @@ to_tsquery('simple', %(match)s){filters}
            ORDER BY e.created DESC, e.id DESC LIMIT %(candidates)s),
        ranked AS (
            SELECT c.id, c.created, ts_rank(c.search_document, to_tsquery('simple', %(terms)s)) AS rank
            FROM candidates c {exact}
            ORDER BY rank DESC, c.created DESC, c.id DESC LIMIT %(size)s OFFSET %(offset)s)
        SELECT e.id,
               ts_headline('simple', e.question, to_tsquery('simple', %(terms)s), %(options)s),
               ts_headline('simple', left(e.answer, 20000), to_tsquery('simple', %(terms)s), %(options)s),
               ts_headline('simple', e.thread_title, to_tsquery('simple', %(terms)s), %(whole)s)
        FROM ranked r JOIN search_entry e ON e.id = r.id
        ORDER BY r.rank DESC, r.created DESC, r.id DESC"""


def _postgres_match(user, filters: Filters, offset: int, size: int) -> list[tuple[int, str, str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(*ranked(user, filters, offset, size))
        return cursor.fetchall()


def _postgres_suggestions(user, text: str, limit: int) -> list[int]:
    # PostgreSQL cannot tell a word in no question from a common one, and for a few results it
    # walks the entries newest first: a rare word then reads them all (1.3 s at 100,000). So the
    # newest CANDIDATES entries (by date) are looked at first, and only when they hold too few
    # matches is the question index asked (rare words: few matches, a quick bitmap).
    params = {"user": user.pk, "terms": tsquery(text), "limit": limit}
    match = "e.status = 'completed' AND to_tsvector('simple', e.question) @@ to_tsquery('simple', %(terms)s)"
    newest = f"""SELECT e.id FROM (SELECT id, created, status, question FROM search_entry
                                   WHERE user_id = %(user)s
                                   ORDER BY created DESC, id DESC LIMIT {CANDIDATES}) e
                 WHERE {match} ORDER BY e.created DESC, e.id DESC LIMIT %(limit)s"""  # noqa: S608 - constants
    indexed = f"""WITH found AS MATERIALIZED (
                      SELECT e.id, e.created FROM search_entry e WHERE e.user_id = %(user)s AND {match})
                  SELECT id FROM found ORDER BY created DESC, id DESC LIMIT %(limit)s"""  # noqa: S608 - constants
    with connection.cursor() as cursor:
        cursor.execute(newest, params)
        ids = [row[0] for row in cursor.fetchall()]
        if len(ids) < limit:
            cursor.execute(indexed, params)
            ids = [row[0] for row in cursor.fetchall()]
    return ids


REPEATS = 8  # matches read per suggestion shown: one question asked several times shows once


def same_question(question: str) -> str:
    """What makes two questions one suggestion: their words, whatever the case, spacing and
    closing punctuation ("What is rye?" asked three times, once as "what is rye")."""
    return " ".join(question.casefold().split()).rstrip(" ?.!")


def suggestions(user, text: str, limit: int = 3) -> list[Entry]:
    """Up to `limit` past questions matching what is being typed (no Perplexity search spent),
    newest first, each question once (its newest answer)."""
    if not words(text) or len(text.strip()) < 3:
        return []
    read = limit * REPEATS
    if connection.vendor == "sqlite":
        # newest by date, through the (user, created) index (an imported library is stored newest first)
        sql = """SELECT e.id FROM search_entry e WHERE e.user_id = %s AND e.status = 'completed'
                 AND e.id IN (SELECT rowid FROM search_entry_fts WHERE search_entry_fts MATCH %s)
                 ORDER BY e.created DESC, e.id DESC LIMIT %s"""
        with connection.cursor() as cursor:
            cursor.execute(sql, [user.pk, f"question : ({fts5_query(text)})", read])
            ids = [row[0] for row in cursor.fetchall()]
    else:
        ids = _postgres_suggestions(user, text, read)
    chosen = entries_for(user).filter(pk__in=ids).order_by()  # (no default order: see search())
    found = {e.pk: e for e in chosen.only("pk", "question", "created", "thread_id")}
    shown: dict[str, Entry] = {}
    for entry in (found[i] for i in ids if i in found):
        shown.setdefault(same_question(entry.question), entry)
        if len(shown) == limit:
            break
    return list(shown.values())
