"""Shared fixtures. The environment of the run is set in tests/settings.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

PASSWORD = "correct horse battery"
BROWSER_TESTS = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(config, items):
    """Markers by what a test needs: `browser` for tests/e2e/ (a server process and, for most,
    Chromium), `database` for a test that touches the database (and so every socket and run,
    which also use the channel layer). The PostgreSQL + Redis pass of tests/run.sh runs the
    `database` tests that are not `browser` ones, and the `journey`s: one browser journey per
    feature. `make quick` runs everything but `browser` on SQLite."""
    for item in items:
        if BROWSER_TESTS in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)
        if item.get_closest_marker("django_db") or {"db", "transactional_db"} & set(item.fixturenames):
            item.add_marker(pytest.mark.database)


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_superuser(username="owner", password=PASSWORD)


@pytest.fixture
def member(django_user_model, owner):
    return django_user_model.objects.create_user(username="member", password=PASSWORD)


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def member_client(client, member):
    client.force_login(member)
    return client


@sync_to_async
def session_cookie_for(user) -> str:
    """A real session for user, as the Cookie header a browser would send."""
    from django.conf import settings
    from django.test import Client

    c = Client()
    c.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={c.cookies[settings.SESSION_COOKIE_NAME].value}"


@pytest.fixture(scope="session", autouse=True)
def _static_files():
    """Collect static files once into the test data dir, as `make run` does for the server."""
    from django.core.management import call_command

    call_command("collectstatic", interactive=False, verbosity=0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    """After an async test (and its fixtures): close the database connection asgiref's worker
    thread opened, so PostgreSQL can drop the test database, and forget the channel layer,
    whose Redis locks belong to the test's event loop, now closed."""
    import asyncio
    import inspect

    from channels.layers import channel_layers
    from django.db import connections

    result = yield
    if inspect.iscoroutinefunction(getattr(item, "function", None)):
        asyncio.run(sync_to_async(connections.close_all)())
        channel_layers.backends.clear()
    return result
