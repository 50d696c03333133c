"""Entry.images: the generated images an answer brought (search.images keeps their files).

On SQLite, Django adds a column with a default by rebuilding the table, and a rebuild drops the
full-text triggers on it (0003, 0004). There the column is added in place instead.
"""

from django.db import migrations, models

SQLITE = """ALTER TABLE search_entry ADD COLUMN images text NOT NULL DEFAULT '[]'
CHECK ((JSON_VALID(images) OR images IS NULL))"""


def images_field(apps):
    """The new field, on the model as it is before it (RunPython sees the state before)."""
    entry = apps.get_model("search", "Entry")
    field = models.JSONField(blank=True, default=list)
    field.set_attributes_from_name("images")
    field.model = entry
    return entry, field


def add_column(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE)
    else:
        schema_editor.add_field(*images_field(apps))


def drop_column(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("ALTER TABLE search_entry DROP COLUMN images")
    else:
        schema_editor.remove_field(*images_field(apps))


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0004_fts_index_when_settled"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="entry",
                    name="images",
                    field=models.JSONField(blank=True, default=list),
                ),
            ],
            database_operations=[migrations.RunPython(add_column, drop_column)],
        ),
    ]
