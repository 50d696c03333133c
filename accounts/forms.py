from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm

from accounts import services

# the search options a person can preset here and pick per search (search.forms uses them too)
MODES = [("auto", "Auto (quick)"), ("pro", "Pro search"), ("research", "Deep research")]
SOURCES = [("web", "Web"), ("scholar", "Academic"), ("social", "Social"), ("finance", "Finance")]
RECENCY = [
    ("", "Any time"),
    ("hour", "Past hour"),
    ("day", "Past day"),
    ("week", "Past week"),
    ("month", "Past month"),
    ("year", "Past year"),
]


class SignInForm(AuthenticationForm):
    username = forms.CharField(
        label="User name",
        max_length=150,
        widget=forms.TextInput(attrs={"autofocus": True, "autocomplete": "username"}),
    )


class SetupForm(UserCreationForm):
    setup_code = forms.CharField(
        label="Setup code",
        max_length=64,
        help_text="Printed by the server when it started.",
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autofocus": True}),
    )

    class Meta:
        model = get_user_model()
        fields = ("setup_code", "username")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].widget.attrs.pop("autofocus", None)  # the setup code has it

    def clean_setup_code(self) -> str:
        code = self.cleaned_data["setup_code"]
        if not services.setup_code_matches(code):
            raise forms.ValidationError(
                "That setup code is not the one the server printed. Check the server's output "
                "(the code changes at each start until the owner exists)."
            )
        return code


class MemberForm(UserCreationForm):
    class Meta:
        model = get_user_model()
        fields = ("username",)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Settings opens at its top, not scrolled down to "Add a person"
        self.fields["username"].widget.attrs.pop("autofocus", None)


class EmailForm(forms.Form):
    email = forms.CharField(
        label="Perplexity e-mail",
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "inputmode": "email"}),
    )


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Code from the e-mail",
        required=False,  # the service says what is missing, in its own words
        max_length=20_000,  # longer input is refused by the service with a sentence, not a 400
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autofocus": True}),
    )


class TotpForm(forms.Form):
    code = forms.CharField(
        label="Authenticator code",
        required=False,
        max_length=20_000,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "autofocus": True}
        ),
    )


class CookieForm(forms.Form):
    cookies = forms.CharField(
        label="Cookie header or “Copy as cURL”",
        max_length=64 * 1024,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "autocomplete": "off"}),
        help_text="In your browser, signed in to perplexity.ai: developer tools, Network, any request "
        "to www.perplexity.ai, right-click, Copy as cURL. pplxweb keeps only the session cookie, "
        "cf_clearance and the User-Agent.",
    )


class ApiKeyForm(forms.Form):
    api_key = forms.CharField(
        label="Perplexity API key",
        max_length=300,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        help_text="Optional. Used only when no linked session works.",
    )


class DefaultsForm(forms.Form):
    model = forms.ChoiceField(label="Model", help_text="Best: Perplexity picks the model for each question.")
    mode = forms.ChoiceField(
        label="Mode",
        choices=MODES,
    )
    sources = forms.MultipleChoiceField(
        label="Sources",
        required=False,
        choices=SOURCES,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: answer without searching.",
    )
    recency = forms.ChoiceField(
        label="Recency",
        required=False,
        choices=RECENCY,
    )
    language = forms.RegexField(
        label="Answer language",
        regex=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?$",
        max_length=20,
        error_messages={"invalid": "Use a language code such as en-US, de or pt-BR."},
    )
    incognito = forms.BooleanField(
        label="Incognito (keep searches out of your Perplexity library)", required=False
    )

    def __init__(self, *args, choices=(), tier: str = "", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tier = tier
        self.max_only = {c.slug for c in choices if c.tier == "max"}
        self.fields["model"].choices = services.labelled(list(choices), tier)

    def clean_model(self) -> str:
        model = self.cleaned_data["model"]
        if model in self.max_only and self.tier and self.tier not in ("max", "enterprise"):
            raise forms.ValidationError("That model needs Perplexity Max; the linked account is Pro.")
        return model


class QuotaForm(forms.Form):
    """What a person may keep on this server (the owner sets it, Settings: Household)."""

    megabytes = forms.IntegerField(
        label="Storage quota (MB)",
        min_value=0,
        max_value=100_000_000,
        widget=forms.NumberInput(attrs={"inputmode": "numeric", "step": "1"}),
    )


class AgentTokenForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=60,
        help_text="Which agent will use it, e.g. “laptop scripts” or “Open WebUI”. Its answers say so.",
        error_messages={"required": "Give the token a name, such as the agent that will use it."},
    )
