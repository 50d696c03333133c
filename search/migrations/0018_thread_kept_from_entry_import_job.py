"""Thread.kept_from: the household member a conversation came from, when the owner removed them
and kept their history (accounts.services.people). Entry.import_job: the import that wrote an
answer into a conversation that was already here (a re-import restoring a deleted answer), so a
cut-short import removes it too (search.history.import_jobs).

On SQLite the entry's column is added in place (a nullable column: no table rebuild, so the
full-text triggers stay); the thread table is rebuilt, before 0019 gives it a trigger. Going
back, removing the column rebuilds the entry table, so its triggers are made again last.
"""

import django.db.models.deletion
from django.db import migrations, models

from search.migrations._fts import triggers


def entry_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in triggers(with_title=False):
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0017_rendered"),
    ]

    operations = [
        # first, so that going back it runs last
        migrations.RunPython(migrations.RunPython.noop, entry_triggers),
        migrations.AddField(
            model_name="entry",
            name="import_job",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="search.importjob",
            ),
        ),
        migrations.AddField(
            model_name="thread",
            name="kept_from",
            field=models.CharField(blank=True, max_length=150),
        ),
    ]
