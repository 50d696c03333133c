"""Files on the web: attach one (kept, then handed to Perplexity; the page's script shows its
progress), remove one not yet asked with, download one, and the plain form's files."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET, require_POST

from search import attachments, served
from search.attachments import IMAGES, KINDS, Refused
from search.attachments import upload as attachment_upload
from search.models import Attachment


def describe(attachment: Attachment) -> dict:
    return {
        "id": attachment.pk,
        "name": attachment.name,
        "size": attachment.size,
        "size_text": attachments.size_text(attachment.size),
        "kind": KINDS[attachment.kind][0],
        "image": attachment.kind in IMAGES,
        "ready": bool(attachment.remote_url),
    }


@require_POST
async def attach(request: HttpRequest) -> JsonResponse:
    """One file (field `file`): kept, then uploaded to Perplexity. 200 with what the chip shows,
    or 400 with the sentence; a file that failed is not kept."""
    user = await request.auser()
    files = request.FILES.getlist("file")
    if len(files) != 1:
        return JsonResponse({"error": "Send one file at a time."}, status=400)
    try:  # the person's limits first; the copy on a thread of its own: the database thread is everyone's
        await database_sync_to_async(attachments.admit)(user, files)
        stored = await sync_to_async(attachments.store, thread_sensitive=False)(files[0])
    except Refused as exc:
        return JsonResponse({"error": exc.message}, status=400)
    (attachment,) = await database_sync_to_async(_keep)(user, stored)
    try:
        await attachment_upload.send_upstream(user, [attachment])
    except Refused as exc:
        await database_sync_to_async(_forget)(user, [attachment.pk])
        return JsonResponse({"error": exc.message}, status=400)
    return JsonResponse(describe(attachment))


def _keep(user, stored: Attachment) -> list[Attachment]:
    attachments.sweep_now_and_then()  # the day-old uploads never asked with
    return attachments.record(user, [stored])


def _forget(user, ids: list[int]) -> None:
    """The person's uploads not yet asked with, and their files (unless other rows share them)."""
    rows = list(Attachment.objects.filter(pk__in=ids, user=user, entry__isnull=True))
    Attachment.objects.filter(pk__in=[a.pk for a in rows]).delete()
    attachments.remove_stored([a.stored for a in rows])


@require_POST
def remove(request: HttpRequest, pk: int) -> HttpResponse:
    """A chip's remove button: the file goes, unless it was already asked with."""
    _forget(request.user, [pk])
    return HttpResponse(status=204)


@require_GET
def download(request: HttpRequest, pk: int) -> FileResponse:
    """A kept file, to its owner only: always as a download, except an image the page shows
    (`?inline=1`, a thumbnail) whose bytes are one (search.served)."""
    attachment = get_object_or_404(Attachment, pk=pk, user=request.user)
    path = attachments.path_of(attachment)
    if path is None:
        raise Http404("That file is no longer on this server.")
    return served.stored_file(path, attachment.name, inline=request.GET.get("inline") == "1")


# --- the plain form (no JavaScript) -------------------------------------------------------------


async def gather(user, data, files: list) -> tuple[list[Attachment], list[str]]:
    """The files of a plain form: those kept from a previous try (`attachment` ids), then the new
    uploads, each kept if it may be (the person's limits and quota first, as for the page's
    uploads; copied off the database thread). Returns (the good files, a sentence for each bad
    one)."""
    problems: list[str] = []
    stored = []
    try:
        await database_sync_to_async(attachments.admit)(user, files)
    except Refused as exc:
        problems.append(exc.message)
        files = []
    for uploaded in files:
        try:
            stored.append(await sync_to_async(attachments.store, thread_sensitive=False)(uploaded))
        except Refused as exc:
            problems.append(exc.message)
    kept, refused = await database_sync_to_async(_gathered)(user, data.getlist("attachment"), stored)
    problems[:0] = refused
    limit = settings.ATTACHMENTS_PER_QUESTION
    if len(kept) > limit:
        problems.append(f"At most {limit} files per question (there are {len(kept)}); remove some.")
    return kept, problems


def _gathered(user, ids: list, stored: list[Attachment]) -> tuple[list[Attachment], list[str]]:
    try:
        kept, problems = attachments.chosen(user, ids), []
    except Refused as exc:
        kept, problems = [], [exc.message]
    if stored:
        attachments.sweep_now_and_then()
    return kept + attachments.record(user, stored), problems


def ready(user, data) -> list[Attachment]:
    """The socket's files for a question (`attachment` ids): the person's own, unasked, already
    on Perplexity (the page uploads them first); Refused otherwise."""
    files = attachments.chosen(user, data.getlist("attachment"))
    waiting = [a.name for a in files if not a.remote_url]
    if waiting:
        raise Refused(
            f"“{waiting[0]}” is not on Perplexity yet; wait for it, or remove it and attach it again."
        )
    return files
