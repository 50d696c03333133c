"""Full-text search over questions, answers and sources: FTS5 on SQLite (kept in sync by
triggers), a GIN expression index on PostgreSQL (see search/history.py for the queries).

SQLite drops a table's triggers when Django rebuilds it (most AlterField operations on Entry):
a later migration that does so must create them again.
"""

from django.db import migrations

SQLITE = [
    """CREATE VIRTUAL TABLE search_entry_fts USING fts5(
        question, answer, sources, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3')""",
    """CREATE TRIGGER search_entry_fts_insert AFTER INSERT ON search_entry BEGIN
        INSERT INTO search_entry_fts(rowid, question, answer, sources) VALUES (new.id, new.question, new.answer,
            (SELECT group_concat(coalesce(json_extract(value, '$.title'), '') || ' ' || coalesce(json_extract(value, '$.url'), ''), ' ')
             FROM json_each(CASE WHEN json_valid(new.sources) THEN new.sources ELSE '[]' END)));
    END""",
    """CREATE TRIGGER search_entry_fts_update AFTER UPDATE OF question, answer, sources ON search_entry BEGIN
        DELETE FROM search_entry_fts WHERE rowid = old.id;
        INSERT INTO search_entry_fts(rowid, question, answer, sources) VALUES (new.id, new.question, new.answer,
            (SELECT group_concat(coalesce(json_extract(value, '$.title'), '') || ' ' || coalesce(json_extract(value, '$.url'), ''), ' ')
             FROM json_each(CASE WHEN json_valid(new.sources) THEN new.sources ELSE '[]' END)));
    END""",
    """CREATE TRIGGER search_entry_fts_delete AFTER DELETE ON search_entry BEGIN
        DELETE FROM search_entry_fts WHERE rowid = old.id;
    END""",
    """INSERT INTO search_entry_fts(rowid, question, answer, sources)
        SELECT id, question, answer, sources FROM search_entry""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS search_entry_fts_insert",
    "DROP TRIGGER IF EXISTS search_entry_fts_update",
    "DROP TRIGGER IF EXISTS search_entry_fts_delete",
    "DROP TABLE IF EXISTS search_entry_fts",
]
POSTGRES = [
    """CREATE INDEX search_entry_fts ON search_entry USING GIN (
        to_tsvector('simple', question || ' ' || answer || ' ' || sources::text))""",
]
POSTGRES_REVERSE = ["DROP INDEX IF EXISTS search_entry_fts"]


def forward(apps, schema_editor):
    statements = {"sqlite": SQLITE, "postgresql": POSTGRES}.get(schema_editor.connection.vendor, [])
    for sql in statements:
        schema_editor.execute(sql)


def backward(apps, schema_editor):
    statements = {"sqlite": SQLITE_REVERSE, "postgresql": POSTGRES_REVERSE}.get(
        schema_editor.connection.vendor, []
    )
    for sql in statements:
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("search", "0002_entry_user")]
    operations = [migrations.RunPython(forward, backward)]
