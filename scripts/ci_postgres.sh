#!/usr/bin/env bash
# Start a throw-away PostgreSQL server for the Postgres-backed Dagster tests.
#
#   eval "$(bash scripts/ci_postgres.sh)"     # exports SIGMAP_TEST_PG_URL
#   bash scripts/ci_postgres.sh stop          # stop the server (data kept)
#
# - Installs the Debian `postgresql` package when no server binaries are found
#   (apt-get, non-interactive; needs root).
# - Runs its own cluster (initdb) in $SIGMAP_PG_DIR (default /tmp/sigmap-pg), owned by the
#   `postgres` user when run as root (the server refuses to run as root), listening on
#   127.0.0.1 only, on a free port chosen at first start (or $SIGMAP_PG_PORT).
# - Creates role `sigmap` (password `sigmap`, CREATEDB so tests can make a fresh database
#   per run) and database `sigmap_test`.
# - Idempotent: a second call finds the running server and prints the same URL.
# stdout carries only the `export` line; progress goes to stderr.
set -euo pipefail

PG_DIR="${SIGMAP_PG_DIR:-/tmp/sigmap-pg}"
DATA="$PG_DIR/data"
PORT_FILE="$PG_DIR/port"
PG_USER="sigmap"
PG_PASS="sigmap"
PG_DB="sigmap_test"

log() { echo "ci_postgres: $*" >&2; }

find_bindir() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
        fi
    done | sort -V | tail -n 1
}

BINDIR="$(find_bindir)"
if [ -z "$BINDIR" ] && command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    BINDIR="$(pg_config --bindir)"
fi
if [ -z "$BINDIR" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        log "PostgreSQL server binaries not found and not root: install the Debian package 'postgresql'"
        exit 1
    fi
    log "installing the Debian package postgresql (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends postgresql </dev/null >&2
    BINDIR="$(find_bindir)"
    [ -n "$BINDIR" ] || { log "postgresql installed but initdb not found"; exit 1; }
fi

# Run server commands as the cluster owner: `postgres` when we are root, else ourselves.
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir "$PG_DIR" --shell /bin/sh postgres
    as_owner() { runuser -u postgres -- "$@"; }
    OWNER=postgres
else
    as_owner() { "$@"; }
    OWNER="$(id -un)"
fi

free_port() {
    python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

if [ "${1:-}" = "stop" ]; then
    if [ -f "$DATA/PG_VERSION" ]; then
        as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast stop >&2 || true
    fi
    exit 0
fi

mkdir -p "$PG_DIR"
chown "$OWNER" "$PG_DIR"
chmod 700 "$PG_DIR"

if [ ! -f "$DATA/PG_VERSION" ]; then
    log "initdb in $DATA ($BINDIR)"
    rm -rf "$DATA"
    as_owner "$BINDIR/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        -E UTF8 --locale=C.UTF-8 >&2 2>/dev/null \
        || { rm -rf "$DATA" && as_owner "$BINDIR/initdb" -D "$DATA" -U postgres --auth-local=trust \
            --auth-host=scram-sha-256 -E UTF8 --locale=C >&2; }
fi

if as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    PORT="$(cat "$PORT_FILE")"
    log "server already running on 127.0.0.1:$PORT"
else
    PORT="${SIGMAP_PG_PORT:-$(free_port)}"
    echo "$PORT" >"$PORT_FILE"
    log "starting server on 127.0.0.1:$PORT"
    as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$PG_DIR/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PG_DIR -c max_connections=200 -c fsync=off" \
        start >&2 || { cat "$PG_DIR/server.log" >&2; exit 1; }
fi

psql_su() { as_owner "$BINDIR/psql" -h "$PG_DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"; }

if [ "$(psql_su -c "SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER'")" != "1" ]; then
    psql_su -c "CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASS'" >&2
fi
if [ "$(psql_su -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != "1" ]; then
    psql_su -c "CREATE DATABASE $PG_DB OWNER $PG_USER" >&2
fi

URL="postgresql://$PG_USER:$PG_PASS@127.0.0.1:$PORT/$PG_DB"
# Prove the URL works over TCP with the password before handing it out.
PGPASSWORD="$PG_PASS" "$BINDIR/psql" "$URL" -qtA -c "SELECT 1" >/dev/null
log "ready: $URL"
echo "export SIGMAP_TEST_PG_URL=$URL"
