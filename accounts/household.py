"""The household in Settings as the owner sees it: everyone who signs in here, with what they keep
against their storage quota (search.storage), which the owner sets, and a password reset code of
theirs that still works (accounts.services.resets)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import services
from accounts.forms import QuotaForm
from accounts.services import resets
from search import storage


def rows(owner) -> list[dict]:
    """The owner first, then the household: each with their storage, their quota's form and until
    when a reset code of theirs works."""
    people = services.household(owner)
    waiting = resets.pending(people)
    found = []
    for person in [owner, *people]:
        usage = storage.usage(person.pk).shown()
        form = QuotaForm(initial={"megabytes": usage["megabytes"]})
        form.fields["megabytes"].widget.attrs["aria-label"] = f"Storage quota of {person.get_username()} (MB)"
        until = waiting.get(person.pk)
        found.append({"person": person, "storage": usage, "quota_form": form, "reset_until": until})
    return found


@require_POST
def set_quota(request: HttpRequest, member_id: int) -> HttpResponse:
    """The owner sets what a person (themselves too) may keep here."""
    if not request.user.is_superuser:
        raise Http404
    person = get_object_or_404(get_user_model(), pk=member_id)
    form = QuotaForm(request.POST)
    if form.is_valid():
        storage.set_quota(person.pk, form.cleaned_data["megabytes"])
        said = storage.size_text(form.cleaned_data["megabytes"] * storage.MB)
        messages.success(request, f"{person.get_username()} may now keep {said} here.")
    else:
        problem = " ".join(form.errors.get("megabytes") or ["Give a whole number of MB."])
        messages.error(request, f"{person.get_username()}'s quota was not changed: {problem}")
    return redirect(f"{reverse('accounts:settings')}#household")
