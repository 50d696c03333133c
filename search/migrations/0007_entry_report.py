"""Entry.report (a Deep Research run's report, docs/protocol.md §8.1), Entry.context_uuid (for terminate,
§9.2) and Entry.drift (stream shapes pplxweb did not know); the report joins full-text search.

On SQLite the columns are added in place (a rebuild would drop the full-text triggers, see 0005),
and the FTS5 table's answer column indexes the answer and the report together. On PostgreSQL the
expression index is rebuilt with the report in it (search/history.py uses the same expression).
"""

from django.db import migrations, models

ADD_SQLITE = [
    "ALTER TABLE search_entry ADD COLUMN report text NOT NULL DEFAULT ''",
    "ALTER TABLE search_entry ADD COLUMN context_uuid varchar(200) NOT NULL DEFAULT ''",
    "ALTER TABLE search_entry ADD COLUMN drift text NOT NULL DEFAULT '{}' CHECK ((JSON_VALID(drift) OR drift IS NULL))",
]
DROP_SQLITE = [
    "ALTER TABLE search_entry DROP COLUMN report",
    "ALTER TABLE search_entry DROP COLUMN context_uuid",
    "ALTER TABLE search_entry DROP COLUMN drift",
]


def index_row(answer: str) -> str:
    return f"""INSERT INTO search_entry_fts(rowid, question, answer, sources) VALUES (new.id, new.question, {answer},
            (SELECT group_concat(coalesce(json_extract(value, '$.title'), '') || ' ' || coalesce(json_extract(value, '$.url'), ''), ' ')
             FROM json_each(CASE WHEN json_valid(new.sources) THEN new.sources ELSE '[]' END)));"""  # noqa: S608


def triggers(answer: str, columns: str) -> list[str]:
    return [
        "DROP TRIGGER IF EXISTS search_entry_fts_insert",
        "DROP TRIGGER IF EXISTS search_entry_fts_update",
        f"""CREATE TRIGGER search_entry_fts_insert AFTER INSERT ON search_entry BEGIN
        {index_row(answer)}
    END""",
        f"""CREATE TRIGGER search_entry_fts_update AFTER UPDATE OF {columns} ON search_entry
    WHEN new.status <> 'running' BEGIN
        DELETE FROM search_entry_fts WHERE rowid = old.id;
        {index_row(answer)}
    END""",  # noqa: S608 - constant SQL
    ]


WITH_REPORT = triggers(
    "new.answer || CASE WHEN new.report = '' THEN '' ELSE char(10) || new.report END",
    "question, answer, report, sources, status",
)
WITHOUT_REPORT = triggers("new.answer", "question, answer, sources, status")
PG_OLD = "to_tsvector('simple', question || ' ' || answer || ' ' || sources::text)"
PG_NEW = "to_tsvector('simple', question || ' ' || answer || ' ' || report || ' ' || sources::text)"


def pg_index(expression: str) -> list[str]:
    return [
        "DROP INDEX IF EXISTS search_entry_fts",
        f"CREATE INDEX search_entry_fts ON search_entry USING GIN ({expression})",
    ]


def fields(apps):
    entry = apps.get_model("search", "Entry")
    made = []
    for name, field in (
        ("report", models.TextField(blank=True)),
        ("context_uuid", models.CharField(blank=True, max_length=200)),
        ("drift", models.JSONField(blank=True, default=dict)),
    ):
        field.set_attributes_from_name(name)
        field.model = entry
        made.append(field)
    return entry, made


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in ADD_SQLITE + WITH_REPORT:
            schema_editor.execute(sql)
        return
    entry, made = fields(apps)
    for field in made:
        schema_editor.add_field(entry, field)
    if schema_editor.connection.vendor == "postgresql":
        for sql in pg_index(PG_NEW):
            schema_editor.execute(sql)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in WITHOUT_REPORT + DROP_SQLITE:
            schema_editor.execute(sql)
        return
    if schema_editor.connection.vendor == "postgresql":
        for sql in pg_index(PG_OLD):
            schema_editor.execute(sql)
    entry, made = fields(apps)
    for field in made:
        schema_editor.remove_field(entry, field)


class Migration(migrations.Migration):
    dependencies = [("search", "0006_entry_user_created")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="entry",
                    name="context_uuid",
                    field=models.CharField(blank=True, max_length=200),
                ),
                migrations.AddField(
                    model_name="entry", name="drift", field=models.JSONField(blank=True, default=dict)
                ),
                migrations.AddField(model_name="entry", name="report", field=models.TextField(blank=True)),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
