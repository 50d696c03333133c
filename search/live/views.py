from __future__ import annotations

from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from accounts.fields import DecryptionError
from accounts.models import PerplexityAccount
from accounts.services.credentials import NoCredential, credentials_for_many, link_notice
from pplxweb.ids import parse as parse_id
from search import attachments, versions
from search.attachments import upload as attachment_upload
from search.attachments import views as attachment_views
from search.display import entry_context
from search.forms import SearchForm
from search.live import asking, control, liveness, runner
from search.live import redo as redoing
from search.models import Entry, LibraryThread, Thread, entry_for, thread_for

RECENT = 8  # conversations listed under the box on the search page


def _form(user, initial_q: str = "", thread: Thread | None = None, options: dict | None = None) -> SearchForm:
    """The search box, its options pre-set from the person's defaults (or from `options`)."""
    initial = asking.defaults_for(user).as_initial()
    if options is not None:
        saved = asking.options_from_json(options)
        initial = {
            **initial,
            "model": saved.model,
            "mode": saved.mode,
            "sources": list(saved.sources),
            "recency": saved.recency,
            "after": saved.after,
            "before": saved.before,
            "include_domains": ", ".join(saved.include_domains),
            "exclude_domains": ", ".join(saved.exclude_domains),
            "language": saved.language,
            "incognito": saved.incognito,
        }
    tier = PerplexityAccount.objects.filter(user=user).values_list("tier", flat=True).first() or ""
    form = SearchForm(initial={"q": initial_q, "thread": thread.pk if thread else None, **initial}, tier=tier)
    if thread is not None:  # a conversation opens at its latest answer, not scrolled to the box
        form.fields["q"].widget.attrs.pop("autofocus", None)
        form.fields["q"].widget.attrs["placeholder"] = "Ask a follow-up…"
    return form


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The search box. `?q=` always pre-fills it; the page asks by itself only when the person
    made the navigation (see _asked_by_the_person), so a link from another site cannot spend
    anybody's searches: it fills the box and waits for Enter."""
    question = request.GET.get("q", "")[:8000]
    if request.GET.get("again"):
        # "Edit and ask again": an earlier question with its options, to change before asking
        entry = entry_for(request.user, parse_id(Entry, request.GET["again"]))  # none: 404
        try:  # its files come along (the same stored files, never copies), to keep or remove
            attached = [attachment_views.describe(a) for a in attachments.again(request.user, entry)]
        except attachments.Refused as exc:
            attached = []
            messages.warning(request, exc.message)
        return render(
            request,
            "search/home.html",
            {
                "form": _form(request.user, entry.question, options=entry.options),
                "options_open": True,
                "attached": attached,
            },
        )
    recent = Thread.objects.filter(user=request.user).order_by("-updated").only("title", "updated")[:RECENT]
    autoask = bool(question.strip()) and _asked_by_the_person(request)
    chosen = _credential(request.user)
    notice, action = link_notice(request.user, None if chosen is True else chosen)
    response = render(
        request,
        "search/home.html",
        {
            "form": _form(request.user, question),
            "autoask": autoask,
            "recent": recent,
            "needs_link": chosen is None and not notice,
            "link_notice": notice,
            "link_action": action,
        },
    )
    patch_vary_headers(response, ["Sec-Fetch-Site"])
    return response


def _asked_by_the_person(request: HttpRequest) -> bool:
    """Sec-Fetch-Site "none" is the browser's own address bar or search box (the OpenSearch URL),
    "same-origin" a link or form of pplxweb itself. Another site's link says "cross-site" or
    "same-site"; a browser without the header gets the box filled, not the question asked. So
    does the redirect after signing in: the link that led to the sign-in may have been another
    site's."""
    site = request.headers.get("Sec-Fetch-Site", "")
    if site == "same-origin" and urlsplit(request.headers.get("Referer", "")).path == reverse(
        "accounts:login"
    ):
        return False
    return site in ("none", "same-origin")


@require_POST
async def ask(request: HttpRequest) -> HttpResponse:
    """The same search without JavaScript: start it, then show its thread (which refreshes)."""
    user = await request.auser()
    form = await database_sync_to_async(SearchForm)(request.POST)  # model choices come from the database
    # its files: kept here first (each bad one a sentence), sent to Perplexity only for a valid
    # question; whatever fails, the question and the good files come back in the box
    files, problems = await attachment_views.gather(user, request.POST, request.FILES.getlist("files"))
    if files and not problems and await database_sync_to_async(form.is_valid)():
        try:
            await attachment_upload.send_upstream(user, files)
        except attachments.Refused as exc:
            problems.append(exc.message)
    prepared = await database_sync_to_async(_start)(user, form, files, problems)
    if prepared is None:
        return await database_sync_to_async(_invalid)(request, user, form, files)
    entry, upstream_request = prepared
    runner.launch(entry, user, upstream_request)
    return redirect(f"{reverse('search:thread', args=[entry.thread_id])}#entry-{entry.pk}")


def _credential(user):
    """The credential `user`'s searches would use, None without one, or True when one cannot be
    read (it counts: its run says what is wrong with it)."""
    try:
        return credentials_for_many([user])[user.pk]
    except DecryptionError:
        return True


def _can_search(user) -> bool:
    return _credential(user) is not None


def _start(user, form: SearchForm, files: list = (), problems: list = ()):
    """(entry, upstream request), or None with the reasons added to the form."""
    valid = form.is_valid()
    for problem in problems:
        form.add_error(None, problem)
    if not valid or problems:
        return None
    if not _can_search(user):  # no entry that could only fail
        form.add_error(None, NoCredential.message)
        return None
    try:
        entry = asking.start_search(
            user,
            form.cleaned_data["q"],
            form.options(asking.defaults_for(user)),
            form.cleaned_data.get("thread"),
            attachments=tuple(files),
            exclusive=True,  # one answer at a time in a conversation, as on the socket
            version=form.cleaned_data.get("version"),
        )
    except asking.SearchRefused as exc:
        form.add_error(None, exc.message)
        return None
    return entry, asking.build_request(entry, new_thread=not form.cleaned_data.get("thread"))


def _invalid(request: HttpRequest, user, form: SearchForm, files: list = ()) -> HttpResponse:
    """The same page again with the errors beside the box (status 200, as htmx wants), and the
    files that were fine still attached."""
    thread_id = parse_id(Thread, form.data.get("thread"))
    thread = Thread.objects.filter(pk=thread_id, user=user).first() if thread_id is not None else None
    kept = [attachment_views.describe(a) for a in files]
    if thread is None:
        return render(request, "search/home.html", {"form": form, "attached": kept})
    return render(
        request, "search/thread.html", {**_thread_context(user, thread), "form": form, "attached": kept}
    )


def _thread_context(user, thread: Thread, showing: int | None = None) -> dict:
    """A conversation's page: each turn's shown version (or the one `showing` names)."""
    liveness.sweep_interrupted()
    entries = list(thread.entries.select_related("rendered").prefetch_related("attachments"))
    shown = versions.layout(entries, showing)
    return {
        "thread": thread,
        "items": [entry_context(e) for e in shown],
        "running": any(e.status == Entry.Status.RUNNING for e in entries),
        "shown_version": shown[-1].pk if shown else "",
        "showing": showing if any(e.pk == showing and not e.shown for e in shown) else None,
    }


def _entry_url(entry: Entry) -> str:
    return f"{reverse('search:thread', args=[entry.thread_id])}#entry-{entry.pk}"


@require_POST
async def redo(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask again, Retry or an edited question without JavaScript: the turn answered again in
    its conversation (search/live/redo.py), then the conversation (which refreshes)."""
    user = await request.auser()
    try:
        entry, upstream_request, preloaded = await redoing.start(user, pk, request.POST)
    except redoing.NotStarted as exc:
        messages.error(request, exc.message)
        found = await database_sync_to_async(Entry.objects.filter(pk=pk, user=user).first)()
        return redirect(_entry_url(found) if found else reverse("search:home"))
    runner.launch(entry, user, upstream_request, **preloaded)
    return redirect(_entry_url(entry))


@require_POST
def show_version(request: HttpRequest, pk: int) -> HttpResponse:
    """Another version of an answer, shown in its place (without JavaScript)."""
    try:
        entry = redoing.show(request.user, pk)
    except redoing.NotStarted as exc:
        messages.error(request, exc.message)
        entry = entry_for(request.user, pk)
    return redirect(_entry_url(entry))


@require_GET
def edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Edit question: the question, model and mode to ask the turn again with; in the answer's
    place with JavaScript (htmx), a page of its own without."""
    entry = entry_for(request.user, pk)
    if request.headers.get("HX-Request") and request.GET.get("cancel"):
        return HttpResponse("")
    form = redoing.edit_form(entry)
    form.fields["model" if request.GET.get("model") else "q"].widget.attrs["autofocus"] = True
    context = {"entry": entry, "form": form}
    if request.headers.get("HX-Request"):
        return render(request, "search/edit_fragment.html", context)
    return render(request, "search/edit.html", context)


@require_GET
def thread(request: HttpRequest, pk: int) -> HttpResponse:
    """A conversation, every turn from the database; live over the socket while one runs.
    `?version=`: an answer's other version shown in its place (a history link to it)."""
    thread = thread_for(request.user, pk)
    showing = parse_id(Entry, request.GET.get("version"))
    context = _thread_context(request.user, thread, showing)
    context["form"] = _form(request.user, thread=thread)
    context["upstream"] = LibraryThread.objects.filter(thread=thread).first()  # imported from Perplexity
    return render(request, "search/thread.html", context)


@require_POST
async def stop(request: HttpRequest, pk: int) -> HttpResponse:
    user = await request.auser()
    try:
        entry = await database_sync_to_async(entry_for)(user, pk)
    except Http404:
        raise
    if entry.running:
        await control.stop(entry.pk)
        messages.info(request, "Stopping; what arrived so far is kept.")
    return redirect(f"{reverse('search:thread', args=[entry.thread_id])}#entry-{entry.pk}")


@login_not_required
@require_GET
def opensearch(request: HttpRequest) -> HttpResponse:
    base = request.build_absolute_uri("/")
    return render(
        request, "search/opensearch.xml", {"base": base}, content_type="application/opensearchdescription+xml"
    )
