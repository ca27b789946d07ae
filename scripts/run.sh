#!/usr/bin/env bash
# `make run`: the whole app on this machine. Django's development server on
# http://127.0.0.1:8000, a Celery worker, celery-beat, the streaming process of continuous
# materialized tables and (unless one already answers) a local Redis on 127.0.0.1:6379; a
# new database gets the sample data (LOAD_SAMPLES=0: not).
# SQLite and the warehouse live under var/. Ctrl-C stops everything.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/bootstrap.sh

export DJANGO_SETTINGS_MODULE=webapp.settings.dev
export PATH="$ROOT/.venv/bin:$PATH"
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
REDIS_PORT=6379
# The server's address, the host names it answers to (ALLOWED_HOSTS) and where the worker
# and the streaming host reach its catalog (CATALOG_URI), from HOST and PORT
# (webapp/run_addresses.py): with HOST=0.0.0.0, this machine's names and addresses are
# allowed, and the workers connect to 127.0.0.1, since 0.0.0.0 is no address to connect to.
# (An assignment first, so that `set -e` stops here if it fails.)
addresses="$(HOST="$HOST" PORT="$PORT" python -m webapp.run_addresses)"
eval "$addresses"

log() { printf '[run] %s\n' "$*"; }

mkdir -p var/warehouse var/external var/redis var/log

pids=()
cleanup() {
    trap - INT TERM EXIT
    if [ "${#pids[@]}" -gt 0 ]; then
        log "stopping ${pids[*]}"
        kill -TERM "${pids[@]}" 2>/dev/null || true
        # Celery finishes its current task on TERM; give everything a moment, then insist.
        for _ in $(seq 1 20); do
            alive=0
            for pid in "${pids[@]}"; do
                kill -0 "$pid" 2>/dev/null && alive=1
            done
            [ "$alive" -eq 0 ] && break
            sleep 0.5
        done
        kill -KILL "${pids[@]}" 2>/dev/null || true
    fi
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

# --- Redis: Celery's broker --------------------------------------------------------------
redis_answers() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }
if redis_answers; then
    log "using the Redis already answering on 127.0.0.1:$REDIS_PORT"
else
    log "starting Redis on 127.0.0.1:$REDIS_PORT (data in var/redis)"
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize no --dir "$ROOT/var/redis" \
        --logfile "$ROOT/var/log/redis.log" &
    pids+=("$!")
    for _ in $(seq 1 50); do
        redis_answers && break
        sleep 0.1
    done
    redis_answers || { log "Redis did not start; see var/log/redis.log" >&2; exit 1; }
fi
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:$REDIS_PORT/0}"

# --- Database ----------------------------------------------------------------------------
python manage.py migrate --noinput

# A first administrator, so that a fresh clone can log in at once. The generated password is
# kept in var/admin-password.txt (git-ignored, mode 600) so that every run can show it again,
# last, once everything runs.
banner="$(python manage.py shell --no-imports -c '
import secrets
from pathlib import Path

from django.contrib.auth import get_user_model

User = get_user_model()
password_file = Path("var/admin-password.txt")
if not User.objects.exists():
    password = secrets.token_urlsafe(12)
    User.objects.create_superuser("admin", "admin@localhost", password)
    password_file.write_text(password + "\n")
    password_file.chmod(0o600)
admin = User.objects.filter(username="admin").first()
password = password_file.read_text().strip() if password_file.exists() else None
bar = "=" * 64
print(bar)
if admin is not None and password and admin.check_password(password):
    print("  Log in as   username: admin")
    print(f"              password: {password}")
    print("  (stored in var/admin-password.txt)")
else:
    print("  Log in with your existing account (the generated admin password")
    print("  no longer applies or users existed before).")
print(bar)
')"

# The sample data (namespace samples, about a million rows) on a new database; a no-op
# once it is there, when someone dropped it, and with LOAD_SAMPLES=0 (as compose's migrate).
python manage.py load_samples --not-if-dropped --unless-turned-off

# --- Metrics -----------------------------------------------------------------------------
# Every process below records its Prometheus metrics in one folder, which GET /metrics
# sums (infra/metrics.py); emptied here, at the start, so that counts start from zero.
export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-$ROOT/var/metrics}"
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
find "$PROMETHEUS_MULTIPROC_DIR" -maxdepth 1 -type f -name '*.db' -delete

# --- The app -----------------------------------------------------------------------------
# The development server logs requests here; the worker, beat and the streaming host log to
# var/log/, so that this terminal stays readable (beat alone writes a line every few seconds).
python manage.py runserver "$RUN_ADDRPORT" --noreload &
pids+=("$!")
# One worker process: its threads share one Spark session (started by the first refresh or
# schema analysis, kept until the worker stops). Refresh jobs write through the app's own
# Iceberg REST catalog at CATALOG_URI (exported above).
celery -A webapp worker -l info --pool threads >>var/log/worker.log 2>&1 &
pids+=("$!")
celery -A webapp beat -l info --scheduler django_celery_beat.schedulers:DatabaseScheduler \
    >>var/log/beat.log 2>&1 &
pids+=("$!")
# The streaming process of continuous materialized tables (its Spark starts with the first
# one; it follows the database, so tables come and go without a restart).
python manage.py run_streams >>var/log/streams.log 2>&1 &
pids+=("$!")
names=(server worker beat streams)

sleep 2
printf '%s\n' "$banner"
read -r -a urls <<<"$RUN_URLS"
log "app on ${urls[0]} (admin: ${urls[0]}admin/); Ctrl-C stops everything"
if [ "${#urls[@]}" -gt 1 ]; then
    log "from other machines: ${urls[*]:1}"
fi
log "the worker, beat and the streaming host log to var/log/{worker,beat,streams}.log"
# When any process ends (a crash, a port in use), stop the rest rather than run half an app,
# and show why it ended.
status=0
wait -n "${pids[@]}" || status=$?
for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
        log "the ${names[$i]} process exited (status $status); stopping the others"
        if [ "${names[$i]}" != server ]; then
            tail -n 20 "var/log/${names[$i]}.log" >&2 || true
        fi
    fi
done
exit "$status"
