"""An answer asked by one of the person's agents names the agent token it came with."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0014_attachment_position"),
    ]

    operations = [
        migrations.AddField(
            model_name="entry",
            name="asked_by",
            field=models.CharField(blank=True, max_length=60),
        ),
    ]
