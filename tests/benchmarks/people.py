"""A person for the benchmarks that search: signed in, linked to the fake Perplexity's session.
No side effects on import (the benchmark modules set up their data dirs when imported)."""

from __future__ import annotations

import json


def linked_person(username: str = "bench") -> str:
    """Made in the database the settings name; returns their session cookie's value."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.models import PerplexityAccount
    from tests.fake_perplexity.app import TOKEN

    user = get_user_model().objects.create_user(username=username, password="x" * 12)
    PerplexityAccount.objects.create(
        user=user, session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}})
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client.cookies["pplxweb_sessionid"].value
