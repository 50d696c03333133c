"""The Perplexity library import (search.library): LibraryJob, LibraryThread, LibrarySchedule,
Entry.origin ("perplexity" for an imported turn) and an index on (user, backend_uuid).

On SQLite Entry.origin is added in place (a rebuild would drop the full-text triggers, see 0005).
"""

import datetime

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

SQLITE_ADD = "ALTER TABLE search_entry ADD COLUMN origin varchar(20) NOT NULL DEFAULT ''"


def origin_field(apps):
    entry = apps.get_model("search", "Entry")
    field = models.CharField(blank=True, max_length=20)
    field.set_attributes_from_name("origin")
    field.model = entry
    return entry, field


def add_column(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE_ADD)
    else:
        schema_editor.add_field(*origin_field(apps))


def drop_column(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("ALTER TABLE search_entry DROP COLUMN origin")
    else:
        schema_editor.remove_field(*origin_field(apps))


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0008_clear_unconfirmed_downgrades"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="entry", name="origin", field=models.CharField(blank=True, max_length=20)
                ),
            ],
            database_operations=[migrations.RunPython(add_column, drop_column)],
        ),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(fields=["user", "backend_uuid"], name="search_entry_user_upstream"),
        ),
        migrations.CreateModel(
            name="LibraryJob",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[("import", "import"), ("sync", "sync")], default="import", max_length=10
                    ),
                ),
                ("automatic", models.BooleanField(default=False)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("running", "running"),
                            ("done", "done"),
                            ("stopped", "stopped"),
                            ("cancelled", "cancelled"),
                        ],
                        default="running",
                        max_length=10,
                    ),
                ),
                ("phase", models.CharField(default="listing", max_length=10)),
                ("offset", models.PositiveIntegerField(default=0)),
                ("listed", models.PositiveIntegerField(default=0)),
                ("fetched", models.PositiveIntegerField(default=0)),
                ("skipped", models.PositiveIntegerField(default=0)),
                ("failed", models.PositiveIntegerField(default=0)),
                ("unchanged", models.PositiveIntegerField(default=0)),
                ("deleted", models.PositiveIntegerField(default=0)),
                ("new_entries", models.PositiveIntegerField(default=0)),
                ("requests", models.PositiveIntegerField(default=0)),
                ("walked", models.BooleanField(default=False)),
                ("notes", models.JSONField(blank=True, default=list)),
                ("error", models.TextField(blank=True)),
                ("cancel_requested", models.BooleanField(default=False)),
                ("runner", models.CharField(blank=True, max_length=120)),
                ("heartbeat", models.DateTimeField(blank=True, null=True)),
                ("started", models.DateTimeField(auto_now_add=True)),
                ("finished", models.DateTimeField(blank=True, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="library_jobs",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["user", "-started"], name="search_libr_user_id_bff0fb_idx"),
                    models.Index(fields=["state"], name="search_libr_state_cc5ddc_idx"),
                ],
            },
        ),
        migrations.CreateModel(
            name="LibraryThread",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=200)),
                ("slug", models.CharField(max_length=200)),
                ("title", models.CharField(blank=True, max_length=300)),
                ("activity", models.CharField(blank=True, max_length=40)),
                ("count", models.IntegerField(blank=True, null=True)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("pending", "to fetch"),
                            ("done", "imported"),
                            ("skipped", "skipped"),
                            ("failed", "failed"),
                        ],
                        default="pending",
                        max_length=10,
                    ),
                ),
                ("reason", models.CharField(blank=True, max_length=300)),
                ("seen_by", models.PositiveIntegerField(default=0)),
                ("deleted", models.BooleanField(default=False)),
                (
                    "thread",
                    models.OneToOneField(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="upstream",
                        to="search.thread",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["user", "state"], name="search_libr_user_id_460613_idx")],
                "constraints": [models.UniqueConstraint(fields=("user", "key"), name="library_thread_key")],
            },
        ),
        migrations.CreateModel(
            name="LibrarySchedule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("enabled", models.BooleanField(default=False)),
                ("at", models.TimeField(default=datetime.time(3, 0))),
                ("last_run", models.DateField(blank=True, null=True)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
    ]
