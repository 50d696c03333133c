from __future__ import annotations

from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from search import images, liveness, runner, services
from search.display import entry_context
from search.forms import SearchForm
from search.models import Entry, Thread

RECENT = 8  # conversations listed under the box on the search page


def _form(user, initial_q: str = "", thread: Thread | None = None, options: dict | None = None) -> SearchForm:
    """The search box, its options pre-set from the person's defaults (or from `options`)."""
    initial = services.defaults_for(user).as_initial()
    if options is not None:
        saved = services.options_from_json(options)
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
    return SearchForm(initial={"q": initial_q, "thread": thread.pk if thread else None, **initial})


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The search box. `?q=` always pre-fills it; the page asks by itself only when the person
    made the navigation (see _asked_by_the_person), so a link from another site cannot spend
    anybody's searches: it fills the box and waits for Enter."""
    question = request.GET.get("q", "")[:8000]
    again = request.GET.get("again", "")
    if again.isdigit() and len(again) < 19:
        # "Edit and ask again": an earlier question with its options, to change before asking
        entry = services.entry_for(request.user, int(again))
        return render(
            request,
            "search/home.html",
            {"form": _form(request.user, entry.question, options=entry.options), "options_open": True},
        )
    recent = Thread.objects.filter(user=request.user).order_by("-updated").only("title", "updated")[:RECENT]
    autoask = bool(question.strip()) and _asked_by_the_person(request)
    response = render(
        request,
        "search/home.html",
        {"form": _form(request.user, question), "autoask": autoask, "recent": recent},
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
    prepared = await database_sync_to_async(_start)(user, form)
    if prepared is None:
        return await database_sync_to_async(_invalid)(request, user, form)
    entry, upstream_request = prepared
    runner.launch(entry, user, upstream_request)
    return redirect(f"{reverse('search:thread', args=[entry.thread_id])}#entry-{entry.pk}")


def _start(user, form: SearchForm):
    """(entry, upstream request), or None with the reason added to the form."""
    if not form.is_valid():
        return None
    try:
        entry = services.start_search(
            user,
            form.cleaned_data["q"],
            form.options(services.defaults_for(user)),
            form.cleaned_data.get("thread"),
        )
    except services.SearchRefused as exc:
        form.add_error(None, exc.message)
        return None
    return entry, services.build_request(entry, new_thread=not form.cleaned_data.get("thread"))


def _invalid(request: HttpRequest, user, form: SearchForm) -> HttpResponse:
    """The same page again with the errors beside the box (status 200, as htmx wants)."""
    thread_id = str(form.data.get("thread", ""))
    thread = Thread.objects.filter(pk=thread_id, user=user).first() if thread_id.isdigit() else None
    if thread is None:
        return render(request, "search/home.html", {"form": form})
    return render(request, "search/thread.html", {**_thread_context(user, thread), "form": form})


def _thread_context(user, thread: Thread) -> dict:
    liveness.sweep_interrupted()
    entries = list(thread.entries.all())
    return {
        "thread": thread,
        "items": [entry_context(e) for e in entries],
        "running": any(e.status == Entry.Status.RUNNING for e in entries),
    }


@require_POST
async def reask(request: HttpRequest, pk: int) -> HttpResponse:
    """The same question with the same options, as a new conversation."""
    user = await request.auser()

    def start():
        entry = services.entry_for(user, pk)
        new = services.start_search(user, entry.question, services.options_from_json(entry.options))
        return new, services.build_request(new, new_thread=True)

    try:
        entry, upstream_request = await database_sync_to_async(start)()
    except services.SearchRefused as exc:
        messages.error(request, exc.message)
        return redirect("search:home")
    runner.launch(entry, user, upstream_request)
    return redirect(f"{reverse('search:thread', args=[entry.thread_id])}#entry-{entry.pk}")


@require_GET
def thread(request: HttpRequest, pk: int) -> HttpResponse:
    """A conversation, every turn from the database; live over the socket while one runs."""
    thread = services.thread_for(request.user, pk)
    context = _thread_context(request.user, thread)
    context["form"] = _form(request.user, thread=thread)
    return render(request, "search/thread.html", context)


@require_POST
async def stop(request: HttpRequest, pk: int) -> HttpResponse:
    user = await request.auser()
    try:
        entry = await database_sync_to_async(services.entry_for)(user, pk)
    except Http404:
        raise
    if entry.running:
        await runner.stop(entry.pk)
        messages.info(request, "Stopping; what arrived so far is kept.")
    return redirect(f"{reverse('search:thread', args=[entry.thread_id])}#entry-{entry.pk}")


@require_GET
def image(request: HttpRequest, pk: int, n: int) -> FileResponse:
    """A generated image pplxweb kept, to the person whose answer it is in."""
    entry = services.entry_for(request.user, pk)
    record = next((r for r in entry.images if isinstance(r, dict) and r.get("n") == n), None)
    path = images.path_of(entry.pk, record) if record else None
    if path is None:
        raise Http404("No such image.")
    response = FileResponse(path.open("rb"), content_type=images.TYPES[path.suffix[1:]])
    response["Content-Disposition"] = f'inline; filename="pplxweb-{entry.pk}-{n}{path.suffix}"'
    response["Cache-Control"] = "private, max-age=31536000, immutable"  # a kept image never changes
    return response


@login_not_required
@require_GET
def opensearch(request: HttpRequest) -> HttpResponse:
    base = request.build_absolute_uri("/")
    return render(
        request, "search/opensearch.xml", {"base": base}, content_type="application/opensearchdescription+xml"
    )
