"""Answers saved with the old downgrade warning lose it (docs/protocol.md §6.7).

Before, `turbo` answering any other model marked the answer "the linked session may have
expired", without asking Perplexity; signed-in quick-mode answers come from `turbo` too, so
those warnings were mostly false. Nothing saved can confirm them now, so every one goes; the
link's own status is left as it is (Settings' Test connection checks it).
"""

from django.db import migrations

OLD_WARNING = (
    "Perplexity answered with its anonymous model (turbo), not the one asked for: "
    "the linked session may have expired. Re-link in Settings."
)


def clear(apps, schema_editor):
    Entry = apps.get_model("search", "Entry")
    Entry.objects.filter(downgraded=True, error=OLD_WARNING).update(downgraded=False, error="")
    Entry.objects.filter(downgraded=True).update(downgraded=False)


class Migration(migrations.Migration):
    dependencies = [("search", "0007_entry_report")]
    operations = [migrations.RunPython(clear, migrations.RunPython.noop)]
