"""What a person's storage quota counts (search.storage): Entry.import_bytes (the text of an
imported entry) and Entry.image_bytes (its kept images' files), summed from one index; and
Attachment.stored no longer unique: a file is named by its content and shared by the rows that
hold the same bytes.

On SQLite the two columns are added in place (a rebuild would drop the full-text triggers, see
0005). The entries already here are measured once: imported ones (from the library, or by a
history import) by their text, as search.storage.text_size measures it; every one with kept
images by the size of its image files.
"""

import json
from pathlib import Path

from django.conf import settings
from django.db import migrations, models

ADD_SQLITE = [
    'ALTER TABLE search_entry ADD COLUMN import_bytes bigint unsigned NOT NULL DEFAULT 0 CHECK ("import_bytes" >= 0)',
    'ALTER TABLE search_entry ADD COLUMN image_bytes bigint unsigned NOT NULL DEFAULT 0 CHECK ("image_bytes" >= 0)',
]
DROP_SQLITE = [
    "ALTER TABLE search_entry DROP COLUMN import_bytes",
    "ALTER TABLE search_entry DROP COLUMN image_bytes",
]
TEXT = ("question", "answer", "report", "error")
LISTS = ("sources", "related", "steps", "clarifications")
BATCH = 500


def fields(apps):
    entry = apps.get_model("search", "Entry")
    made = []
    for name in ("import_bytes", "image_bytes"):
        field = models.PositiveBigIntegerField(default=0)
        field.set_attributes_from_name(name)
        field.model = entry
        made.append(field)
    return entry, made


def add_columns(apps, schema_editor):
    _columns(apps, schema_editor, ADD_SQLITE, schema_editor.add_field)


def drop_columns(apps, schema_editor):
    _columns(apps, schema_editor, DROP_SQLITE, schema_editor.remove_field)


def _columns(apps, schema_editor, sqlite: list[str], change) -> None:
    """In place on SQLite (its statements), else as the schema editor does it (`change`)."""
    if schema_editor.connection.vendor == "sqlite":
        for statement in sqlite:
            schema_editor.execute(statement)
    else:
        entry, made = fields(apps)
        for field in made:
            change(entry, field)


def text_size(entry) -> int:
    size = sum(len(getattr(entry, name).encode("utf-8", "replace")) for name in TEXT)
    return size + sum(len(json.dumps(getattr(entry, name), ensure_ascii=False).encode()) for name in LISTS)


def image_size(entry) -> int:
    folder = Path(settings.DATA_DIR) / "images" / str(entry.pk)
    size = 0
    for record in entry.images if isinstance(entry.images, list) else []:
        name = str(record.get("file") or "") if isinstance(record, dict) else ""
        path = folder / name
        if name and "/" not in name and path.is_file():
            size += path.stat().st_size
    return size


def measure(apps, schema_editor):
    Entry = apps.get_model("search", "Entry")
    imported = (
        models.Q(origin="perplexity")
        | models.Q(thread__import_job__isnull=False)
        | models.Q(import_job__isnull=False)
    )
    rows = Entry.objects.filter(imported).only("pk", *TEXT, *LISTS)
    for entries in _batches(rows):
        for entry in entries:
            entry.import_bytes = text_size(entry)
        Entry.objects.bulk_update(entries, ["import_bytes"])
    for entries in _batches(Entry.objects.exclude(images=[]).only("pk", "images")):
        for entry in entries:
            entry.image_bytes = image_size(entry)
        Entry.objects.bulk_update(entries, ["image_bytes"])


def _batches(rows):
    batch = []
    for row in rows.order_by("pk").iterator(chunk_size=BATCH):
        batch.append(row)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0021_entry_versions_upstream"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="entry",
                    name="import_bytes",
                    field=models.PositiveBigIntegerField(default=0),
                ),
                migrations.AddField(
                    model_name="entry",
                    name="image_bytes",
                    field=models.PositiveBigIntegerField(default=0),
                ),
            ],
            database_operations=[migrations.RunPython(add_columns, drop_columns)],
        ),
        migrations.AlterField(
            model_name="attachment",
            name="stored",
            field=models.CharField(db_index=True, max_length=80),
        ),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(fields=["user", "import_bytes", "image_bytes"], name="search_entry_user_kept"),
        ),
        migrations.RunPython(measure, migrations.RunPython.noop),
    ]
