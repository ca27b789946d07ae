# One image for web, worker, beat and the Spark master and workers: the Celery worker is the
# Spark driver, so the executors must run the same Spark (pyspark 3.5.8), Java and Python
# (for Python UDFs) as the driver. Build: docker compose build.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SPARK_JARS_DIR=/opt/lakeview/jars \
    SPARK_WORKER_DIR=/tmp/spark-work \
    WAREHOUSE=/warehouse

# Java for Spark (the JDK: javac builds the sandbox's plan describer); jarjar and the
# SQLite JDBC driver for scripts/build_jars.sh.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        openjdk-17-jdk-headless libjarjar-java libxerial-sqlite-jdbc-java procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Dependencies first (read from pyproject.toml), so that code changes reuse this layer and
# the jar layer below.
COPY pyproject.toml ./
RUN python -c "import tomllib; \
print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt
COPY scripts/build_jars.sh scripts/build_jars.sh
RUN PYTHON=python scripts/build_jars.sh "$SPARK_JARS_DIR"
COPY scripts/build_sandbox_jar.sh scripts/build_sandbox_jar.sh
COPY runtime/spark/jvm runtime/spark/jvm
RUN PYTHON=python scripts/build_sandbox_jar.sh "$SPARK_JARS_DIR"

# The whole tree, last, so that code changes rebuild only what follows: .dockerignore keeps
# out what the app does not run (.venv/, var/, .git/, caches, tests, benchmarks).
# tests/unit/test_dockerfile.py checks that every package the app imports gets in.
COPY . .
# Editable, so that BASE_DIR (templates/, static/) stays /app.
RUN pip install --no-deps -e . \
    && useradd --create-home --uid 1000 lakeview \
    && mkdir -p /warehouse /query-results /metrics /app/var/staticfiles /tmp/spark-work \
    && chown -R lakeview:lakeview /warehouse /query-results /metrics /app/var /tmp/spark-work

USER lakeview
EXPOSE 8000 8181
CMD ["gunicorn", "-c", "webapp/gunicorn.conf.py", "webapp.wsgi:application"]
