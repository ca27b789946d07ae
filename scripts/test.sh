#!/usr/bin/env bash
# `make test`: lint, then the whole suite on SQLite, then the integration tests again on a
# throwaway PostgreSQL 15. A throwaway Redis serves Celery. Everything temporary lives in one
# temp folder that the exit trap removes, together with the servers.
#
#   make test                  everything
#   make test ARGS="-k views"  lint, then pytest with those arguments on SQLite only
#   scripts/test.sh -k views   the same
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# pytest arguments: on the command line, or from make's ARGS (shell-quoted, so that
# ARGS='-k "a or b"' stays one expression).
if [ "$#" -eq 0 ] && [ -n "${ARGS:-}" ]; then
    eval "set -- $ARGS"
fi

bash scripts/bootstrap.sh

export PATH="$ROOT/.venv/bin:$PATH"
# pytest-django takes the environment over pyproject.toml; pin it so that a shell that
# exported the dev settings cannot run the tests against var/db.sqlite3.
export DJANGO_SETTINGS_MODULE=webapp.settings.test
# Playwright drives Debian's Chromium: no browser download (the network has none to offer).
export PLAYWRIGHT_CHROMIUM_EXECUTABLE="${PLAYWRIGHT_CHROMIUM_EXECUTABLE:-/usr/bin/chromium}"

# Overridable so that two checkouts (git worktrees) can run their tests side by side.
REDIS_PORT="${LAKEVIEW_TEST_REDIS_PORT:-6390}"
PG_PORT="${LAKEVIEW_TEST_PG_PORT:-54329}"

log() { printf '[test] %s\n' "$*"; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/lakeview-test.XXXXXX")"
# The postgres user must be able to reach its data folder inside.
chmod 755 "$TMP"
REDIS_PID=""
PG_STARTED=0

as_postgres() {
    # PostgreSQL refuses to run as root; as any other user it runs as that user.
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$REDIS_PID" ]; then
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    if [ "$PG_STARTED" -eq 1 ]; then
        as_postgres "$PG_BIN/pg_ctl" -D "$TMP/pg/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$TMP"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Redis ---------------------------------------------------------------------------------
if redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    log "port $REDIS_PORT is taken (a leftover test Redis?); stop it first" >&2
    exit 1
fi
mkdir -p "$TMP/redis"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
    --daemonize no --dir "$TMP/redis" --logfile "$TMP/redis/redis.log" &
REDIS_PID=$!
for _ in $(seq 1 50); do
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break
    sleep 0.1
done
if ! redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then
    log "Redis did not start:" >&2
    cat "$TMP/redis/redis.log" >&2 || true
    exit 1
fi
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"

# --- PostgreSQL 15 -------------------------------------------------------------------------
PG_BIN=/usr/lib/postgresql/15/bin
if [ ! -x "$PG_BIN/initdb" ]; then
    PG_BIN="$(pg_config --bindir)"
fi
mkdir -p "$TMP/pg/socket"
if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres:postgres "$TMP/pg"
fi
as_postgres "$PG_BIN/initdb" -D "$TMP/pg/data" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C --no-instructions >"$TMP/initdb.log" 2>&1 \
    || { cat "$TMP/initdb.log" >&2; exit 1; }
# Durability is pointless for a database that dies with the run; turning it off saves time.
# At a lower CPU priority, as the PostgreSQL lane of the tests below is (its backends share it).
if ! as_postgres nice -n 19 "$PG_BIN/pg_ctl" -D "$TMP/pg/data" -l "$TMP/pg/postgres.log" -w -t 60 \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$TMP/pg/socket \
        -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >/dev/null; then
    log "PostgreSQL did not start:" >&2
    cat "$TMP/pg/postgres.log" >&2 || true
    exit 1
fi
PG_STARTED=1
"$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres lakeview
export PG_DATABASE_URL="postgresql://postgres@127.0.0.1:$PG_PORT/lakeview"

# --- Checks --------------------------------------------------------------------------------
failed=()
step() {
    local name=$1
    shift
    log "$name: $*"
    local status=0
    "$@" || status=$?
    if [ "$status" -eq 5 ]; then
        # pytest: no tests collected. A run that tests nothing must not pass.
        log "$name collected no tests" >&2
    fi
    if [ "$status" -ne 0 ]; then
        failed+=("$name (exit $status)")
    fi
}

step "ruff check" ruff check .
step "ruff format" ruff format --check .
step "module index" python scripts/module_index.py --check

mkdir -p "$TMP/warehouse-sqlite" "$TMP/warehouse-sqlite-stacks" "$TMP/warehouse-pg"
if [ "$#" -gt 0 ]; then
    step "pytest (SQLite)" env -u DATABASE_URL WAREHOUSE="$TMP/warehouse-sqlite" pytest "$@"
else
    # Two lanes at once: the Spark and browser tests spend most of their time waiting (for a
    # JVM, a worker, a stream's trigger, a page), which the unit and integration tests (on
    # SQLite, then on PostgreSQL) fill at the lowest CPU priority, below even the stacks'
    # workers (nice 10), so that the first lane's Spark and timed waits are not starved.
    # Their databases, warehouses and Redis databases are apart (the stacks use their own:
    # tests/refresh_stack.py). The second lane's output follows the first's.
    # First, alone: the flood test times every answer of the app under a flood (under 1 s),
    # which a second lane's processes beside it would time too.
    timed=tests/spark/test_abuse.py
    step "pytest $timed (SQLite, alone)" \
        env -u DATABASE_URL WAREHOUSE="$TMP/warehouse-sqlite-stacks" pytest "$timed"
    lane="$TMP/lane-integration.log"
    (
        status=0
        nice -n 19 env -u DATABASE_URL WAREHOUSE="$TMP/warehouse-sqlite" \
            pytest tests/unit tests/integration >"$lane.sqlite" 2>&1 || status=1
        nice -n 19 env DATABASE_URL="$PG_DATABASE_URL" WAREHOUSE="$TMP/warehouse-pg" \
            pytest tests/integration >"$lane.pg" 2>&1 || status=$((status + 2))
        exit "$status"
    ) &
    lane_pid=$!
    step "pytest tests/spark tests/browser (SQLite)" \
        env -u DATABASE_URL WAREHOUSE="$TMP/warehouse-sqlite-stacks" \
        pytest tests/spark tests/browser --ignore="$timed"
    lane_status=0
    wait "$lane_pid" || lane_status=$?
    log "pytest tests/unit tests/integration (SQLite):"
    cat "$lane.sqlite"
    log "pytest tests/integration (PostgreSQL):"
    cat "$lane.pg" 2>/dev/null || true
    if [ $((lane_status & 1)) -ne 0 ]; then
        failed+=("pytest tests/unit tests/integration (SQLite)")
    fi
    if [ $((lane_status & 2)) -ne 0 ]; then
        failed+=("pytest tests/integration (PostgreSQL)")
    fi
fi

if [ "${#failed[@]}" -gt 0 ]; then
    log "FAILED:" >&2
    for name in "${failed[@]}"; do
        log "  $name" >&2
    done
    exit 1
fi
log "all checks passed"
