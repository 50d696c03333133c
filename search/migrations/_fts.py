"""SQLite's full-text table and its triggers as migrations 0018 and 0019 make them (a module the
migration loader skips: its name starts with "_"): the answer column indexes the answer, the
report and every string of the clarifications (0016), the title column the conversation's title."""

SOURCES = """(SELECT group_concat(coalesce(json_extract(value, '$.title'), '') || ' ' || coalesce(json_extract(value, '$.url'), ''), ' ')
             FROM json_each(CASE WHEN json_valid({0}.sources) THEN {0}.sources ELSE '[]' END))"""
ANSWER = (
    "{0}.answer || CASE WHEN {0}.report = '' THEN '' ELSE char(10) || {0}.report END"
    " || coalesce((SELECT char(10) || group_concat(value, ' ') FROM json_tree("
    "CASE WHEN json_valid({0}.clarifications) THEN {0}.clarifications ELSE '[]' END) WHERE type = 'text'), '')"
)
TOKENIZE = "tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'"
DROP_TRIGGERS = [
    "DROP TRIGGER IF EXISTS search_thread_title_fts",
    "DROP TRIGGER IF EXISTS search_entry_fts_insert",
    "DROP TRIGGER IF EXISTS search_entry_fts_update",
    "DROP TRIGGER IF EXISTS search_entry_fts_delete",
]


def _columns(with_title: bool) -> str:
    return "question, answer, sources, title" if with_title else "question, answer, sources"


def triggers(with_title: bool) -> list[str]:
    """The triggers that keep the FTS5 table in step with the entries (and, with the title
    column, with their conversations' titles)."""
    title = ", (SELECT title FROM search_thread WHERE id = new.thread_id)" if with_title else ""
    row = f"""INSERT INTO search_entry_fts(rowid, {_columns(with_title)})
            VALUES (new.id, new.question, {ANSWER.format("new")}, {SOURCES.format("new")}{title});"""  # noqa: S608 - constant SQL
    made = [
        *DROP_TRIGGERS,
        f"""CREATE TRIGGER search_entry_fts_insert AFTER INSERT ON search_entry BEGIN
        {row}
    END""",
        f"""CREATE TRIGGER search_entry_fts_update
    AFTER UPDATE OF question, answer, report, sources, status, clarifications
    ON search_entry WHEN new.status <> 'running' BEGIN
        DELETE FROM search_entry_fts WHERE rowid = old.id;
        {row}
    END""",  # noqa: S608 - constant SQL
        """CREATE TRIGGER search_entry_fts_delete AFTER DELETE ON search_entry BEGIN
        DELETE FROM search_entry_fts WHERE rowid = old.id;
    END""",
    ]
    if with_title:
        made.append(
            """CREATE TRIGGER search_thread_title_fts AFTER UPDATE OF title ON search_thread
    WHEN new.title IS NOT old.title BEGIN
        UPDATE search_entry_fts SET title = new.title
        WHERE rowid IN (SELECT id FROM search_entry WHERE thread_id = new.id);
    END"""
        )
    return made


def table(with_title: bool) -> list[str]:
    """The FTS5 table made again and filled from the entries, then its triggers."""
    columns = _columns(with_title)
    return [
        *DROP_TRIGGERS,
        "DROP TABLE IF EXISTS search_entry_fts",
        f"CREATE VIRTUAL TABLE search_entry_fts USING fts5({columns}, {TOKENIZE})",
        f"""INSERT INTO search_entry_fts(rowid, {columns})
        SELECT e.id, e.question, {ANSWER.format("e")}, {SOURCES.format("e")}{", t.title" if with_title else ""}
        FROM search_entry e JOIN search_thread t ON t.id = e.thread_id""",  # noqa: S608 - constant SQL
        *triggers(with_title),
    ]
