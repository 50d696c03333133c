"""Render every saved answer whose stored HTML is missing or stale (after an upgrade of the
renderer, or an import), so no page has to.

    python manage.py render_answers

Pages render such an answer themselves the first time they show it; this only does it ahead.
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from search.rendered import render_stale


class Command(BaseCommand):
    help = "Render every saved answer whose stored HTML is missing or stale."

    def handle(self, *args, **options) -> None:
        started = time.monotonic()
        seen, done = render_stale()
        self.stdout.write(
            f"{seen} answers looked at, {done} rendered, in {time.monotonic() - started:.1f} s."
        )
