#!/usr/bin/env bash
# Build the jars Spark needs for Iceberg into one directory (default var/jars), without
# Maven Central, which this network cannot reach:
#   - iceberg-spark-runtime-3.5_2.12-1.10.2.jar, taken out of the PyPI wheel
#     snowpark-connect-deps-iceberg (not installed: only downloaded and unpacked);
#   - iceberg-shaded-deps.jar: that runtime jar lacks two libraries Iceberg relocates:
#     Jackson (org.apache.iceberg.shaded.com.fasterxml.jackson.*, needed by the first metadata
#     write) and Apache HttpClient 5 (org.apache.iceberg.shaded.org.apache.hc.*, needed by
#     the REST catalog client). PySpark's own Jackson 2.15.2 and Debian's HttpClient 5.6 /
#     HttpCore 5.4 are merged and relocated there with Debian's jarjar;
#   - sqlite-jdbc.jar (Debian's xerial driver), for the local Iceberg JDBC catalog.
# Needs: java, /usr/share/java/jarjar.jar (libjarjar-java), /usr/share/java/sqlite-jdbc.jar
# (libxerial-sqlite-jdbc-java),
# apt-get and dpkg-deb (Debian unstable's libhttpclient5-java and libhttpcore5-java are
# downloaded, not installed), and a Python with pyspark and pip.
# Usage: scripts/build_jars.sh [JARS_DIR]   (PYTHON=... picks the interpreter)
# Skips the work when every jar is already there.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JARS_DIR="${1:-$ROOT/var/jars}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

ICEBERG_DIST="snowpark-connect-deps-iceberg==1.0.3"
ICEBERG_JAR="iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
JACKSON_VERSION="2.15.2"
SHADED_JAR="iceberg-shaded-deps.jar"
JARJAR="/usr/share/java/jarjar.jar"
SQLITE_JDBC_JAR="/usr/share/java/sqlite-jdbc.jar"
JARS=("$ICEBERG_JAR" "$SHADED_JAR" sqlite-jdbc.jar)

log() { printf '[build_jars] %s\n' "$*"; }

missing=0
for jar in "${JARS[@]}"; do
    [ -s "$JARS_DIR/$jar" ] || missing=1
done
if [ "$missing" -eq 0 ]; then
    exit 0
fi

log "building Spark jars in $JARS_DIR"
mkdir -p "$JARS_DIR"
# The build happens beside the target, so that the final moves are renames on one filesystem.
BUILD="$(mktemp -d "$JARS_DIR/../.jars-build.XXXXXX")"
trap 'rm -rf "$BUILD"' EXIT

PYSPARK_JARS="$("$PYTHON" -c \
    'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"

# 1. The Iceberg runtime jar, out of the wheel.
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
    --dest "$BUILD/wheel" "$ICEBERG_DIST"
"$PYTHON" - "$BUILD/wheel" "$ICEBERG_JAR" "$BUILD/$ICEBERG_JAR" <<'PY'
import glob
import shutil
import sys
import zipfile

wheel_dir, jar_name, target = sys.argv[1:4]
(wheel,) = glob.glob(f"{wheel_dir}/*.whl")
with zipfile.ZipFile(wheel) as zf:
    (member,) = [n for n in zf.namelist() if n.endswith("/" + jar_name)]
    with zf.open(member) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY

# 2. HttpClient 5.6 / HttpCore 5.4 from Debian. Iceberg 1.10's REST client needs
#    HttpClient >= 5.4 (TlsSocketStrategy); Debian stable has 5.2, so the two packages are
#    fetched from Debian unstable with a private apt configuration (nothing is installed:
#    the .deb files are only unpacked into the build folder).
APT_DIR="$BUILD/apt"
mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
    >"$APT_DIR/sources.list"
APT_OPTS=(
    -o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache"
    -o "APT::Sandbox::User=root" -o "Debug::NoLocking=1" -qq
)
apt-get "${APT_OPTS[@]}" update
(cd "$BUILD" && apt-get "${APT_OPTS[@]}" download libhttpclient5-java libhttpcore5-java)
for deb in "$BUILD"/libhttp*.deb; do
    dpkg-deb -x "$deb" "$BUILD/hc"
done

# 3. jackson-core, -databind, -annotations and HttpClient 5 merged into one jar, then
#    relocated. Python's
#    zipfile merges, so no zip/unzip/jar binary is needed; the first copy of a shared file
#    (META-INF/MANIFEST.MF, LICENSE...) wins.
"$PYTHON" - "$BUILD/merged.jar" \
    "$PYSPARK_JARS/jackson-core-$JACKSON_VERSION.jar" \
    "$PYSPARK_JARS/jackson-databind-$JACKSON_VERSION.jar" \
    "$PYSPARK_JARS/jackson-annotations-$JACKSON_VERSION.jar" \
    "$BUILD/hc/usr/share/java/httpclient5.jar" "$BUILD/hc/usr/share/java/httpcore5.jar" \
    "$BUILD/hc/usr/share/java/httpcore5-h2.jar" <<'PY'
import sys
import zipfile

target, *sources = sys.argv[1:]
seen: set[str] = set()
with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
    for source in sources:
        with zipfile.ZipFile(source) as zf:
            for info in zf.infolist():
                name = info.filename
                # jarjar ignores the META-INF/versions/N/ prefix, so multi-release copies
                # would collide with the base classes once relocated ("Duplicate jar
                # entries"); the base classes run on every Java version. module-info is
                # meaningless on Spark's classpath.
                if name in seen or name.startswith("META-INF/versions/"):
                    continue
                if name.endswith("module-info.class"):
                    continue
                if name.startswith("META-INF/") and name.endswith((".SF", ".RSA", ".DSA")):
                    continue
                seen.add(name)
                out.writestr(info, zf.read(info))
PY
cat >"$BUILD/jarjar-rules.txt" <<'RULES'
rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1
rule org.apache.hc.** org.apache.iceberg.shaded.org.apache.hc.@1
RULES
java -jar "$JARJAR" process "$BUILD/jarjar-rules.txt" \
    "$BUILD/merged.jar" "$BUILD/$SHADED_JAR"
# jarjar prints some errors (like duplicate entries) and still exits 0.
if [ ! -s "$BUILD/$SHADED_JAR" ]; then
    log "jarjar did not write $SHADED_JAR" >&2
    exit 1
fi

# 4. The SQLite JDBC driver (a symlink in /usr/share/java; cp copies the target).
cp "$SQLITE_JDBC_JAR" "$BUILD/sqlite-jdbc.jar"

# All jars land together, so an interrupted build never leaves a partial set behind.
for jar in "${JARS[@]}"; do
    mv -f "$BUILD/$jar" "$JARS_DIR/$jar"
done
log "ready: ${JARS[*]}"
