"""ImportJob (one import of a history file) and Thread.import_job, so an import cut short by a
stop is removed whole at the next start (search.import_jobs). search_thread gets a nullable
column: added in place on SQLite; no full-text trigger is on that table."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0010_attachments"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ImportJob",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "state",
                    models.CharField(
                        choices=[("running", "running"), ("done", "done"), ("removed", "removed")],
                        default="running",
                        max_length=12,
                    ),
                ),
                ("runner", models.CharField(blank=True, max_length=120)),
                ("started", models.DateTimeField(auto_now_add=True)),
                ("heartbeat", models.DateTimeField(blank=True, null=True)),
                ("imported", models.PositiveIntegerField(default=0)),
                ("skipped", models.PositiveIntegerField(default=0)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="thread",
            name="import_job",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="search.importjob",
            ),
        ),
        migrations.AddIndex(
            model_name="importjob",
            index=models.Index(fields=["state"], name="search_impo_state_2c52d6_idx"),
        ),
    ]
