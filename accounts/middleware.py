"""A stored credential that no configured key opens is a server misconfiguration, not a bug:
every page that meets one says so in a sentence (and the log says which key setting), instead
of the generic server error page."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.fields import UNREADABLE, DecryptionError
from accounts.models import PerplexityAccount

log = logging.getLogger(__name__)


class UnreadableCredentialsMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DecryptionError):
            return None
        log.error("%s %s: %s", request.method, request.path, exception)
        context = {"message": UNREADABLE, "own": _own_unreadable(request.user)}
        return render(request, "unreadable.html", context, status=500)


def _own_unreadable(user) -> bool:
    """Is it this person's own link (which they may unlink, to link again), not the owner's shared one?"""
    if not user.is_authenticated:
        return False
    try:
        PerplexityAccount.objects.filter(user=user).first()
    except DecryptionError:
        return True
    return False
