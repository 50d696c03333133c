"""Typed readers for pplxweb's environment and its generated secrets.

settings.py is the only caller; the helpers live here so tests can call them with their own
environment. Every bad value raises ConfigError with one sentence that names the variable and
the form it accepts; manage.py prints that sentence and exits instead of a traceback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ImproperlyConfigured):
    """A configuration value is wrong; the message is one sentence for a person."""


Environ = Mapping[str, str]


def env_bool(env: Environ, name: str, default: bool = False) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ConfigError(f"{name} must be 1 or 0 (or true/false, yes/no, on/off); got {raw!r}.")


def env_int(env: Environ, name: str, default: int, minimum: int = 0, maximum: int = 2**31) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or not minimum <= value <= maximum:
        raise ConfigError(f"{name} must be a whole number from {minimum} to {maximum}; got {raw!r}.")
    return value


def env_float(env: Environ, name: str, default: float, minimum: float = 0.0, maximum: float = 1e9) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        value = None
    if value is None or not minimum <= value <= maximum:
        raise ConfigError(f"{name} must be a number from {minimum:g} to {maximum:g}; got {raw!r}.")
    return value


def env_list(env: Environ, name: str) -> list[str]:
    return [item.strip() for item in env.get(name, "").split(",") if item.strip()]


def env_origins(env: Environ, name: str) -> list[str]:
    """Browser origins (scheme://host[:port], nothing after), comma separated."""
    origins = []
    for item in env_list(env, name):
        parts = urlsplit(item)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ConfigError(f"{name} takes origins such as https://chat.example.com; got {item!r}.")
        origins.append(f"{parts.scheme}://{parts.netloc}".lower())
    return origins


def env_choice(env: Environ, name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env.get(name, default).strip().lower() or default
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}.")
    return value


def env_name(env: Environ, name: str) -> str:
    """A short name (letters, digits, `.`, `_`, `-`; at most 64), or "" when unset."""
    value = env.get(name, "").strip()
    if value and not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", value):
        raise ConfigError(f"{name} takes letters, digits, '.', '_' and '-' (at most 64); got {value[:80]!r}.")
    return value


def env_url(env: Environ, name: str, default: str) -> str:
    value = env.get(name, default).strip().rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name} must be an http(s) URL such as {default}; got {value!r}.")
    return value


# --- where to listen -------------------------------------------------------------------------

BIND_RE = re.compile(r"^(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[A-Za-z0-9.\-]+)):(?P<port>\d{1,5})$")


@dataclass(frozen=True)
class Bind:
    host: str
    port: int


def env_bind(env: Environ, name: str = "PPLXWEB_BIND", default: str = "0.0.0.0:8000") -> Bind:
    raw = env.get(name, default).strip() or default
    match = BIND_RE.match(raw)
    port = int(match["port"]) if match else 0
    if not match or not 1 <= port <= 65535:
        raise ConfigError(
            f"{name} must be HOST:PORT, for example 0.0.0.0:8000, 127.0.0.1:8000 or [::]:8000; got {raw!r}."
        )
    return Bind(host=match["v6"] or match["host"], port=port)


# --- networks --------------------------------------------------------------------------------


def env_networks(env: Environ, name: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for item in env_list(env, name):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ConfigError(
                f"{name} must be a comma-separated list of IP addresses or networks "
                f"(e.g. 127.0.0.1,10.0.0.0/8); {item!r} is not one."
            ) from None
    return tuple(networks)


def local_addresses() -> set[str]:
    """This machine's own interface addresses, read locally (no packet is sent)."""
    found: set[str] = set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(str(info[4][0]))
    except OSError:
        pass
    found |= _ipv4_from_interfaces()
    found |= _ipv6_from_proc()
    return {a.split("%")[0] for a in found if a}


def _ipv4_from_interfaces() -> set[str]:
    try:
        import fcntl
        import struct
    except ImportError:  # not Linux
        return set()
    found = set()
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(sock.fileno(), siocgifaddr, struct.pack("256s", name[:15].encode()))
            except OSError:
                continue
            found.add(socket.inet_ntoa(packed[20:24]))
    return found


def _ipv6_from_proc() -> set[str]:
    try:
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        hexaddr = line.split()[0]
        addr = ipaddress.IPv6Address(bytes.fromhex(hexaddr))
        if not addr.is_link_local:
            found.add(str(addr))
    return found


def allowed_hosts(env: Environ) -> list[str]:
    """localhost, this machine's names and addresses, and PPLXWEB_ALLOWED_HOSTS. Never "*"."""
    hosts = {"localhost", "127.0.0.1", "[::1]"}
    name = socket.gethostname()
    if name:
        hosts |= {name, f"{name}.local", socket.getfqdn(name)}
    for addr in local_addresses():
        hosts.add(f"[{addr}]" if ":" in addr else addr)
    hosts |= set(env_list(env, "PPLXWEB_ALLOWED_HOSTS"))
    return sorted(h for h in hosts if h)


# --- database --------------------------------------------------------------------------------

DATABASE_URL_FORM = "postgresql://USER:PASSWORD@HOST:PORT/NAME"


def database_from_url(url: str) -> dict:
    """A Django DATABASES entry for a PostgreSQL URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("postgres", "postgresql") or not parts.path.strip("/"):
        raise ConfigError(f"DATABASE_URL must look like {DATABASE_URL_FORM}; it does not parse.")
    options = dict(parse_qsl(parts.query))
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(port or ""),
        "OPTIONS": options,
    }


# --- the data dir and its secrets ------------------------------------------------------------


def data_dir(env: Environ, base: Path) -> Path:
    """The data dir, created 0700; ConfigError when it cannot be created or written."""
    raw = env.get("PPLXWEB_DATA_DIR", "").strip()
    path = Path(raw).expanduser() if raw else base / "data"
    if not path.is_absolute():
        path = base / path
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"PPLXWEB_DATA_DIR ({path}) cannot be created: {exc.strerror}. "
            "Point it at a folder this user may write."
        ) from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(
            f"PPLXWEB_DATA_DIR ({path}) is not a writable folder. Point it at a folder this user may write."
        )
    return path


def env_secret(env: Environ, name: str) -> str | None:
    """NAME from the environment, else the file named by NAME_FILE, else None."""
    value = env.get(name, "").strip()
    if value:
        return value
    file_name = env.get(f"{name}_FILE", "").strip()
    if not file_name:
        return None
    try:
        value = Path(file_name).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{name}_FILE ({file_name}) cannot be read: {exc.strerror}.") from None
    if not value:
        raise ConfigError(f"{name}_FILE ({file_name}) is empty.")
    return value


def stored_secret(path: Path, generate: Callable[[], str]) -> str:
    """Read the secret at path, creating it once (mode 0600) if it does not exist.

    The value is written to a private temporary file first and then linked into place, so a
    crash never leaves an empty or half-written key file, and two processes starting at once
    agree on one value (the loser of the link race reads the winner's file).
    """
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(generate() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process won the race: use its key
            os.link(tmp, path)
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {exc.strerror}. Check PPLXWEB_DATA_DIR.") from None
    finally:
        tmp.unlink(missing_ok=True)
    return _read_secret(path)


def _read_secret(path: Path) -> str:
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"Cannot read {path}: {exc.strerror}.") from None
    if not value:
        raise ConfigError(f"{path} is empty; delete it to generate a new one or restore it from a backup.")
    return value


def secret_key(env: Environ, directory: Path) -> str:
    return env_secret(env, "PPLXWEB_SECRET_KEY") or stored_secret(
        directory / "secret_key", lambda: secrets.token_urlsafe(50)
    )


def field_keys(env: Environ, directory: Path) -> list[str]:
    """Fernet keys for encrypted columns, newest first (the first encrypts, all decrypt)."""
    from cryptography.fernet import Fernet

    raw = env_secret(env, "PPLXWEB_FIELD_KEYS") or stored_secret(
        directory / "field_keys", lambda: Fernet.generate_key().decode()
    )
    keys = [k.strip() for k in re.split(r"[\s,]+", raw) if k.strip()]
    for key in keys:
        try:
            Fernet(key)
        except ValueError:
            raise ConfigError(
                "PPLXWEB_FIELD_KEYS must hold Fernet keys (44 url-safe base64 characters each, "
                "newest first, separated by commas or new lines); one is not."
            ) from None
    return keys
