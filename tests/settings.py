"""The test run's settings: pplxweb's own, read under a test environment.

Set here (not in conftest.py) because pytest-django reads the settings before any conftest.
"""

import os
import tempfile

os.environ.setdefault("PPLXWEB_DATA_DIR", tempfile.mkdtemp(prefix="pplxweb-test-"))
# WhiteNoise looks for STATIC_ROOT when the app is built; collectstatic fills it (conftest.py).
os.makedirs(os.path.join(os.environ["PPLXWEB_DATA_DIR"], "static"), exist_ok=True)
# Tests never reach the real Perplexity: an unmocked call fails to resolve these names.
os.environ["PPLXWEB_PERPLEXITY_URL"] = "https://perplexity.test"
os.environ["PPLXWEB_PERPLEXITY_API_URL"] = "https://api.perplexity.test"
os.environ["PPLXWEB_IMPERSONATE"] = "off"  # respx intercepts httpx's own transport
for name in ("PPLXWEB_ADMIN_USER", "PPLXWEB_ADMIN_PASSWORD", "PPLXWEB_DEBUG", "PPLXWEB_HTTPS"):
    os.environ.pop(name, None)

from pplxweb.settings import *  # noqa: E402, F403

LIBRARY_KEEPER = False  # library jobs run where a test starts them (the e2e server keeps its own)

# Key stretching is a defence for stored passwords, not something the tests check: the fastest
# hasher Django ships (the e2e servers use it too, tests/server_settings.py).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
