"""An answer asked by one of the person's agents names the agent token it came with.

On SQLite the column is added in place: Django would rebuild the table, and a rebuild drops the
full-text triggers (see 0005 and 0007).
"""

from django.db import migrations, models


def field(apps):
    entry = apps.get_model("search", "Entry")
    made = models.CharField(blank=True, max_length=60)
    made.set_attributes_from_name("asked_by")
    made.model = entry
    return entry, made


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("ALTER TABLE search_entry ADD COLUMN asked_by varchar(60) NOT NULL DEFAULT ''")
        return
    schema_editor.add_field(*field(apps))


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("ALTER TABLE search_entry DROP COLUMN asked_by")
        return
    schema_editor.remove_field(*field(apps))


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0014_attachment_position"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="entry", name="asked_by", field=models.CharField(blank=True, max_length=60)
                ),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
