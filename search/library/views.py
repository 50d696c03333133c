"""The library section's buttons: import, sync now, cancel, the automatic sync's setting."""

from __future__ import annotations

from datetime import time

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from search.library import jobs, keeper
from search.models import LibraryJob, LibrarySchedule

BACK = "#library"


def _back() -> HttpResponse:
    return redirect(f"{reverse('accounts:settings')}{BACK}")


@require_POST
def start(request: HttpRequest) -> HttpResponse:
    kind = LibraryJob.Kind.SYNC if request.POST.get("kind") == "sync" else LibraryJob.Kind.IMPORT
    try:
        job = jobs.start(request.user, kind)
    except jobs.JobRefused as exc:
        messages.error(request, exc.message)
        return _back()
    transaction.on_commit(keeper.wake)  # this process's keeper starts it now
    what = "Sync" if job.kind == LibraryJob.Kind.SYNC else "Import"
    messages.success(
        request, f"{what} of your Perplexity library started; it goes on if you close this page."
    )
    return _back()


@require_POST
def cancel(request: HttpRequest) -> HttpResponse:
    if jobs.cancel(request.user):
        messages.success(
            request, "Cancelling: the thread being fetched is left out, everything before it is kept."
        )
    else:
        messages.error(request, "No import of your library is running.")
    return _back()


@require_POST
def schedule(request: HttpRequest) -> HttpResponse:
    enabled = request.POST.get("enabled") == "on"
    try:
        at = time.fromisoformat(request.POST.get("at", "").strip() or "03:00")
    except ValueError:
        messages.error(request, "That is not a time of day; type it as HH:MM, e.g. 03:30.")
        return _back()
    if enabled and jobs.own_account(request.user) is None:
        messages.error(request, "Link your own Perplexity account first; then its library can sync each day.")
        return _back()
    LibrarySchedule.objects.update_or_create(
        user=request.user, defaults={"enabled": enabled, "at": at.replace(second=0, microsecond=0)}
    )
    messages.success(
        request, f"Automatic sync {'on, daily at ' + at.strftime('%H:%M') if enabled else 'off'}."
    )
    return _back()
