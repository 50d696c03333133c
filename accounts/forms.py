from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm

from accounts import services


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
