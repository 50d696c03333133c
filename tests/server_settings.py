"""pplxweb's own settings for the server processes the browser tests start (tests/e2e/conftest.py
server_env), with one change: the test run's fast password hasher (tests/settings.py), so that the
people the tests create sign in without a second of key stretching each (about 80 s of a run)."""

from pplxweb.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
