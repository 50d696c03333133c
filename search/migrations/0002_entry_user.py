from django.conf import settings
from django.db import migrations, models


def fill(apps, schema_editor):
    Entry = apps.get_model("search", "Entry")
    Thread = apps.get_model("search", "Thread")
    Entry.objects.update(
        user_id=models.Subquery(Thread.objects.filter(pk=models.OuterRef("thread_id")).values("user_id")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="entry",
            name="user",
            field=models.ForeignKey(
                null=True,
                db_index=False,
                on_delete=models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="entry",
            name="user",
            field=models.ForeignKey(
                db_index=False,
                on_delete=models.deletion.CASCADE,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddIndex(
            model_name="entry", index=models.Index(fields=["user", "-id"], name="search_entry_user_recent")
        ),
    ]
