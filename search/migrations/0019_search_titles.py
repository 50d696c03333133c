"""Conversation titles join full-text search: an imported thread titled "Comparing the best
hiking boots" is found by "hiking boots" even where none of its questions says so. Each entry's
document holds its conversation's title (search/history/query.py ranks entries, so a title's
words count for every turn of the conversation, together with the turn's own words).

SQLite: the FTS5 table gets a fourth column, `title` (FTS5 cannot add a column: the table is
made again and filled from the entries), filled by the entry triggers and kept up to date by a
trigger on the thread table when a conversation is renamed (a library sync renames them).
SQLite drops a table's triggers when Django rebuilds it (most AlterField operations): a later
migration that rebuilds search_entry or search_thread must create them again
(tests/search/test_history.py checks that they are all there).

PostgreSQL: a generated column cannot read another table, so search_entry gets a column of its
own, thread_title (unknown to Django's model), filled by a trigger when an entry is written and
by one on the thread table when a conversation is renamed; the stored document (0013) is made
again with it.
"""

from django.db import migrations

from search.migrations._fts import table


def document(title: bool) -> str:
    """The stored document: 0016's (the clarifications' strings in it), with the title or not."""
    extra = " || ' ' || thread_title" if title else ""
    text = f"question || ' ' || answer || ' ' || report || ' ' || sources::text{extra}"
    return f"to_tsvector('simple', {text}) || jsonb_to_tsvector('simple', clarifications, '[\"string\"]')"


def pg_document(title: bool) -> list[str]:
    return [
        "DROP INDEX IF EXISTS search_entry_fts",
        "ALTER TABLE search_entry DROP COLUMN search_document",
        f"ALTER TABLE search_entry ADD COLUMN search_document tsvector GENERATED ALWAYS AS ({document(title)}) STORED",
        "CREATE INDEX search_entry_fts ON search_entry USING GIN (search_document)",
    ]


POSTGRES = [
    "ALTER TABLE search_entry ADD COLUMN thread_title text NOT NULL DEFAULT ''",
    "UPDATE search_entry e SET thread_title = t.title FROM search_thread t WHERE t.id = e.thread_id",
    """CREATE FUNCTION search_entry_thread_title() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.thread_title := coalesce((SELECT title FROM search_thread WHERE id = NEW.thread_id), '');
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER search_entry_thread_title BEFORE INSERT OR UPDATE OF thread_id ON search_entry
    FOR EACH ROW EXECUTE FUNCTION search_entry_thread_title()""",
    """CREATE FUNCTION search_thread_title_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE search_entry SET thread_title = NEW.title WHERE thread_id = NEW.id;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER search_thread_title_changed AFTER UPDATE OF title ON search_thread
    FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title) EXECUTE FUNCTION search_thread_title_changed()""",
    *pg_document(title=True),
]
POSTGRES_REVERSE = [
    *pg_document(title=False),
    "DROP TRIGGER IF EXISTS search_thread_title_changed ON search_thread",
    "DROP TRIGGER IF EXISTS search_entry_thread_title ON search_entry",
    "DROP FUNCTION IF EXISTS search_thread_title_changed()",
    "DROP FUNCTION IF EXISTS search_entry_thread_title()",
    "ALTER TABLE search_entry DROP COLUMN thread_title",
]


def run(sqlite: list[str], postgres: list[str]):
    def apply(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for sql in {"sqlite": sqlite, "postgresql": postgres}.get(vendor, []):
            schema_editor.execute(sql)

    return apply


class Migration(migrations.Migration):
    dependencies = [("search", "0018_thread_kept_from_entry_import_job")]

    operations = [
        migrations.RunPython(
            run(table(with_title=True), POSTGRES),
            run(table(with_title=False), POSTGRES_REVERSE),
        )
    ]
