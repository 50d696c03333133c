"""SQLite: index an answer in FTS5 once it has settled, not on every progress save.

A running answer is saved every two seconds; re-indexing the whole answer each time made the
work per save grow with the answer. The question is indexed when the entry is created; the answer
and sources when the status leaves `running` (completed, failed, stopped, interrupted, ...), which
also re-indexes entries the start-up sweep marks interrupted. PostgreSQL's expression index needs
no trigger and is unchanged.
"""

from django.db import migrations

INDEX_ROW = """INSERT INTO search_entry_fts(rowid, question, answer, sources) VALUES (new.id, new.question, new.answer,
            (SELECT group_concat(coalesce(json_extract(value, '$.title'), '') || ' ' || coalesce(json_extract(value, '$.url'), ''), ' ')
             FROM json_each(CASE WHEN json_valid(new.sources) THEN new.sources ELSE '[]' END)));"""
SETTLED = f"""CREATE TRIGGER search_entry_fts_update AFTER UPDATE OF question, answer, sources, status ON search_entry
    WHEN new.status <> 'running' BEGIN
        DELETE FROM search_entry_fts WHERE rowid = old.id;
        {INDEX_ROW}
    END"""  # noqa: S608 - constant SQL
EVERY_SAVE = f"""CREATE TRIGGER search_entry_fts_update AFTER UPDATE OF question, answer, sources ON search_entry BEGIN
        DELETE FROM search_entry_fts WHERE rowid = old.id;
        {INDEX_ROW}
    END"""  # noqa: S608 - constant SQL


def replace_trigger(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute("DROP TRIGGER IF EXISTS search_entry_fts_update")
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("search", "0003_history_search")]
    operations = [migrations.RunPython(replace_trigger(SETTLED), replace_trigger(EVERY_SAVE))]
