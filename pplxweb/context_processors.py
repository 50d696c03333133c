from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from pplxweb.build import build


def version(request: HttpRequest) -> dict[str, str]:
    return {"pplxweb_version": settings.VERSION, "pplxweb_build": build()}
