"""docker-compose.yml describes the production shape; Docker itself is not run in CI."""

import json
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = ("web", "catalog", "worker", "beat", "streams")
SHARED_ENV = ("DATABASE_URL", "REDIS_URL", "WAREHOUSE", "SPARK_MASTER", "SECRET_KEY")


def load_compose() -> dict:
    return yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())


def environment_of(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):  # the "KEY=value" form
        env = dict(item.split("=", 1) for item in env)
    # YAML anchors and merge keys are resolved by the loader; values may be None for
    # "pass through from the host".
    return {key: "" if value is None else str(value) for key, value in env.items()}


def test_compose_runs_the_app_celery_beat_spark_and_their_stores() -> None:
    services = load_compose()["services"]
    assert {
        "postgres",
        "redis",
        "web",
        "worker",
        "beat",
        "spark-master",
        "spark-worker",
    } <= set(services)
    for served in ("web", "catalog"):
        command = " ".join(services[served]["command"])
        assert "gunicorn -c webapp/gunicorn.conf.py" in command and "webapp.wsgi" in command
    # Engines and refresh workers use the catalog's own service.
    assert environment_of(services["worker"])["CATALOG_URI"] == "http://catalog:8181/iceberg"
    assert "worker" in services["worker"]["command"]
    assert "django_celery_beat.schedulers:DatabaseScheduler" in " ".join(
        services["beat"]["command"]
    )


def test_web_worker_and_beat_read_the_same_settings_from_the_environment() -> None:
    services = load_compose()["services"]
    for name in APP_SERVICES:
        env = environment_of(services[name])
        missing = [key for key in SHARED_ENV if key not in env]
        assert not missing, f"{name} lacks {missing}"
        assert env["DJANGO_SETTINGS_MODULE"] == "webapp.settings.prod"
        assert env["DATABASE_URL"].startswith("postgres")
        assert env["REDIS_URL"].startswith("redis://redis:6379")
        assert env["SPARK_MASTER"] == "spark://spark-master:7077"
        # Each driver takes one core of the cluster, never all of them (docs/deployment.md).
        assert json.loads(env["SPARK_CONF"])["spark.cores.max"] == "1"


def test_the_spark_worker_holds_an_executor_for_a_refresh_worker_and_a_streaming_host() -> None:
    services = load_compose()["services"]
    conf = json.loads(environment_of(services["worker"])["SPARK_CONF"])
    worker = environment_of(services["spark-worker"])
    cores = int(worker["SPARK_WORKER_CORES"].split(":-")[-1].rstrip("}"))
    memory = worker["SPARK_WORKER_MEMORY"].split(":-")[-1].rstrip("}")
    assert cores >= 2 * int(conf["spark.cores.max"])
    assert int(memory.rstrip("g")) >= 2 * int(conf["spark.executor.memory"].rstrip("g"))


def test_the_app_and_spark_share_one_warehouse_volume() -> None:
    compose = load_compose()
    services = compose["services"]
    warehouse = environment_of(services["web"])["WAREHOUSE"]
    for name in (*APP_SERVICES, "spark-master", "spark-worker"):
        mounts = [str(volume) for volume in services[name].get("volumes", [])]
        assert any(m.startswith("warehouse:") and m.endswith(warehouse) for m in mounts), name
    assert "warehouse" in compose["volumes"]


def test_attached_tables_are_read_from_a_read_only_mount_in_every_app_and_spark_container():
    services = load_compose()["services"]
    for name in (*APP_SERVICES, "spark-master", "spark-worker"):
        mounts = services[name]["volumes"]
        assert any(m.endswith(":/external:ro") for m in mounts), f"{name}: {mounts}"
    for name in APP_SERVICES:
        assert environment_of(services[name])["ATTACH_LOCATIONS"] == "/external"
