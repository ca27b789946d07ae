"""gunicorn's settings for the web service: `gunicorn -c webapp/gunicorn.conf.py
webapp.wsgi` (docker-compose.yml, the Dockerfile and the tests under abuse run it; `make
run` uses Django's own server). docs/deployment.md says why these numbers.

- No request waits on Spark (catalog.jobs): the longest a request does is a commit's
  file writes and database transaction, well under a second. `timeout` (30 s) is gunicorn's
  own default and far above that: a worker killed by it is a bug, not a slow Spark.
- `gthread` workers with a few threads each: a request spends part of its time in file and
  database I/O, which threads overlap, and a slow client holds a thread, not a process.
  Python runs one thread at a time per process, so processes, not threads, use the cores:
  WEB_WORKERS defaults to the CPUs + 1 (at least 3), WEB_THREADS to 4.
- Idle connections are kept 75 s (WEB_KEEPALIVE), not a few seconds. A gthread worker
  that closes an idle connection can close it just as the client sends its next request
  on it, and the client sees "connection reset" (pyiceberg's commits do not retry it). A
  client whose idle time is close to the keep-alive hits that often under load: engines
  poll the catalog every trigger (5-60 s) and refresh workers every tick. 75 s is above
  those cadences, as nginx's default; an idle connection costs a socket, not a thread.
- Forwarded headers: gunicorn's own trust of them (forwarded_allow_ips) is off; the app's
  TRUSTED_PROXIES decides (infra/proxies.py).
- Metrics: with PROMETHEUS_MULTIPROC_DIR set, each worker writes its metrics there
  (infra/metrics.py) and a worker that exits is marked dead (child_exit); the launcher,
  not gunicorn, empties the folder, since other processes (Celery) share it."""

import multiprocessing
import os

bind = os.environ.get("WEB_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_WORKERS", max(3, multiprocessing.cpu_count() + 1)))
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", "4"))
timeout = 30
graceful_timeout = 10
keepalive = int(os.environ.get("WEB_KEEPALIVE", "75"))
accesslog = "-"
# gunicorn's own reading of X-Forwarded-Proto (and X-Forwarded-SSL...), from 127.0.0.1 by
# default, is off: the app's TRUSTED_PROXIES alone decides whom to believe
# (infra/proxies.py), and the access log's address is the one it decided.
forwarded_allow_ips = ""

# How much lower than the engines' catalog service the people-facing service runs (Unix
# nice): under a flood of page and API requests, the catalog's load-table keeps its CPU.
nice = int(os.environ.get("WEB_NICE", "0"))


def post_fork(server: object, worker: object) -> None:
    if nice:
        os.nice(nice)


def post_worker_init(worker: object) -> None:
    # The app is loaded: what its first requests would load, it loads now (webapp.warmup).
    from webapp.warmup import warm

    warm()


def child_exit(server: object, worker: object) -> None:
    from infra.metrics import mark_process_dead

    mark_process_dead(worker.pid)  # type: ignore[attr-defined]
