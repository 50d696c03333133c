"""The floor of pplxweb's server memory: the same server with the same libraries loaded and used,
and no pplxweb code. tests/benchmarks/e2e.py serves it with pplxweb's own command line
(pplxweb/server.py: granian, its options), sends it one page request and one request to the fake
Perplexity through curl_cffi, and prints its idle memory beside pplxweb's.

What it loads is what pplxweb's server loads of its dependencies: Django with the same contrib
apps, middleware and template engine, a session in SQLite, channels' routing and its in-memory
layer, WhiteNoise, django-htmx, django-csp; curl_cffi's session and httpx (the transport to
Perplexity); markdown-it with linkify, nh3 and pygments (rendering); cryptography's Fernet (the
stored session).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import django
from django.conf import settings

DATA = Path(os.environ.get("FLOOR_DATA_DIR") or tempfile.mkdtemp(prefix="pplxweb-floor-"))

settings.configure(
    DEBUG=False,
    SECRET_KEY="floor-" + "x" * 50,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    INSTALLED_APPS=[
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django.contrib.staticfiles",
        "channels",
        "django_htmx",
        "csp",
    ],
    MIDDLEWARE=[
        "django.middleware.security.SecurityMiddleware",
        "whitenoise.middleware.WhiteNoiseMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
        "csp.middleware.CSPMiddleware",
        "django_htmx.middleware.HtmxMiddleware",
    ],
    ROOT_URLCONF=__name__,
    TEMPLATES=[
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "OPTIONS": {
                "context_processors": [
                    "django.template.context_processors.request",
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages",
                ]
            },
        }
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA / "floor.sqlite3"}},
    SESSION_ENGINE="django.contrib.sessions.backends.signed_cookies",
    CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
    STATIC_URL="static/",
    STATIC_ROOT=DATA / "static",
    USE_TZ=True,
)
django.setup()

import httpx  # noqa: E402
import nh3  # noqa: E402
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from cryptography.fernet import Fernet  # noqa: E402
from curl_cffi.requests import AsyncSession  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.db import connection  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.template import engines  # noqa: E402
from django.urls import path  # noqa: E402
from markdown_it import MarkdownIt  # noqa: E402
from pygments import highlight  # noqa: E402
from pygments.formatters import HtmlFormatter  # noqa: E402
from pygments.lexers import get_lexer_by_name  # noqa: E402

MARKDOWN = MarkdownIt("js-default", {"linkify": True}).enable(["table", "linkify"])
TEMPLATE = engines["django"].from_string("<main>{{ html|safe }}</main>{% csrf_token %}")
KEY = Fernet(Fernet.generate_key())
get_channel_layer()


def page(request):
    """What a page request of pplxweb does with these libraries, once."""
    html = nh3.clean(MARKDOWN.render("**Floor** [1], https://example.org\n\n| a |\n|:-|\n| b |\n"))
    html += highlight("x = 1\n", get_lexer_by_name("python"), HtmlFormatter())
    KEY.decrypt(KEY.encrypt(b"session"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return HttpResponse(TEMPLATE.render({"html": html}, request))


async def upstream(request):
    """What a search does with the transports: one request through curl_cffi (the default
    transport) to the URL given, and an httpx client made."""
    async with httpx.AsyncClient():
        pass
    async with AsyncSession(impersonate="chrome", verify=os.environ.get("SSL_CERT_FILE") or True) as session:
        response = await session.get(request.GET["url"])
    return HttpResponse(str(response.status_code))


urlpatterns = [path("", page), path("upstream", upstream)]

router = ProtocolTypeRouter({"http": get_asgi_application(), "websocket": AuthMiddlewareStack(URLRouter([]))})


async def application(scope, receive, send):
    if scope["type"] == "lifespan":  # pplxweb's command line speaks the lifespan protocol
        while True:
            kind = (await receive())["type"].rsplit(".", 1)[-1]  # startup, then shutdown
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    await router(scope, receive, send)
