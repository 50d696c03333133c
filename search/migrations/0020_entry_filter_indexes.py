"""A history search filtered by status or model finds its newest matches through an index of its
own: (user, status, created) and (user, model, created), the latter in place of (user, model),
whose seeks for the model list it still serves. Without them one failed answer among 100,000
made the search walk every entry of the person (query plan: `tests.benchmarks.query_plan`).
Indexes only: SQLite's full-text triggers stay."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0019_search_titles"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="entry",
            name="search_entry_user_model",
        ),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(fields=["user", "model", "created"], name="search_entry_user_model_at"),
        ),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(fields=["user", "status", "created"], name="search_entry_user_status"),
        ),
    ]
