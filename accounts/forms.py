from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.contrib.auth.password_validation import password_validators_help_text_html, validate_password

from accounts import services
from accounts.services import resets

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


class RemoveMemberForm(forms.Form):
    """What happens to a member's history when the owner removes them."""

    history = forms.ChoiceField(
        label="Their history",
        widget=forms.RadioSelect,
        initial="keep",
        error_messages={"required": "Choose whether to keep or delete their history."},
    )

    def __init__(self, *args, name: str = "", conversations: int = 0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        many = f"{conversations} conversation{'' if conversations == 1 else 's'}"
        move = "moves to your history, marked" if conversations == 1 else "move to your history, each marked"
        self.fields["history"].choices = [
            ("keep", f"Keep it: their {many} {move} “from {name}”."),
            (
                "delete",
                f"Delete it: their {many}, with their answers, images and files. This cannot be undone.",
            ),
        ]

    @property
    def keep(self) -> bool:
        return self.cleaned_data["history"] == "keep"


RESET_MINUTES = int(resets.RESET_VALID.total_seconds() // 60)


class ResetForm(forms.Form):
    """A member's new password, with the one-time code the owner gave them."""

    username = forms.CharField(
        label="User name",
        max_length=150,
        widget=forms.TextInput(
            attrs={"autocomplete": "username", "autofocus": True, "autocapitalize": "none"}
        ),
    )
    code = forms.CharField(
        label="Code from the owner",
        max_length=64,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autocapitalize": "characters"}),
        help_text=f"Like K7QX-M2PD-9HTR; valid once, for {RESET_MINUTES} minutes after the owner made it.",
    )
    new_password1 = forms.CharField(
        label="New password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=password_validators_help_text_html(),
    )
    new_password2 = forms.CharField(
        label="New password again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self) -> dict:
        data = super().clean()
        first, second = data.get("new_password1"), data.get("new_password2")
        if first and second and first != second:
            self.add_error("new_password2", "The two passwords differ.")
        elif first:
            try:
                validate_password(first, user=resets.user_for(data.get("username") or ""))
            except forms.ValidationError as exc:
                self.add_error("new_password1", exc)
        return data
