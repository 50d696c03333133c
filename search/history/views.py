"""History pages: list and search, suggestions while typing, delete, export and import."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import date

from asgiref.sync import sync_to_async
from django import forms
from django.contrib import messages
from django.db import transaction
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from pplxweb.ids import parse as parse_id
from pplxweb.ids import parse_all as parse_ids
from search import attachments, citations, images, served, versions
from search.display import answer_html_copy, answer_markdown, catalogue_models, model_label
from search.history import export, forget, import_jobs, imports, rows
from search.history import query as history
from search.history.query import Filters, QueryTooLong
from search.markdown_links import safe_links
from search.models import Entry, Thread, entry_for, thread_for
from search.reports import report_filename, report_markdown

STATUS_CHOICES = [("", "Any status"), *Entry.Status.choices]


class HistoryFilterForm(forms.Form):
    q = forms.CharField(label="Search your history", required=False, max_length=10 * 1024 * 1024)
    after = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    before = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    status = forms.ChoiceField(label="Status", required=False, choices=STATUS_CHOICES)
    model = forms.CharField(label="Model", required=False, max_length=80, widget=forms.Select)
    domain = forms.CharField(label="Source site", required=False, max_length=253)

    def __init__(self, *args, used: list[str] = (), models: dict | None = None, **kwargs) -> None:
        """`used`: the model ids of the person's answers; `models`: the catalogue's, for their names.
        The model list shows each name once: ids with one name ("turbo", "pplx_pro": "Best") go together."""
        super().__init__(*args, **kwargs)
        self.same_name: dict[str, tuple[str, ...]] = {}
        by_name: dict[str, list[str]] = {}
        for slug in sorted(used):
            by_name.setdefault(model_label(slug, models), []).append(slug)
        for slugs in by_name.values():
            for slug in slugs:
                self.same_name[slug] = tuple(slugs)
        self.fields["model"].widget.choices = [
            ("", "Any model"),
            *sorted(((slugs[0], name) for name, slugs in by_name.items()), key=lambda c: c[1].lower()),
        ]

    def clean_model(self) -> tuple[str, ...]:
        model = (self.cleaned_data.get("model") or "").strip()
        if not model:
            return ()
        if model not in self.same_name:
            raise forms.ValidationError("No answer in your history is by that model.")
        return self.same_name[model]

    def filters(self) -> Filters:
        data = self.cleaned_data
        return Filters(
            text=data.get("q") or "",
            after=data.get("after"),
            before=data.get("before"),
            status=data.get("status") or "",
            models=data.get("model") or (),
            domain=(data.get("domain") or "").strip().lower().removeprefix("www."),
        )


def _int(value, default: int, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return default if not low <= number <= high else number


@require_GET
def history_page(request: HttpRequest) -> HttpResponse:
    for sentence in import_jobs.told(request.user):  # an import a server stop removed whole
        messages.warning(request, sentence)
    models = catalogue_models()
    form = HistoryFilterForm(request.GET or None, used=history.models_used(request.user), models=models)
    filters = Filters()
    if form.is_bound and form.is_valid():
        filters = form.filters()
    size = _int(request.GET.get("size"), history.PAGE, 1, history.MAX_PAGE)
    context = {"form": form, "filters": filters, "size": size, "rows": [], "results": [], "next_cursor": None,
               "models": models}  # fmt: skip
    query = {k: v for k, v in request.GET.items() if k not in ("before_id", "page") and v}
    try:
        if filters.text.strip():
            page = _int(request.GET.get("page"), 0, 0, 2000)
            results = history.search(request.user, filters, offset=page * size, size=size)
            next_page = page + 1 if len(results) == size else None
            context.update(results=rows.search_rows(results, models), page=page, next_page=next_page)
        else:
            before_id = parse_id(Entry, request.GET.get("before_id"))
            entries = history.page(request.user, filters, before_id, size)
            next_cursor = entries[-1].pk if len(entries) == size else None
            context.update(rows=rows.page_rows(entries, models), next_cursor=next_cursor)
    except QueryTooLong as exc:
        form.add_error("q", exc.message)
    context["query"] = query
    return render(request, "search/history.html", context)


@require_GET
def suggest(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "")
    found = [] if len(text) > history.MAX_QUERY else history.suggestions(request.user, text)
    return render(request, "search/suggestions_fragment.html", {"entries": found})


@require_http_methods(["GET", "POST"])
def delete(request: HttpRequest) -> HttpResponse:
    """Delete one entry, a selection, or everything: GET asks to confirm, POST deletes."""
    everything = request.POST.get("all") == "1" if request.method == "POST" else request.GET.get("all") == "1"
    chosen_ids = request.POST.getlist("entry") if request.method == "POST" else request.GET.getlist("entry")
    ids = parse_ids(Entry, chosen_ids[:1000])
    entries = history.entries_for(request.user)
    chosen = entries if everything else entries.filter(pk__in=ids)
    if request.method == "GET" or request.POST.get("confirm") != "1":
        return render(
            request,
            "search/delete.html",
            {
                "entries": chosen.select_related("thread")[:200],
                "count": chosen.count(),
                "everything": everything,
                "on_perplexity": forget.count(chosen),
                "at_most": forget.MAX,
            },
        )
    upstream = request.POST.get("upstream") == "1"
    if upstream and forget.count(chosen) > forget.MAX:  # the page did not offer it
        messages.error(request, forget.TOO_MANY)
        return redirect("search:history")
    with transaction.atomic():
        threads = Thread.objects.filter(user=request.user)
        if not everything:  # (everything: no list of every thread id as parameters)
            threads = threads.filter(pk__in=list(chosen.values_list("thread_id", flat=True).distinct()))
        # Locked first, so a follow-up being started in one of them either goes in before (and
        # its thread stays) or waits and finds the thread gone ("not found"), never half of each.
        list(threads.select_for_update().values_list("pk"))
        known = forget.first_answers(threads) if upstream else {}
        gone = list(chosen.values_list("pk", flat=True))
        count = len(gone)
        versions.before_delete(chosen)  # a turn's other versions keep its files
        files = attachments.stored_of(chosen)  # their rows go with the entries
        chosen.delete()
        emptied = threads.filter(entries__isnull=True)
        conversations = [
            replace(there, read_write_token=there.read_write_token or token)
            for pk, token in emptied.order_by("-updated").values_list("pk", "read_write_token")
            for there in known.get(pk, ())
        ]
        emptied.delete()
        transaction.on_commit(lambda: images.remove(gone))  # their kept images
        transaction.on_commit(lambda: attachments.remove_stored(files))  # and attached files
    said = f"Deleted {count} entr{'y' if count == 1 else 'ies'}."
    if conversations:  # after the commit: this waits for Perplexity
        done, outcome = forget.forget(request.user, conversations)
        (messages.success if done else messages.warning)(request, f"{said} {outcome}")
    else:
        messages.success(request, said)
    return redirect("search:history")


@require_GET
def export_thread(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    if kind not in ("md", "json"):
        raise Http404
    thread = thread_for(request.user, pk)
    name = slugify(thread.title)[:60] or f"thread-{thread.pk}"
    if kind == "md":
        response = HttpResponse(export.thread_markdown(thread), content_type="text/markdown; charset=utf-8")
        return served.download(response, f"{name}.md")
    response = JsonResponse(
        export.thread_json(thread), json_dumps_params={"ensure_ascii": False, "indent": 1}
    )
    return served.download(response, f"{name}.json")


@require_GET
def export_all(request: HttpRequest) -> HttpResponse:
    """The whole history as a zip, sent while it is written (memory does not grow with it)."""
    response = StreamingHttpResponse(
        _off_the_loop(export.history_zip(request.user)), content_type="application/zip"
    )
    return served.download(response, f"pplxweb-history-{date.today():%Y-%m-%d}.zip")


async def _off_the_loop(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A generator's parts for the ASGI response, each made on the request's thread (given a
    plain generator, Django reads it whole into memory before it sends a byte)."""
    step = sync_to_async(next)
    try:
        while (part := await step(parts, None)) is not None:
            yield part
    finally:
        await sync_to_async(parts.close)()


@require_POST
def import_view(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(
            request, "Choose a file exported from pplxweb (history.json, a thread's .json, or the zip)."
        )
        return redirect("search:history")
    try:
        imported, skipped = imports.import_history(request.user, upload)
    except imports.ImportRefused as exc:
        messages.error(request, exc.message)
        return redirect("search:history")
    text = f"Imported {imported} conversation{'' if imported == 1 else 's'}."
    if skipped:
        text += f" {skipped} {'was' if skipped == 1 else 'were'} already here."
    messages.success(request, text)
    return redirect("search:history")


# --- one kept answer: its Markdown, its report, its images ------------------------------------


@require_GET
def entry_markdown(request: HttpRequest, pk: int) -> HttpResponse:
    """One answer as Markdown, for "Copy": the Markdown export's format (citations as footnotes,
    the sources listed under it); `?citations=0`: the text alone, without them."""
    entry = entry_for(request.user, pk)
    if request.GET.get("citations") == "0":
        text = safe_links(citations.without(entry.answer, len(entry.sources)))
    else:
        text = answer_markdown(entry)
    response = HttpResponse(text.strip() + "\n", content_type="text/markdown; charset=utf-8")
    return served.download(response, f"pplxweb-answer-{entry.pk}.md")


@require_GET
def entry_copy_html(request: HttpRequest, pk: int) -> HttpResponse:
    """One answer as HTML, for Copy's text/html beside answer.md's text: `?citations=0` as there."""
    entry = entry_for(request.user, pk)
    html = answer_html_copy(entry, cited=request.GET.get("citations") != "0")
    return served.hardened(HttpResponse(html, content_type="text/html; charset=utf-8"))


@require_GET
def entry_report(request: HttpRequest, pk: int) -> HttpResponse:
    """A Deep Research report's Markdown with its sources, as a file named after its title (for
    Download, and for Copy report)."""
    entry = entry_for(request.user, pk)
    if not entry.report:
        raise Http404("This answer has no report.")
    markdown = safe_links(report_markdown(entry.report, entry.sources))
    response = HttpResponse(markdown, content_type="text/markdown; charset=utf-8")
    return served.download(response, report_filename(entry.report, entry.question))


@require_GET
def image(request: HttpRequest, pk: int, n: int) -> FileResponse:
    """A generated image pplxweb kept, to the person whose answer it is in."""
    entry = entry_for(request.user, pk)
    record = next((r for r in entry.images if isinstance(r, dict) and r.get("n") == n), None)
    path = images.path_of(entry.pk, record) if record else None
    if path is None and entry.running:
        # a running answer's records are saved at its end, but the live page shows each image
        # as soon as its file is complete (a download writes elsewhere, then renames)
        path = next(
            (p for kind in images.TYPES if (p := images.path_of(entry.pk, {"file": f"{n}.{kind}"}))), None
        )
    if path is None:
        raise Http404("No such image.")
    # shown in the page when its bytes are an image (search.served); a kept image never changes
    name, cache = f"pplxweb-{entry.pk}-{n}{path.suffix}", "private, max-age=31536000, immutable"
    return served.stored_file(path, name, inline=True, cache=cache)
