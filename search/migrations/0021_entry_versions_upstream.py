"""Versions of a turn (Ask again, Retry and Edit question answer it again in place) and each
answer's Perplexity thread: its token, when it expires there, and why it was asked in a new one.

On SQLite the columns are added in place: Django would rebuild the table, and a rebuild drops the
full-text triggers (see 0005 and 0007).
"""

from django.db import migrations, models

COLUMNS = {  # name: (field, SQLite's column)
    "turn": (lambda: models.BigIntegerField(blank=True, null=True), "bigint NULL"),
    "shown": (lambda: models.BooleanField(default=True), "bool NOT NULL DEFAULT 1"),
    "read_write_token": (
        lambda: models.CharField(blank=True, max_length=200),
        "varchar(200) NOT NULL DEFAULT ''",
    ),
    "upstream_expires": (lambda: models.DateTimeField(blank=True, null=True), "datetime NULL"),
    "carried": (lambda: models.CharField(blank=True, max_length=40), "varchar(40) NOT NULL DEFAULT ''"),
}


def field(apps, name: str):
    entry = apps.get_model("search", "Entry")
    made = COLUMNS[name][0]()
    made.set_attributes_from_name(name)
    made.model = entry
    return entry, made


def forward(apps, schema_editor):
    for name, (_, column) in COLUMNS.items():
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute(f"ALTER TABLE search_entry ADD COLUMN {name} {column}")
        else:
            schema_editor.add_field(*field(apps, name))


def backward(apps, schema_editor):
    for name in reversed(COLUMNS):
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute(f"ALTER TABLE search_entry DROP COLUMN {name}")
        else:
            schema_editor.remove_field(*field(apps, name))


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0020_entry_filter_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(model_name="entry", name=name, field=make())
                for name, (make, _) in COLUMNS.items()
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(
                condition=models.Q(turn__isnull=False), fields=["turn"], name="search_entry_turn"
            ),
        ),
    ]
