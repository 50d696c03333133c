"""The search form: the HTTP path (JavaScript off) and the websocket validate with the same one."""

from __future__ import annotations

import re
from datetime import date
from urllib.parse import urlsplit

from django import forms

from accounts.forms import MODES, RECENCY, SOURCES
from accounts.services import labelled, model_choices
from pplxweb.ids import IdField
from pplxweb.perplexity.request import MAX_DOMAINS, AskOptions
from search.history.query import MAX_QUERY
from search.models import Entry, Thread
from search.render import scrub

MAX_QUESTION = 8000
HOST = re.compile(r"^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$")


def _domains(text: str, label: str) -> list[str]:
    found = []
    for item in re.split(r"[\s,]+", text or ""):
        item = item.strip().lower()
        if not item:
            continue
        host = urlsplit(item if "//" in item else f"//{item}").hostname or ""
        host = host.removeprefix("www.") if host.count(".") > 1 else host
        if not HOST.match(host):
            raise forms.ValidationError(f"{item[:60]!r} in {label} is not a domain such as example.com.")
        if host not in found:
            found.append(host)
    return found


class SearchForm(forms.Form):
    q = forms.CharField(
        label="Ask anything",
        max_length=MAX_QUESTION,
        strip=True,
        error_messages={
            "required": "Type a question first.",
            "max_length": f"A question can be at most {MAX_QUESTION:,} characters.",
        },
        widget=forms.Textarea(
            attrs={
                "rows": 2,
                "placeholder": "Ask anything…",
                "autofocus": True,
                # "you asked this before": past questions while typing, from the history only
                "hx-get": "/history/suggest/",
                "hx-trigger": "input changed delay:300ms",
                "data-suggest-max": MAX_QUERY,  # longer text is no lookup (static/pplxweb.js)
                "hx-target": "#suggestions",
                "hx-swap": "innerHTML",
            }
        ),
    )
    # in its column's range (pplxweb.ids): a larger one would make the database raise
    thread = IdField(Thread, "That conversation was not found.", required=False, widget=forms.HiddenInput)
    # the version of the conversation's last turn the page shows: a follow-up goes on from it
    version = IdField(
        Entry, "That answer was not found; reload the page.", required=False, widget=forms.HiddenInput
    )
    model = forms.ChoiceField(label="Model", required=False)
    mode = forms.ChoiceField(label="Mode", choices=MODES, required=False)
    sources = forms.MultipleChoiceField(
        label="Sources", choices=SOURCES, required=False, widget=forms.CheckboxSelectMultiple
    )
    recency = forms.ChoiceField(label="Recency", choices=RECENCY, required=False)
    after = forms.DateField(label="After", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    before = forms.DateField(label="Before", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    include_domains = forms.CharField(
        label="Only these sites", required=False, max_length=2000, help_text="e.g. nature.com, arxiv.org"
    )
    exclude_domains = forms.CharField(label="Not these sites", required=False, max_length=2000)
    language = forms.RegexField(
        label="Answer language",
        required=False,
        regex=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?$",
        max_length=20,
        error_messages={"invalid": "Use a language code such as en-US, de or pt-BR."},
    )
    incognito = forms.BooleanField(label="Incognito", required=False)
    AT_HAND = (
        "q",
        "thread",
        "version",
        "model",
        "mode",
    )  # in the box and its row; the other fields under Options

    def __init__(self, *args, catalogue: dict | None = None, tier: str = "", **kwargs) -> None:
        """`catalogue`: the model catalogue when the caller has read it already (else it is read);
        `tier`: the linked account's ("" unknown), for the list's "· Max" marks (as in Settings)."""
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = labelled(model_choices(catalogue), tier)
        # no maxlength: a browser would cut a long paste silently; the page counts, the form refuses
        self.fields["q"].widget.attrs.pop("maxlength", None)
        self.fields["q"].widget.attrs["data-max"] = str(MAX_QUESTION)

    @property
    def options_refused(self) -> bool:
        """Something under Options was refused: Options opens to show it."""
        return any(name not in self.AT_HAND for name in self.errors)

    def clean_q(self) -> str:
        # a socket's JSON can carry lone surrogates (no database stores them); NUL is refused
        # by the field already ("Null characters are not allowed.")
        question = scrub(self.cleaned_data["q"]).strip()
        if not question:
            raise forms.ValidationError("Type a question first.")
        return question

    def clean_include_domains(self) -> list[str]:
        return _domains(self.cleaned_data.get("include_domains", ""), "“Only these sites”")

    def clean_exclude_domains(self) -> list[str]:
        return _domains(self.cleaned_data.get("exclude_domains", ""), "“Not these sites”")

    def clean(self) -> dict:
        data = super().clean()
        after, before = data.get("after"), data.get("before")
        if after and before and after > before:
            self.add_error("before", "“Before” must be on or after “After”.")
        if after and after > date.today():
            self.add_error("after", "“After” is in the future: nothing has been written yet.")
        domains = len(data.get("include_domains") or []) + len(data.get("exclude_domains") or [])
        if domains > MAX_DOMAINS:
            self.add_error("include_domains", f"At most {MAX_DOMAINS} sites in all (there are {domains}).")
        return data

    def options(self, defaults) -> AskOptions:
        """The request's options: what the form says, else the person's defaults."""
        data = self.cleaned_data
        sources = (
            tuple(data.get("sources") or ())
            if self.data.get("sources_set") or data.get("sources")
            else tuple(s for s in defaults.sources.split(",") if s)
        )
        return AskOptions(
            model=data.get("model") or defaults.model,
            mode=data.get("mode") or defaults.mode,
            sources=sources,
            recency=""
            if data.get("after") or data.get("before")
            else (data.get("recency") or defaults.recency),
            after=data.get("after"),
            before=data.get("before"),
            include_domains=tuple(data.get("include_domains") or ()),
            exclude_domains=tuple(data.get("exclude_domains") or ()),
            language=data.get("language") or defaults.language,
            incognito=data["incognito"] if self.data.get("incognito_set") else defaults.incognito,
        )
