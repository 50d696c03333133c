"""pplxweb settings: one file, configured only through PPLXWEB_* environment variables.

The README's configuration table lists every variable. Secrets come from the environment,
from NAME_FILE, or are generated once into the data dir; never random per process.
"""

from __future__ import annotations

import os
from pathlib import Path

from pplxweb import __version__
from pplxweb.datadir import make_private
from pplxweb.env import (
    allowed_hosts,
    data_dir,
    database_from_url,
    env_bind,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_name,
    env_networks,
    env_origins,
    env_url,
    field_keys,
    secret_key,
)

ENV = os.environ
BASE_DIR = Path(__file__).resolve().parent.parent
VERSION = __version__
BUILD = env_name(ENV, "PPLXWEB_BUILD")  # unset: a fingerprint of the code (pplxweb/build.py)

DATA_DIR = data_dir(ENV, BASE_DIR)
# On every start: umask 077, the data dir 0700 and all in it private, or a refusal naming it
make_private(DATA_DIR)
# Large temporary files (uploads, the request bodies behind them, an export's history.json) go
# here, on the data dir's disk, not in /tmp: on many systems /tmp is a tmpfs, that is memory.
TEMP_DIR = DATA_DIR / "tmp"
TEMP_DIR.mkdir(mode=0o700, exist_ok=True)
FILE_UPLOAD_TEMP_DIR = str(TEMP_DIR)
SECRET_KEY = secret_key(ENV, DATA_DIR)
FIELD_ENCRYPTION_KEYS = field_keys(ENV, DATA_DIR)

DEBUG = env_bool(ENV, "PPLXWEB_DEBUG")
HTTPS = env_bool(ENV, "PPLXWEB_HTTPS")
BIND = env_bind(ENV)
TRUSTED_PROXIES = env_networks(ENV, "PPLXWEB_TRUSTED_PROXIES")
ALLOWED_HOSTS = allowed_hosts(ENV)
CSRF_TRUSTED_ORIGINS = env_list(ENV, "PPLXWEB_CSRF_TRUSTED_ORIGINS")
# web pages allowed to call the agents' API from a browser (CORS); none by default (search/api)
API_ORIGINS = env_origins(ENV, "PPLXWEB_API_ORIGINS")

PERPLEXITY_URL = env_url(ENV, "PPLXWEB_PERPLEXITY_URL", "https://www.perplexity.ai")
PERPLEXITY_API_URL = env_url(ENV, "PPLXWEB_PERPLEXITY_API_URL", "https://api.perplexity.ai")
# seconds: the longest silence inside an answer, and the cap on a whole answer (deep research x10 / x6)
PERPLEXITY_READ_TIMEOUT = env_int(ENV, "PPLXWEB_PERPLEXITY_READ_TIMEOUT", 60, 1, 3600)
PERPLEXITY_ANSWER_TIMEOUT = env_int(ENV, "PPLXWEB_PERPLEXITY_ANSWER_TIMEOUT", 300, 1, 36000)
# seconds between two upstream requests of a library import (at most one a second; 0: no pacing)
LIBRARY_PACE = env_float(ENV, "PPLXWEB_LIBRARY_PACE", 1.0, 0.0, 3600.0)
LIBRARY_KEEPER = True  # each server process starts and resumes library jobs (search/library/keeper.py)
# files asked about (search.attachments): the size cap, how many per question, and the hosts
# Perplexity's storage forms may point at (https only; Perplexity's own address always may)
ATTACHMENT_MAX_MB = env_int(ENV, "PPLXWEB_ATTACHMENT_MAX_MB", 25, 1, 1024)
ATTACHMENTS_PER_QUESTION = env_int(ENV, "PPLXWEB_ATTACHMENTS_PER_QUESTION", 10, 1, 50)
# what a person may keep here (files asked about, kept images, imported conversations), in MB,
# unless the owner set their own in Settings (search/storage.py)
STORAGE_QUOTA_MB = env_int(ENV, "PPLXWEB_STORAGE_QUOTA_MB", 2048, 0, 100_000_000)
# seconds in which a request's body must bring 64 KB (else 408), and an idle connection's life
UPLOAD_READ_TIMEOUT = env_float(ENV, "PPLXWEB_UPLOAD_READ_TIMEOUT", 30.0, 0.5, 3600.0)
UPLOAD_HOSTS = tuple(env_list(ENV, "PPLXWEB_UPLOAD_HOSTS") or ["ppl-ai-file-upload.s3.amazonaws.com"])
PERPLEXITY_IMPERSONATE = env_choice(
    ENV, "PPLXWEB_IMPERSONATE", "chrome", ("chrome", "safari", "firefox", "edge", "off")
)

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "csp",
    "accounts",
    "search",
    "pplxweb",  # project-level commands (serve, doctor)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "accounts.middleware.UnreadableCredentialsMiddleware",
]

ROOT_URLCONF = "pplxweb.urls"
ASGI_APPLICATION = "pplxweb.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "pplxweb.context_processors.version",
            ],
        },
    },
]

# --- database ----------------------------------------------------------------------------------

if ENV.get("DATABASE_URL", "").strip():
    DATABASES = {"default": database_from_url(ENV["DATABASE_URL"])}
    DATABASES["default"]["TEST"] = {
        "NAME": ENV.get("PPLXWEB_TEST_DATABASE_NAME") or f"test_{DATABASES['default']['NAME']}"
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "db.sqlite3",
            "OPTIONS": {
                # IMMEDIATE: writers wait for the lock instead of "database is locked".
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": (
                    "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=20000;"
                    "PRAGMA temp_store=MEMORY;PRAGMA foreign_keys=ON;"
                ),
            },
            "TEST": {"NAME": ENV.get("PPLXWEB_TEST_DATABASE_NAME") or str(DATA_DIR / "test-db.sqlite3")},
        }
    }
# A test server subprocess is pointed at the test database with this (see tests/conftest.py).
if ENV.get("PPLXWEB_DATABASE_NAME"):
    DATABASES["default"]["NAME"] = ENV["PPLXWEB_DATABASE_NAME"]
# Keep connections between the short database calls of running answers (each call would
# otherwise open one and run the PRAGMAs again); checked before reuse.
DATABASES["default"]["CONN_MAX_AGE"] = 60
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- channel layer -----------------------------------------------------------------------------

REDIS_URL = ENV.get("REDIS_URL", "").strip()
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # channels-redis's pub/sub layer as it ships; pplxweb/sockets.py watches Redis and the
            # pages heal a lost message themselves. A command Redis does not answer in 5 s fails.
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 5, "socket_connect_timeout": 5}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- people ------------------------------------------------------------------------------------

LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "search:home"
LOGOUT_REDIRECT_URL = "accounts:login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 10},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_RATE_PER_IP = env_int(ENV, "PPLXWEB_LOGIN_RATE_PER_IP", 20, 1, 10_000)
LOGIN_RATE_PER_USER = env_int(ENV, "PPLXWEB_LOGIN_RATE_PER_USER", 10, 1, 10_000)

# --- cookies and security headers --------------------------------------------------------------

SESSION_COOKIE_NAME = "pplxweb_sessionid"
CSRF_COOKIE_NAME = "pplxweb_csrftoken"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SESSION_COOKIE_AGE = 60 * 60 * 24 * 30
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
if HTTPS:
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = env_int(ENV, "PPLXWEB_HSTS_SECONDS", 60 * 60 * 24 * 365, 0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = False
    SECURE_HSTS_PRELOAD = False
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    if TRUSTED_PROXIES:
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # A self-hosted app must not speak for its parent domain's other hosts, nor ask browsers
    # to preload it: both outlive the install. So these two HSTS hints stay off.
    SILENCED_SYSTEM_CHECKS = ["security.W005", "security.W021"]
else:
    # Plain HTTP on a home network: these four warn about HTTPS-only settings.
    SILENCED_SYSTEM_CHECKS = ["security.W004", "security.W008", "security.W012", "security.W016"]

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# --- static files ------------------------------------------------------------------------------

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG

# --- language ----------------------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = ENV.get("PPLXWEB_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- logging -----------------------------------------------------------------------------------

LOG_LEVEL = env_choice(ENV, "PPLXWEB_LOG_LEVEL", "info", ("debug", "info", "warning", "error")).upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "redact": {"()": "pplxweb.logging.RedactSecrets"},
        "redis_away": {"()": "pplxweb.logging.RedisAway"},
    },
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["redact", "redis_away"],
        }
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "pplxweb": {"level": LOG_LEVEL},
        "accounts": {"level": LOG_LEVEL},
        "search": {"level": LOG_LEVEL},
        "django.request": {"level": "ERROR"},
    },
}
