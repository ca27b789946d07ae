#!/usr/bin/env bash
# Compile the app's JVM helpers (runtime/spark/jvm/*.java: the sandbox's plan describer, the
# maintenance actions' path collector, the commit-properties runner) against the venv's PySpark jars into JARS_DIR/lakeview-sandbox.jar, where every Spark session of the
# app finds it (runtime/spark/session.py puts every jar of the folder on spark.jars).
# Rebuilt when the source is newer than the jar; needs javac (openjdk-17-jdk-headless).
# Usage: scripts/build_sandbox_jar.sh [JARS_DIR]   (PYTHON=... picks the interpreter)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JARS_DIR="${1:-$ROOT/var/jars}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
SOURCES=("$ROOT"/runtime/spark/jvm/*.java)
JAR="$JARS_DIR/lakeview-sandbox.jar"

STALE=0
[ -s "$JAR" ] || STALE=1
for SOURCE in "${SOURCES[@]}"; do
    [ "$JAR" -nt "$SOURCE" ] || STALE=1
done
if [ "$STALE" = 0 ]; then
    exit 0
fi
echo "[build_sandbox_jar] compiling ${SOURCES[*]}"
PYSPARK_JARS="$("$PYTHON" -c \
    'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
mkdir -p "$JARS_DIR"
BUILD="$(mktemp -d "$JARS_DIR/../.sandbox-build.XXXXXX")"
trap 'rm -rf "$BUILD"' EXIT
# Iceberg's runtime (JARS_DIR, fetched first by build_jars.sh) for the commit helper.
javac -nowarn --release 17 -cp "$PYSPARK_JARS/*:$JARS_DIR/*" -d "$BUILD/classes" "${SOURCES[@]}"
jar --create --file "$BUILD/lakeview-sandbox.jar" -C "$BUILD/classes" .
mv -f "$BUILD/lakeview-sandbox.jar" "$JAR"
