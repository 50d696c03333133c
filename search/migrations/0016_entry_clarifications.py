"""Entry.clarifications: a research run's clarifying questions and what became of them (answered,
skipped, went on by itself; search/live/questions.py, docs/protocol.md §8.4). History search finds
their words.

On SQLite the column is added in place (a rebuild would drop the full-text triggers, see 0007) and
the FTS5 table's answer column indexes the answer, the report and every string of the
clarifications together. On PostgreSQL the stored search_document (0013) is made again with the
clarifications' strings in it (jsonb_to_tsvector: their values, not the JSON's keys).
"""

from importlib import import_module

from django.db import migrations, models

earlier = import_module("search.migrations.0007_entry_report")  # its triggers, with one column more

REPORT = "new.answer || CASE WHEN new.report = '' THEN '' ELSE char(10) || new.report END"
CLARIFIED = (
    " || coalesce((SELECT char(10) || group_concat(value, ' ') FROM json_tree("
    "CASE WHEN json_valid(new.clarifications) THEN new.clarifications ELSE '[]' END) WHERE type = 'text'), '')"
)
WITH = earlier.triggers(REPORT + CLARIFIED, "question, answer, report, sources, status, clarifications")
WITHOUT = earlier.triggers(REPORT, "question, answer, report, sources, status")

DOCUMENT = "to_tsvector('simple', question || ' ' || answer || ' ' || report || ' ' || sources::text)"
PG_WITH = f"{DOCUMENT} || jsonb_to_tsvector('simple', clarifications, '[\"string\"]')"


def pg_document(expression: str) -> list[str]:
    return [
        "DROP INDEX IF EXISTS search_entry_fts",
        "ALTER TABLE search_entry DROP COLUMN search_document",
        f"ALTER TABLE search_entry ADD COLUMN search_document tsvector GENERATED ALWAYS AS ({expression}) STORED",
        "CREATE INDEX search_entry_fts ON search_entry USING GIN (search_document)",
    ]


def field(apps):
    entry = apps.get_model("search", "Entry")
    made = models.JSONField(blank=True, default=list)
    made.set_attributes_from_name("clarifications")
    made.model = entry
    return entry, made


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            "ALTER TABLE search_entry ADD COLUMN clarifications text NOT NULL DEFAULT '[]' "
            "CHECK ((JSON_VALID(clarifications) OR clarifications IS NULL))"
        )
        for sql in WITH:
            schema_editor.execute(sql)
        return
    schema_editor.add_field(*field(apps))
    if schema_editor.connection.vendor == "postgresql":
        for sql in pg_document(PG_WITH):
            schema_editor.execute(sql)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in WITHOUT:
            schema_editor.execute(sql)
        schema_editor.execute("ALTER TABLE search_entry DROP COLUMN clarifications")
        return
    if schema_editor.connection.vendor == "postgresql":
        for sql in pg_document(DOCUMENT):
            schema_editor.execute(sql)
    schema_editor.remove_field(*field(apps))


class Migration(migrations.Migration):
    dependencies = [("search", "0015_entry_asked_by")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="entry",
                    name="clarifications",
                    field=models.JSONField(blank=True, default=list),
                ),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
