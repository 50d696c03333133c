"""Attached files keep their place in the question: two uploads finish in either order, so
their pks do not say which was attached first (the saved page, the export and "Ask again"
listed them by pk)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0013_entry_search_document"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="attachment",
            options={"ordering": ["position", "pk"]},
        ),
        migrations.AddField(
            model_name="attachment",
            name="position",
            field=models.PositiveSmallIntegerField(default=0),
        ),
    ]
