"""PostgreSQL: the full-text document becomes a stored generated column (search_document) with the
GIN index on it, instead of an index on the expression. A search for common words matches most
entries, so PostgreSQL scans rather than using the index, and with only an expression index it
computed every entry's to_tsvector twice (to match and to rank): 148 s at 100,000 entries on a
loaded machine (docs/measurements-2026-12.md). Stored, neither the match nor the rank computes it.
The suggestions' match of the question alone gets an index of its own too (a word in no question
scanned every entry: 1.3 s at 100,000). SQLite keeps its FTS5 table (nothing changes there). Django's model does not know the column:
PostgreSQL fills it at every insert and update."""

from django.db import migrations

QUESTION = "to_tsvector('simple', question)"  # what the search box's suggestions match
DOCUMENT = "to_tsvector('simple', question || ' ' || answer || ' ' || report || ' ' || sources::text)"

FORWARD = [
    "DROP INDEX IF EXISTS search_entry_fts",
    f"ALTER TABLE search_entry ADD COLUMN search_document tsvector GENERATED ALWAYS AS ({DOCUMENT}) STORED",
    "CREATE INDEX search_entry_fts ON search_entry USING GIN (search_document)",
    f"CREATE INDEX search_entry_question_fts ON search_entry USING GIN ({QUESTION})",
]
BACKWARD = [
    "DROP INDEX IF EXISTS search_entry_question_fts",
    "DROP INDEX IF EXISTS search_entry_fts",
    "ALTER TABLE search_entry DROP COLUMN search_document",
    f"CREATE INDEX search_entry_fts ON search_entry USING GIN ({DOCUMENT})",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for sql in FORWARD:
            schema_editor.execute(sql)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for sql in BACKWARD:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("search", "0012_entry_user_model")]

    operations = [migrations.RunPython(forward, backward)]
