"""Settings shared by every environment. Each value a deployment changes comes from the
environment; dev.py, test.py and prod.py choose the defaults."""

import ipaddress
import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from infra.proxies import parse_networks

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in (env(name, default) or "").split(",") if item.strip()]


SECRET_KEY = env("SECRET_KEY", "dev-only-insecure-key")
DEBUG = False
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    # Swagger UI's and ReDoc's files, served locally for /api/docs/ (no CDN).
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "catalog",
    "refresh",
    "maintenance",
    "alerts",
]

MIDDLEWARE = [
    # The client's address and scheme, from X-Forwarded-For / X-Forwarded-Proto or Forwarded
    # when (only when) the connection comes from TRUSTED_PROXIES: before anything reads them.
    "infra.proxies.TrustedProxyMiddleware",
    # /healthz and /readyz, answered before the host check, sessions and CSRF (probes).
    "webapp.health.HealthMiddleware",
    # GET /metrics for Prometheus, from allowed addresses only (infra/metrics_endpoint.py).
    "infra.metrics_endpoint.MetricsEndpointMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files under gunicorn (DEBUG=0) too: pages are styled and charted in production.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Every request counted and timed by its route's name (static files are not).
    "infra.metrics.RequestMetricsMiddleware",
    "infra.middleware.MachineErrorsMiddleware",
    # Django's own four of a browser's state, passed by an engine's cookieless request to
    # /iceberg/, for which each provably does nothing (infra/browser_state.py).
    "infra.browser_state.BrowserSessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "infra.browser_state.BrowserCsrfViewMiddleware",
    "infra.browser_state.BrowserAuthenticationMiddleware",
    "infra.browser_state.BrowserMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # With DEBUG on, the styled 404 page instead of Django's list of URL patterns.
    "catalog.pages.errors.NotFoundPageMiddleware",
    # A page's refusal (a 403, a 404 hiding an object) recorded for the audit.
    "catalog.access_events.RefusalsMiddleware",
]

ROOT_URLCONF = "webapp.urls"

# Proxies whose word on the client is believed (infra/proxies.py): networks or single
# addresses. A request whose connection comes from one of them has its client address and
# scheme taken from X-Forwarded-For / X-Forwarded-Proto or Forwarded (the right-most hop
# that is not one of them); from anywhere else those headers are ignored. Empty: the
# socket's address, always. SECURE_PROXY_SSL_HEADER stays unset: it believes any sender.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", "")
# Refused at start-up, naming the value, rather than at each request.
parse_networks(TRUSTED_PROXIES, setting="TRUSTED_PROXIES")

# Failed sign-ins (catalog/throttle.py, whose docstring has the reasoning): an account (a user
# name, an engine's client id) with LOGIN_FAILURES_ALLOWED failures waits 2, 4, 8... seconds
# after each further one, at most LOGIN_FAILURE_DELAY_MAX_SECONDS; an address whose failures
# span LOGIN_SPRAY_ACCOUNTS user names waits the same way for those names. Failures older
# than LOGIN_FAILURE_WINDOW_SECONDS are forgotten.
LOGIN_FAILURES_ALLOWED = int(env("LOGIN_FAILURES_ALLOWED", "10"))
LOGIN_FAILURE_DELAY_MAX_SECONDS = int(env("LOGIN_FAILURE_DELAY_MAX_SECONDS", "900"))
LOGIN_SPRAY_ACCOUNTS = int(env("LOGIN_SPRAY_ACCOUNTS", "10"))
LOGIN_FAILURE_WINDOW_SECONDS = int(env("LOGIN_FAILURE_WINDOW_SECONDS", "43200"))

# Who may read GET /metrics (infra/metrics_endpoint.py): with METRICS_TOKEN set, requests
# must carry it as a bearer token; METRICS_ALLOWED_NETWORKS (CIDRs) limits the client
# addresses: loopback by default, any address by default once a token guards it. Others
# get the 404 of any unknown path.
METRICS_TOKEN = env("METRICS_TOKEN", "") or ""
METRICS_ALLOWED_NETWORKS = env_list(
    "METRICS_ALLOWED_NETWORKS", "0.0.0.0/0,::/0" if METRICS_TOKEN else "127.0.0.0/8,::1/128"
)
for _cidr in METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_cidr, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"METRICS_ALLOWED_NETWORKS: {_cidr!r} is not a network (CIDR, as 10.0.0.0/8)"
        ) from None

# Request bodies: a commit or a view is a few kilobytes; refuse what no client sends before
# parsing it (RequestDataTooBig -> 413), and documents nested deeper than any metadata.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(env("MAX_REQUEST_BYTES", str(8 * 1024 * 1024)))
JSON_MAX_DEPTH = 64
# Uploaded files (a CSV, Parquet or JSON lines file that becomes a table): every file part of
# a request is streamed to UPLOAD_DIR under a random name by the app's one upload handler
# (catalog/uploads.py), never held in memory (so FILE_UPLOAD_MAX_MEMORY_SIZE, the threshold
# of Django's in-memory handler, applies to nothing), and a request's files may total at
# most UPLOAD_MAX_BYTES (413 past it). A file kept for a page's second step ("Create
# table") is deleted after UPLOAD_KEEP_SECONDS if that step never comes.
FILE_UPLOAD_HANDLERS = ["catalog.uploads.StagingUploadHandler"]
UPLOAD_DIR = env("UPLOAD_DIR", str(BASE_DIR / "var" / "uploads"))
UPLOAD_MAX_BYTES = int(env("UPLOAD_MAX_BYTES", str(1 << 30)))
UPLOAD_KEEP_SECONDS = int(env("UPLOAD_KEEP_SECONDS", str(24 * 3600)))
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "catalog.pages.context_processors.roles",
            ],
        },
    },
]

DATABASE_URL = env("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Writers queue for the lock instead of failing at once with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # The web app, the refresh worker and beat share the file: a transaction that starts
    # reading and then writes would fail at once with "database is locked" when another
    # process wrote in between; taking the write lock at BEGIN makes it wait instead.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    # Write-ahead logging: readers (pages, engines' loads) never wait for a writer's commit
    # (a refresh's, a worker's), which in SQLite's default mode locks them out meanwhile.
    DATABASES["default"]["OPTIONS"]["init_command"] = (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )

if (
    DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    and env("DB_PREPARED_STATEMENTS", "1") == "1"
):
    # Server-side prepared statements (psycopg 3), which Django turns off by default: the
    # ORM's own queries still bind on the client and are never prepared; only load-table's
    # pointer query asks for one (catalog/iceberg_rest/table_loads.py), so that PostgreSQL
    # plans it once per connection instead of on every load. Connections are kept
    # (conn_max_age above), so each is prepared once per 60 s. A pooler in transaction mode
    # that cannot carry them (PgBouncer before 1.21) needs DB_PREPARED_STATEMENTS=0.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "var" / "staticfiles"
# WhiteNoise serves static/ straight from the finders, so no collectstatic step is needed
# for `make run`, the tests or the image.
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "catalog:namespace-list"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["catalog.api.permissions.CatalogRolePermission"],
    "DEFAULT_PARSER_CLASSES": [
        "catalog.api.parsers.CheckedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "catalog.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Lakeview API",
    "DESCRIPTION": "Namespaces and Iceberg views: create, replace, roll back, inspect.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: Redis is both broker and result store.
REDIS_URL = env("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Fixed housekeeping; beat's database scheduler copies these into its PeriodicTask rows.
CELERY_BEAT_SCHEDULE = {
    "purge-expired-tokens": {"task": "catalog.purge_expired_tokens", "schedule": 3600.0},
}
# The Iceberg REST catalog's Idempotency-Key (catalog/iceberg_rest/idempotency.py): how long
# a key answers the retries of its request, from its first use, as the ISO-8601 duration
# GET /v1/config advertises (idempotency-key-lifetime). The hourly purge-expired-tokens
# sweep deletes keys past it.
ICEBERG_IDEMPOTENCY_KEY_LIFETIME = env("ICEBERG_IDEMPOTENCY_KEY_LIFETIME", "PT30M")

# The lakehouse. Every view and table location lies under WAREHOUSE; a location outside it
# is refused, so that the catalog never writes where an operator did not point it.
WAREHOUSE = env("WAREHOUSE", str(BASE_DIR / "var" / "warehouse"))
# Where tables written by other systems may be attached from (read-only): local folders
# or URIs (s3://bucket/prefix) that pyiceberg's FileIO reads. A location outside all of
# them is refused, so that a user cannot make the app list or read any folder it can see.
ATTACH_LOCATIONS = env_list("ATTACH_LOCATIONS", str(BASE_DIR / "var" / "external"))
# FileIO properties for object stores, as JSON with pyiceberg's names, e.g.
# {"s3.endpoint": "http://minio:9000", "s3.access-key-id": "...", "s3.secret-access-key":
# "...", "s3.region": "us-east-1"}: attached tables on S3 are read with them.
FILE_IO_PROPERTIES = json.loads(env("FILE_IO_PROPERTIES", "{}") or "{}")
# Bytes of metadata (JSON, manifest lists, manifests) kept in each process's cache for
# browsing and previews.
METADATA_CACHE_BYTES = int(env("METADATA_CACHE_BYTES", str(64 * 1024 * 1024)))
# Where engines plan table scans, as GET /iceberg/v1/config tells them
# ("scan-planning-mode"): "client" (left unsaid: they read manifests themselves, as
# before, unless they ask for server-side planning) or "server" (the catalog
# plans; pyiceberg 0.12 and newer Java clients then call planTableScan). The endpoints are
# served either way, for a client that asks for server-side planning itself.
ICEBERG_SCAN_PLANNING_MODE = (env("ICEBERG_SCAN_PLANNING_MODE", "client") or "client").lower()
if ICEBERG_SCAN_PLANNING_MODE not in ("client", "server"):
    raise ImproperlyConfigured(
        f"ICEBERG_SCAN_PLANNING_MODE must be client or server, not {ICEBERG_SCAN_PLANNING_MODE!r}"
    )
# The catalog name engines see (Spark's spark.sql.catalog.<name>); views store it as their
# default catalog only when a user names one.
CATALOG_NAME = env("CATALOG_NAME", "lakeview")
# Dialects every view version carries a representation for, transpiled from the original.
VIEW_DIALECTS = env_list("VIEW_DIALECTS", "spark,trino")

SPARK_MASTER = env("SPARK_MASTER", "local[2]")
SPARK_JARS_DIR = env("SPARK_JARS_DIR", str(BASE_DIR / "var" / "jars"))
# More Spark properties for every session the app starts (the workers', the streaming
# hosts'), as a JSON object: what a cluster needs, such as
# {"spark.cores.max": "1", "spark.executor.memory": "512m", "spark.driver.host": "10.0.0.5"}.
# The sandbox's settings cannot be changed here (runtime/spark/session.py refuses).
SPARK_CONF = json.loads(env("SPARK_CONF", "{}") or "{}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # One line per record: user text in a message cannot forge records (infra/logs.py).
    "formatters": {
        "one_line": {
            "()": "infra.logs.OneLineFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "message": {"format": "%(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "one_line"},
        # The audit's access events: the JSON line alone (it holds its own time), for a
        # SIEM to read as it is; json.dumps has escaped every control character already.
        "access": {"class": "infra.logs.LineHandler", "formatter": "message"},
    },
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    # A 404 is an answer, not a problem: Spark asks for a view of every table's name first.
    "loggers": {
        "django.request": {"level": "ERROR"},
        # The audit's access events, one JSON line each (catalog/access_log.py), for a SIEM
        # to collect: written whatever LOG_LEVEL is (AUDIT_READS=0 turns them off).
        "lakeview.access": {"level": "INFO", "handlers": ["access"], "propagate": False},
    },
}

# The sample data (namespace samples, about a million rows): the launchers (`make run`,
# compose's migrate) load it into a new database unless LOAD_SAMPLES=0
# (`manage.py load_samples --unless-turned-off`).
LOAD_SAMPLES = env("LOAD_SAMPLES", "1") != "0"

# Materialized tables. Refresh workers write through the app's own Iceberg REST catalog at
# CATALOG_URI (as the app serves it), with a credential the app makes for itself.
CATALOG_URI = env("CATALOG_URI", "http://127.0.0.1:8000/iceberg")
SPARK_DRIVER_MEMORY = env("SPARK_DRIVER_MEMORY", "1g")
SPARK_SHUFFLE_PARTITIONS = int(env("SPARK_SHUFFLE_PARTITIONS", "2"))
# Flink's materialized-table.refresh-mode.freshness-threshold, in seconds: a freshness
# strictly below it is CONTINUOUS unless REFRESH_MODE says otherwise.
MT_FRESHNESS_THRESHOLD_SECONDS = int(env("MT_FRESHNESS_THRESHOLD_SECONDS", "1800"))
# Snowflake suspends a dynamic table after 5 consecutive failed refreshes.
MT_FAILURES_BEFORE_SUSPEND = int(env("MT_FAILURES_BEFORE_SUSPEND", "5"))
# A running refresh reports every few seconds; one silent this long lost its worker.
MT_HEARTBEAT_SECONDS = 5
# The longest one batch refresh (or rebuild) may run before its worker stops its Spark jobs
# and fails it; a table's `refresh.timeout-seconds` option may only lower it. 0: no limit.
# A runaway query (a cross join an editor did not mean) otherwise holds a worker thread,
# and its table's ticks, until someone restarts the worker.
REFRESH_TIMEOUT_SECONDS = int(env("REFRESH_TIMEOUT_SECONDS", "7200"))
# The least free space a local warehouse's file system keeps: a refresh, maintenance run,
# Spark job or stream running when it falls below is stopped (its write aborted), so that one
# runaway query cannot fill the disk the other tables and the database live on. 0: no floor.
WAREHOUSE_MIN_FREE_BYTES = int(env("WAREHOUSE_MIN_FREE_BYTES", str(1 << 30)))
MT_ABANDONED_AFTER_SECONDS = int(env("MT_ABANDONED_AFTER_SECONDS", "60"))
# A run QUEUED this long is sent to a worker again (once per this long): its message may
# have gone down with a SIGKILLed worker (refresh.runs.resend_stranded).
MT_STRANDED_AFTER_SECONDS = int(env("MT_STRANDED_AFTER_SECONDS", "600"))
# Streaming hosts (manage.py run_streams) hold each continuous table on a lease this long,
# renewed every third of it: a host silent this long loses its tables to the others.
STREAM_LEASE_SECONDS = float(env("STREAM_LEASE_SECONDS", "30"))
# A view column whose type sqlglot cannot derive is typed by a worker's Spark when one runs.
VIEW_TYPES_FROM_SPARK = env("VIEW_TYPES_FROM_SPARK", "1") == "1"
CELERY_BEAT_SCHEDULE["fail-abandoned-refreshes"] = {
    "task": "refresh.fail_abandoned_runs",
    "schedule": 15.0,
}
# Spark jobs (catalog/jobs.py): no web request waits on Spark. A request that needs it
# answers 202 with a job; 503 when no worker said it was alive in the last
# WORKER_SILENT_AFTER_SECONDS; 429 past JOBS_PER_USER jobs waiting or running for a user,
# or JOBS_QUEUED_MAX waiting in all.
WORKER_HEARTBEAT_SECONDS = 5
WORKER_SILENT_AFTER_SECONDS = int(env("WORKER_SILENT_AFTER_SECONDS", "15"))
# Where workers keep their heartbeats in Redis (catalog/workers.py).
WORKERS_KEY = env("WORKERS_KEY", "lakeview:workers")
JOBS_PER_USER = int(env("JOBS_PER_USER", "4"))
JOBS_QUEUED_MAX = int(env("JOBS_QUEUED_MAX", "32"))
JOBS_RETRY_AFTER_SECONDS = 5
# The same preview asked again within this many seconds answers the same job.
JOBS_REUSE_SECONDS = 60
# A job no worker took in this long is failed; finished jobs are kept this many days.
JOBS_QUEUED_TIMEOUT_SECONDS = int(env("JOBS_QUEUED_TIMEOUT_SECONDS", "600"))
JOBS_KEEP_DAYS = int(env("JOBS_KEEP_DAYS", "7"))
# A running job (a console statement, a preview, a schema analysis) is stopped after this
# long (0: never): a runaway console MERGE would otherwise hold one of the threads kept for
# everyone's previews until the worker restarts.
JOBS_TIMEOUT_SECONDS = int(env("JOBS_TIMEOUT_SECONDS", "1800"))
CELERY_BEAT_SCHEDULE["prune-spark-jobs"] = {"task": "catalog.prune_spark_jobs", "schedule": 3600.0}
CELERY_BEAT_SCHEDULE["fail-abandoned-jobs"] = {
    "task": "catalog.fail_abandoned_jobs",
    "schedule": 15.0,
}
# Queries from the console and POST /api/statements/ (refresh/queries.py): each runs as a
# Spark job, at most QUERIES_PER_USER of a user's at a time (429 past it), each stopped
# after QUERY_TIMEOUT_SECONDS (a 400 that says so). A result keeps its first
# QUERY_RESULT_MAX_ROWS rows and at most QUERY_RESULT_MAX_BYTES bytes (as Arrow holds
# them; the query says when it was cut), as Parquet files in a folder of its own under
# QUERY_RESULTS_DIR, which the web processes and the workers must share (as they share the
# warehouse), for QUERY_RESULT_KEEP_HOURS, and each user's newest QUERY_RESULTS_PER_USER
# results only; the history of queries is kept QUERY_HISTORY_KEEP_DAYS days. celery-beat
# prunes them.
QUERIES_PER_USER = int(env("QUERIES_PER_USER", "2"))
QUERY_TIMEOUT_SECONDS = int(env("QUERY_TIMEOUT_SECONDS", "300"))
QUERY_RESULTS_DIR = env("QUERY_RESULTS_DIR", str(BASE_DIR / "var" / "query-results"))
QUERY_RESULT_MAX_ROWS = int(env("QUERY_RESULT_MAX_ROWS", "100000"))
QUERY_RESULT_MAX_BYTES = int(env("QUERY_RESULT_MAX_BYTES", str(64 * 1024 * 1024)))
QUERY_RESULT_KEEP_HOURS = float(env("QUERY_RESULT_KEEP_HOURS", "24"))
QUERY_RESULTS_PER_USER = int(env("QUERY_RESULTS_PER_USER", "20"))
QUERY_HISTORY_KEEP_DAYS = int(env("QUERY_HISTORY_KEEP_DAYS", "90"))
# A plain read of one table (columns, a filter, a limit: refresh/core/plain_reads.py) is
# answered on the worker by the previews' in-process reader, without Spark; 0: Spark reads
# every query.
QUERY_PLAIN_READS = env("QUERY_PLAIN_READS", "1") == "1"
CELERY_BEAT_SCHEDULE["prune-query-results"] = {
    "task": "refresh.prune_query_results",
    "schedule": 600.0,
}
# One worker process, several threads: they share the process's one Spark session.
# WORKER_INTERACTIVE_THREADS of them are kept for Spark jobs (previews, schema analyses,
# console data changes): refresh runs take at most the others, so a job never waits
# behind long refreshes.
CELERY_WORKER_POOL = "threads"
WORKER_INTERACTIVE_THREADS = int(env("WORKER_INTERACTIVE_THREADS", "1"))
# The worker logs through LOGGING above (one line per record) instead of its own handlers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_WORKER_CONCURRENCY = int(env("CELERY_WORKER_CONCURRENCY", "4"))
# A worker reserves no more messages than it has threads: with several workers, messages
# a busy one would hold unstarted go to one that can start them (refreshes are long).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A refresh the worker died in is failed by heartbeat (above), never redelivered an hour
# later by Redis's visibility timeout into a table that has moved on.
CELERY_TASK_REJECT_ON_WORKER_LOST = False

# Table maintenance (maintenance/): celery-beat's sweep queues what each table's policy
# says is due and samples its health at most every MAINTENANCE_SAMPLE_SECONDS; samples and
# runs are kept MAINTENANCE_KEEP_DAYS.
MAINTENANCE_SWEEP_SECONDS = float(env("MAINTENANCE_SWEEP_SECONDS", "60"))
MAINTENANCE_SAMPLE_SECONDS = int(env("MAINTENANCE_SAMPLE_SECONDS", "600"))
MAINTENANCE_KEEP_DAYS = int(env("MAINTENANCE_KEEP_DAYS", "30"))
MAINTENANCE_KEEP_SCHEDULED_DAYS = int(env("MAINTENANCE_KEEP_SCHEDULED_DAYS", "2"))
CELERY_BEAT_SCHEDULE["maintenance-sweep"] = {
    "task": "maintenance.sweep",
    "schedule": MAINTENANCE_SWEEP_SECONDS,
}
CELERY_BEAT_SCHEDULE["maintenance-prune"] = {"task": "maintenance.prune", "schedule": 3600.0}

# History kept bounded for months: every HISTORY_FOLD_EVERY_SECONDS, celery-beat folds
# scheduled refreshes skipped as NO_DATA older than HISTORY_FOLD_SKIPPED_RUNS_AFTER_SECONDS
# into one run per table and hour (refresh.runs.fold_skipped_runs), and successful
# commit events older than HISTORY_FOLD_COMMITS_AFTER_SECONDS into one event per object,
# actor, action and hour (catalog.history.fold_commits), each with its count.
HISTORY_FOLD_EVERY_SECONDS = float(env("HISTORY_FOLD_EVERY_SECONDS", "300"))
HISTORY_FOLD_SKIPPED_RUNS_AFTER_SECONDS = int(
    env("HISTORY_FOLD_SKIPPED_RUNS_AFTER_SECONDS", "3600")
)
HISTORY_FOLD_COMMITS_AFTER_SECONDS = int(env("HISTORY_FOLD_COMMITS_AFTER_SECONDS", "86400"))
CELERY_BEAT_SCHEDULE["fold-skipped-runs"] = {
    "task": "refresh.fold_skipped_runs",
    "schedule": HISTORY_FOLD_EVERY_SECONDS,
}
CELERY_BEAT_SCHEDULE["fold-commit-events"] = {
    "task": "catalog.fold_commit_events",
    "schedule": HISTORY_FOLD_EVERY_SECONDS,
}
# The audit (catalog/audit.py: catalog events and grant changes) keeps AUDIT_KEEP_DAYS days;
# celery-beat deletes older rows hourly, in batches. 0 keeps everything.
AUDIT_KEEP_DAYS = int(env("AUDIT_KEEP_DAYS", "365"))
CELERY_BEAT_SCHEDULE["prune-audit"] = {"task": "catalog.prune_audit", "schedule": 3600.0}
# The audit of reads and refusals (catalog/access_events.py): every load through the REST
# catalog, console query, preview, download and refused request is an access event, written
# as a JSON line on the logger lakeview.access and to the database in batches every
# AUDIT_READS_FLUSH_SECONDS (0: at once, in the request) from a queue of at most
# AUDIT_READS_QUEUE events (the oldest rows dropped, and counted, past it). AUDIT_READS=0:
# none.
AUDIT_READS = env("AUDIT_READS", "1") != "0"
AUDIT_READS_FLUSH_SECONDS = float(env("AUDIT_READS_FLUSH_SECONDS", "1"))
AUDIT_READS_QUEUE = int(env("AUDIT_READS_QUEUE", "10000"))

# Notifications (alerts/): subscriptions of an email address or a webhook to a materialized
# table's or a namespace's events. Webhooks never reach loopback, private, link-local,
# multicast or reserved addresses unless ALERTS_ALLOWED_NETWORKS lists their network.
ALERTS_ALLOWED_NETWORKS = env_list("ALERTS_ALLOWED_NETWORKS", "")
ALERTS_BASE_URL = env("ALERTS_BASE_URL", "")
ALERTS_LATE_GRACE_SECONDS = int(env("ALERTS_LATE_GRACE_SECONDS", "300"))
ALERTS_SWEEP_SECONDS = float(env("ALERTS_SWEEP_SECONDS", "60"))
# A PENDING delivery this overdue lost its task (the broker was down when it was sent, or the
# worker holding its retry died): the sweep sends it again. Sent twice, it is attempted once.
ALERTS_RESEND_AFTER_SECONDS = float(env("ALERTS_RESEND_AFTER_SECONDS", "60"))
ALERTS_WEBHOOK_TIMEOUT_SECONDS = float(env("ALERTS_WEBHOOK_TIMEOUT_SECONDS", "5"))
ALERTS_RETRY_BASE_SECONDS = float(env("ALERTS_RETRY_BASE_SECONDS", "10"))
ALERTS_RETRY_FOR_SECONDS = float(env("ALERTS_RETRY_FOR_SECONDS", "3600"))
ALERTS_KEEP_DAYS = int(env("ALERTS_KEEP_DAYS", "30"))
CELERY_BEAT_SCHEDULE["alerts-sweep"] = {"task": "alerts.sweep", "schedule": ALERTS_SWEEP_SECONDS}

# Lineage events (refresh/lineage_events.py): each refresh run, rebuild and continuous
# micro-batch is an OpenLineage run (START, then COMPLETE, FAIL or ABORT) sent through
# openlineage-python's transport, which the client configures itself from OPENLINEAGE_URL
# (HTTP, to Marquez), OPENLINEAGE_CONFIG (an openlineage.yml: a file, the console, Kafka...)
# or OPENLINEAGE__TRANSPORT__* variables. Off unless OPENLINEAGE_ENABLED=1, which is the
# default once OPENLINEAGE_URL or OPENLINEAGE_CONFIG is set. Events are sent by a thread
# of each process from a bounded queue (OPENLINEAGE_QUEUE_SIZE; a full queue drops, counted
# in /metrics), so a slow or dead receiver never delays a refresh or its commit.
_OPENLINEAGE_CONFIGURED = env("OPENLINEAGE_URL", "") or env("OPENLINEAGE_CONFIG", "")
OPENLINEAGE_ENABLED = env("OPENLINEAGE_ENABLED", "1" if _OPENLINEAGE_CONFIGURED else "0") == "1"
# The jobs' namespace (a job is a materialized table, named "ns.table").
OPENLINEAGE_NAMESPACE = env("OPENLINEAGE_NAMESPACE", "lakeview")
# The datasets' namespace: the Iceberg catalog's URI as engines reach it (names are
# "ns.table").
OPENLINEAGE_DATASET_NAMESPACE = env("OPENLINEAGE_DATASET_NAMESPACE", CATALOG_URI)
OPENLINEAGE_QUEUE_SIZE = int(env("OPENLINEAGE_QUEUE_SIZE", "1000"))

# Email (notifications): Django's SMTP backend, configured here.
EMAIL_BACKEND = env("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = int(env("EMAIL_PORT", "25"))
EMAIL_HOST_USER = env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env("EMAIL_USE_TLS", "0") == "1"
EMAIL_USE_SSL = env("EMAIL_USE_SSL", "0") == "1"
EMAIL_TIMEOUT = float(env("EMAIL_TIMEOUT", "10"))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "lakeview@localhost")
