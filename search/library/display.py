"""The Settings section of the library (templates/accounts/library_fragment.html): what the page
shows first and what the job sends over the socket as it goes."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.utils import timezone

from search.library import jobs
from search.models import LibraryJob, LibrarySchedule, LibraryThread


def _time_left(job: LibraryJob, pending: int) -> str:
    done = job.fetched + job.skipped + job.failed
    if not job.running or job.phase != "fetching" or not done or not pending:
        return ""
    seconds = (timezone.now() - job.started).total_seconds() / done * pending
    if seconds < 90:
        return f"about {max(1, round(seconds))} s left"
    if seconds < 5400:
        return f"about {round(seconds / 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


def context(user) -> dict:
    job = jobs.current(user)
    threads = LibraryThread.objects.filter(user=user)
    pending = threads.filter(state=LibraryThread.State.PENDING).count() if job and job.running else 0
    done = (job.fetched + job.skipped + job.failed) if job else 0
    schedule = LibrarySchedule.objects.filter(user=user).first()
    return {
        "library_job": job,
        "library_linked": jobs.own_account(user) is not None,
        "library_imported": threads.exclude(thread=None).count(),
        "library_deleted": threads.filter(deleted=True).count(),
        "library_pending": pending,
        "library_total": done + pending,
        "library_done": done,
        "library_left": _time_left(job, pending) if job else "",
        "library_schedule": schedule or LibrarySchedule(user=user),
    }


CSRF_SLOT = "__library_csrf__"  # each socket puts its browser's own token here (consumers.py)


def fragment(user) -> str:
    """The section as the socket sends it: it replaces the one on the page."""
    return render_to_string(
        "accounts/library_fragment.html", {**context(user), "library_oob": True, "library_csrf": CSRF_SLOT}
    )
