"""pplxweb's own settings for the server processes the browser tests start (tests/e2e/conftest.py
server_env), with two changes: the test run's fast password hasher (tests/settings.py), so that the
people the tests create sign in without a second of key stretching each (about 80 s of a run);
and on Redis, a channel-layer prefix of each pytest worker's own (groups are named by entry ids,
which repeat between the workers' databases, and Redis's pub/sub is one for all its databases)."""

import os

from pplxweb.settings import *  # noqa: F403
from pplxweb.settings import CHANNEL_LAYERS

if os.environ.get("PYTEST_XDIST_WORKER") and "CONFIG" in CHANNEL_LAYERS["default"]:
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = "asgi-" + os.environ["PYTEST_XDIST_WORKER"]

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
