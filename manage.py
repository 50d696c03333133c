#!/usr/bin/env python
"""Django's command-line utility for pplxweb."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pplxweb.settings")
    from django.conf import settings
    from django.core.management import execute_from_command_line

    from pplxweb.env import ConfigError

    try:
        settings.INSTALLED_APPS  # noqa: B018 - loads settings so a bad variable stops here
    except ConfigError as exc:
        sys.stderr.write(f"pplxweb: {exc}\n")
        sys.exit(2)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
