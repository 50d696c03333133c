#!/usr/bin/env bash
# Run every test twice: SQLite + in-memory channel layer, then PostgreSQL + Redis.
# Called by `make test` (the README's test command) and so by .ci/run. Installs the Debian
# packages the tests need when they are missing, starts throwaway PostgreSQL and Redis servers
# on loopback, and stops them again however the run ends.
#   PPLXWEB_TEST_SETUPS="sqlite"    run one set-up only (default: "sqlite postgres")
#   make test ARGS="-k consumer"    extra pytest arguments, passed to both runs
#   PPLXWEB_TEST_WORKERS=N          pytest workers per pass (pytest-xdist, idle workers take
#                                   waiting tests from busy ones; default 3; 0: one process).
#                                   The suite waits more than it computes (servers, browsers,
#                                   timeouts), so 3 workers on 2 cores gain.
# The SQLite pass runs every test; the PostgreSQL + Redis pass what depends on the database and
# the channel layer, and one browser journey per feature (markers: tests/conftest.py).
POSTGRES_TESTS="database and not browser or journey"
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
SETUPS=${PPLXWEB_TEST_SETUPS:-sqlite postgres}
export DEBIAN_FRONTEND=noninteractive

need=()
command -v chromium >/dev/null || need+=(chromium)
command -v redis-server >/dev/null || need+=(redis-server)
# a filesystem that ignores file modes (vfat through FUSE), for the data dir's privacy checks
command -v fusefat >/dev/null || need+=(fusefat)
command -v mkfs.vfat >/dev/null || need+=(dosfstools)
# the server's initdb: a client-only install (postgresql-client) has that folder without it
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "Installing ${need[*]} (Debian packages the tests use)..."
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "The tests need these Debian packages: sudo apt-get install ${need[*]}" >&2
    exit 1
  fi
fi

RUN=$(mktemp -d /tmp/pplxweb-test.XXXXXX)
PGBIN=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
as_postgres() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$1"; else sh -c "$1"; fi; }
cleanup() {
  if [ -f "$RUN/redis.pid" ]; then kill "$(cat "$RUN/redis.pid")" 2>/dev/null || true; fi
  if [ -f "$RUN/pg/postmaster.pid" ]; then as_postgres "$PGBIN/pg_ctl -D $RUN/pg -m fast -w stop" >/dev/null 2>&1 || true; fi
  rm -rf "$RUN"
}
trap cleanup EXIT
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_services() {
  REDIS_PORT=$(free_port)
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --save '' --appendonly no \
    --dir "$RUN" --logfile "$RUN/redis.log" --pidfile "$RUN/redis.pid" >/dev/null
  PG_PORT=$(free_port)
  mkdir -p "$RUN/pg"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$RUN" "$RUN/pg"; chmod 755 "$RUN"; fi
  as_postgres "$PGBIN/initdb -D $RUN/pg -A trust -U postgres -E UTF8 --no-instructions" >/dev/null
  as_postgres "$PGBIN/pg_ctl -D $RUN/pg -l $RUN/pg/server.log -w -o '-c listen_addresses=127.0.0.1 -p $PG_PORT -k $RUN/pg -c fsync=off -c synchronous_commit=off -c full_page_writes=off' start" >/dev/null
  "$PGBIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres \
    -c "CREATE ROLE pplxweb LOGIN PASSWORD 'pplxweb' CREATEDB" -c "CREATE DATABASE pplxweb OWNER pplxweb"
  for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
}

WORKERS=${PPLXWEB_TEST_WORKERS:-3}
PYTEST_ARGS=(-n "$WORKERS" "$@")
[ "$WORKERS" = 0 ] || PYTEST_ARGS=(--dist worksteal "${PYTEST_ARGS[@]}")
CALLER_ARGS=$#
run_suite() {  # NAME MARKERS ENV-COMMAND...: run pytest under that environment with a data dir of its own
  local name=$1 markers=$2 data
  shift 2
  echo "=== tests on $name ==="
  data=$(mktemp -d "$RUN/data-$name.XXXX")
  local rc=0
  "$@" PPLXWEB_DATA_DIR="$data" "$PY" -m pytest ${markers:+-m "$markers"} "${PYTEST_ARGS[@]}" || rc=$?
  if [ "$rc" = 5 ] && ((CALLER_ARGS > 0)); then  # a selection of the caller's that has none here
    echo "(none of the selected tests runs on $name)"
    rc=0
  fi
  return "$rc"
}

status=0
for setup in $SETUPS; do
  case "$setup" in
    sqlite)
      run_suite sqlite "${PPLXWEB_TEST_MARKERS:-}" env -u DATABASE_URL -u REDIS_URL || status=1
      ;;
    postgres)
      [ -n "${REDIS_PORT:-}" ] || start_services
      run_suite postgres "${PPLXWEB_TEST_MARKERS:-$POSTGRES_TESTS}" env DATABASE_URL="postgresql://pplxweb:pplxweb@127.0.0.1:$PG_PORT/pplxweb" \
        REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" || status=1
      ;;
    *) echo "unknown set-up $setup (sqlite, postgres)" >&2; exit 2 ;;
  esac
done
exit $status
