"""Configuration from the environment: secrets, hosts, and bad values stopping start-up."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from pplxweb import env
from pplxweb.env import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_data_dir_is_created_private(tmp_path):
    path = env.data_dir({"PPLXWEB_DATA_DIR": str(tmp_path / "d")}, ROOT)
    assert path == tmp_path / "d"
    assert mode(path) == 0o700


def test_secrets_are_generated_once_with_mode_0600_and_reused(tmp_path):
    first = env.secret_key({}, tmp_path)
    keys = env.field_keys({}, tmp_path)
    assert len(first) >= 50
    assert mode(tmp_path / "secret_key") == 0o600
    assert mode(tmp_path / "field_keys") == 0o600
    Fernet(keys[0])  # a real key
    # a restart reads the same values
    assert env.secret_key({}, tmp_path) == first
    assert env.field_keys({}, tmp_path) == keys
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_two_data_dirs_get_two_different_keys(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert env.secret_key({}, a) != env.secret_key({}, b)
    assert env.field_keys({}, a) != env.field_keys({}, b)


def test_environment_wins_over_file_and_file_over_data_dir(tmp_path):
    secret_file = tmp_path / "from_file"
    secret_file.write_text("key-from-file\n")
    both = {"PPLXWEB_SECRET_KEY": "key-from-env", "PPLXWEB_SECRET_KEY_FILE": str(secret_file)}
    assert env.secret_key(both, tmp_path) == "key-from-env"
    assert env.secret_key({"PPLXWEB_SECRET_KEY_FILE": str(secret_file)}, tmp_path) == "key-from-file"
    assert not (tmp_path / "secret_key").exists()  # nothing generated when one was given
    fernet_key = Fernet.generate_key().decode()
    assert env.field_keys({"PPLXWEB_FIELD_KEYS": fernet_key}, tmp_path) == [fernet_key]


def test_missing_or_empty_secret_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="PPLXWEB_SECRET_KEY_FILE"):
        env.secret_key({"PPLXWEB_SECRET_KEY_FILE": str(tmp_path / "nope")}, tmp_path)
    (tmp_path / "empty").write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        env.secret_key({"PPLXWEB_SECRET_KEY_FILE": str(tmp_path / "empty")}, tmp_path)


def test_an_empty_key_file_is_never_used(tmp_path):
    (tmp_path / "secret_key").write_text("")
    with pytest.raises(ConfigError, match="empty"):
        env.secret_key({}, tmp_path)


def test_bad_field_key_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="Fernet keys"):
        env.field_keys({"PPLXWEB_FIELD_KEYS": "not-a-key"}, tmp_path)


def test_unwritable_data_dir_writes_nothing(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):  # root ignores modes; use a path that cannot exist instead
        target = {"PPLXWEB_DATA_DIR": "/proc/pplxweb-cannot-exist"}
    else:
        target = {"PPLXWEB_DATA_DIR": str(locked / "d")}
    with pytest.raises(ConfigError, match="PPLXWEB_DATA_DIR"):
        env.data_dir(target, ROOT)


@pytest.mark.parametrize(
    ("raw", "host", "port"),
    [
        ("0.0.0.0:8000", "0.0.0.0", 8000),
        ("127.0.0.1:9", "127.0.0.1", 9),
        ("[::]:8443", "::", 8443),
        ("pplx.local:80", "pplx.local", 80),
    ],
)
def test_bind_accepts_host_and_port(raw, host, port):
    assert env.env_bind({"PPLXWEB_BIND": raw}) == env.Bind(host, port)


@pytest.mark.parametrize("raw", ["abc", "8000", "host:0", "host:70000", ":80", "a b:80"])
def test_bind_rejects_malformed_values(raw):
    with pytest.raises(ConfigError, match="PPLXWEB_BIND must be HOST:PORT"):
        env.env_bind({"PPLXWEB_BIND": raw})


def test_bool_rejects_maybe():
    with pytest.raises(ConfigError, match="PPLXWEB_HTTPS must be 1 or 0"):
        env.env_bool({"PPLXWEB_HTTPS": "maybe"}, "PPLXWEB_HTTPS")
    assert env.env_bool({"X": "On"}, "X") is True
    assert env.env_bool({}, "X") is False


def test_database_url_parses_postgres_and_refuses_the_rest():
    db = env.database_from_url("postgresql://app:p%40ss@db.lan:5433/pplx?sslmode=require")
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "app",
        "p@ss",
        "db.lan",
        "5433",
        "pplx",
    )
    assert db["OPTIONS"] == {"sslmode": "require"}
    for bad in ("mysql://x/y", "postgresql://host:notaport/db", "postgresql://host/", "nonsense"):
        with pytest.raises(ConfigError, match="DATABASE_URL must look like"):
            env.database_from_url(bad)


def test_allowed_hosts_never_contain_a_wildcard_by_default():
    hosts = env.allowed_hosts({})
    assert "*" not in hosts
    assert {"localhost", "127.0.0.1", "[::1]"} <= set(hosts)
    assert "pplx.example" in env.allowed_hosts({"PPLXWEB_ALLOWED_HOSTS": "pplx.example, other"})


def test_allowed_hosts_setting_has_no_wildcard(settings):
    assert "*" not in settings.ALLOWED_HOSTS


def test_trusted_proxies_must_be_addresses():
    with pytest.raises(ConfigError, match="PPLXWEB_TRUSTED_PROXIES"):
        env.env_networks({"PPLXWEB_TRUSTED_PROXIES": "proxy.lan"}, "PPLXWEB_TRUSTED_PROXIES")


def _manage(*args: str, **extra: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PPLXWEB_")}
    environ["PPLXWEB_DATA_DIR"] = os.environ["PPLXWEB_DATA_DIR"]
    environ["DJANGO_SETTINGS_MODULE"] = "pplxweb.settings"
    environ.update(extra)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("PPLXWEB_BIND", "abc", "PPLXWEB_BIND must be HOST:PORT"),
        ("PPLXWEB_HTTPS", "maybe", "PPLXWEB_HTTPS must be 1 or 0"),
        ("DATABASE_URL", "postgresql://h:port/x", "DATABASE_URL must look like"),
        ("PPLXWEB_DATA_DIR", "/proc/pplxweb-no", "PPLXWEB_DATA_DIR"),
    ],
)
def test_a_malformed_variable_stops_start_up_with_one_sentence(name, value, needle):
    result = _manage("check", **{name: value})
    assert result.returncode == 2
    assert result.stderr.strip().startswith(f"pplxweb: {needle}")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_check_deploy_passes_under_https():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", PPLXWEB_HTTPS="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_over_plain_http_silences_only_the_https_warnings():
    result = _manage("check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 silenced" in result.stdout
