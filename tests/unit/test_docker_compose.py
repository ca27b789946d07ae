"""docker-compose.yml describes the production shape; Docker itself is not run in CI
(tests/spark/test_compose_services.py runs each app service's command on this machine)."""

import json
import re
import shlex
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from tests.deployment import (
    COMPOSE_FILE,
    REPO_ROOT,
    MissingVariable,
    compose_variables,
    healthcheck_command,
    load_compose,
    service_command,
)
from tests.deployment import service_environment as environment_of

APP_SERVICES = ("migrate", "web", "catalog", "worker", "beat", "streams")
SERVED = {"web": 8000, "catalog": 8181}
SHARED_ENV = ("DATABASE_URL", "REDIS_URL", "WAREHOUSE", "SPARK_MASTER", "SECRET_KEY")
ADMIN_ENV = ("DJANGO_SUPERUSER_USERNAME", "DJANGO_SUPERUSER_PASSWORD", "DJANGO_SUPERUSER_EMAIL")


def header() -> str:
    """The comment at the top of the file, before its first setting."""
    lines = []
    for line in COMPOSE_FILE.read_text().splitlines():
        if line and not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return "\n".join(lines)


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


def test_the_header_names_every_service() -> None:
    words = set(re.findall(r"[\w-]+", header()))
    missing = [name for name in load_compose()["services"] if name not in words]
    assert not missing, f"the header does not name {missing}"


def test_the_header_says_how_to_try_it_over_plain_http_and_that_production_puts_tls_in_front():
    text = " ".join(header().split())
    assert "SECURE_COOKIES=0" in text and "DJANGO_SUPERUSER_USERNAME=" in text
    assert "TLS in front" in text and "CSRF_TRUSTED_ORIGINS=https://" in text
    assert "/healthz" in text and "/readyz" in text


def test_migrate_empties_the_metrics_then_makes_the_schema_the_first_admin_and_the_samples_and_only_it_sees_the_password():  # noqa: E501
    services = load_compose()["services"]
    command = service_command(services["migrate"])
    assert command[:2] == ["sh", "-c"]
    steps = [shlex.split(step) for step in command[2].split("&&")]
    # Each step runs only once the one before succeeded; any failing fails the service.
    assert steps == [
        ["python", "manage.py", "clear_metrics"],
        ["python", "manage.py", "migrate", "--noinput"],
        ["python", "manage.py", "ensure_admin"],
        ["python", "manage.py", "load_samples", "--not-if-dropped", "--unless-turned-off"],
    ]
    env = environment_of(services["migrate"])
    for key in ADMIN_ENV:
        assert env[key] == f"${{{key}:-}}", key
    for name in APP_SERVICES[1:]:
        # The password is blanked there: .env, which every app container reads, may hold it.
        others = environment_of(services[name])
        assert not {"DJANGO_SUPERUSER_USERNAME", "DJANGO_SUPERUSER_EMAIL"} & set(others), name
        assert others["DJANGO_SUPERUSER_PASSWORD"] == "", name
    assert services["migrate"]["restart"] == "no"


def test_web_and_catalog_healthchecks_ask_healthz_on_their_own_port_with_python() -> None:
    services = load_compose()["services"]
    for name, port in SERVED.items():
        service = services[name]
        assert environment_of(service)["WEB_BIND"] == f"0.0.0.0:{port}"
        assert f"{port}:{port}" in service["ports"]
        argv = healthcheck_command(service)
        # The image has Python, not curl; urlopen raises (exit 1) on a non-2xx answer.
        assert argv[:2] == ["python", "-c"], argv
        compile(argv[2], f"{name} healthcheck", "exec")
        [url] = [word for word in argv[2].replace("'", " ").split() if "://" in word]
        assert urlsplit(url).port == port and urlsplit(url).path == "/healthz", url
        assert "timeout=" in argv[2]


def test_the_worker_and_the_streams_wait_for_a_healthy_catalog() -> None:
    services = load_compose()["services"]
    for name in ("worker", "streams"):
        assert services[name]["depends_on"]["catalog"] == {"condition": "service_healthy"}
    # Waiting on health needs a healthcheck to wait for.
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        for other, how in depends.items() if isinstance(depends, dict) else []:
            if how.get("condition") == "service_healthy":
                assert "healthcheck" in services[other], f"{name} waits on {other}"
        for other in depends:
            assert other in services, f"{name} depends on an unknown {other}"
    for name in APP_SERVICES[1:]:
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }


def test_a_browser_on_the_same_machine_is_allowed_by_default() -> None:
    services = load_compose({"SECRET_KEY": "k"})["services"]
    for name in APP_SERVICES:
        env = environment_of(services[name])
        hosts = env["ALLOWED_HOSTS"].split(",")
        assert {"localhost", "127.0.0.1", "web", "catalog"} <= set(hosts), name
        # Secure cookies unless the user turns them off for a plain-HTTP trial.
        assert env["SECURE_COOKIES"] == "1"
    trial = load_compose({"SECRET_KEY": "k", "SECURE_COOKIES": "0", "ALLOWED_HOSTS": "lv.lan"})
    env = environment_of(trial["services"]["web"])
    assert env["SECURE_COOKIES"] == "0" and env["ALLOWED_HOSTS"] == "web,catalog,lv.lan"


def test_compose_refuses_to_start_without_a_secret_key() -> None:
    with pytest.raises(MissingVariable, match="SECRET_KEY"):
        load_compose({})


def test_the_variables_compose_reads_are_the_documented_few() -> None:
    # docs/configuration.md lists these with their defaults; a new one belongs there too.
    assert compose_variables() == {
        "POSTGRES_PASSWORD": "lakeview",
        "SECRET_KEY": None,
        "ALLOWED_HOSTS": "localhost,127.0.0.1",
        "CSRF_TRUSTED_ORIGINS": "",
        "SECURE_COOKIES": "1",
        "EXTERNAL_TABLES": "./var/external",
        "DJANGO_SUPERUSER_USERNAME": "",
        "DJANGO_SUPERUSER_PASSWORD": "",
        "DJANGO_SUPERUSER_EMAIL": "",
        "SPARK_WORKER_CORES": "2",
        "SPARK_WORKER_MEMORY": "2g",
        "METRICS_TOKEN": "",
        "METRICS_ALLOWED_NETWORKS": "",
        "TRUSTED_PROXIES": "",
        "LOAD_SAMPLES": "1",
    }


def test_every_app_process_records_its_metrics_in_one_shared_volume() -> None:
    services = load_compose()["services"]
    for name in APP_SERVICES:
        service = services[name]
        assert environment_of(service)["PROMETHEUS_MULTIPROC_DIR"] == "/metrics", name
        assert "metrics:/metrics" in service["volumes"], name
    assert "metrics" in load_compose()["volumes"]


# -- settings through .env (issue 47) --------------------------------------------------------

ENV_EXAMPLE = REPO_ROOT / ".env.example"
#: The example's last block: what compose sets for its services whatever .env says.
FIXED_BLOCK = "-- Set by docker-compose.yml for its services"
#: docs/configuration.md's sections that are not about the app's containers.
NOT_CONTAINERS = ("`make run`", "Tests and tools")


def documented_for_containers() -> set[str]:
    """The variables docs/configuration.md lists, but those of `make run` (LOAD_SAMPLES,
    which compose's migrate reads too, aside) and of the tests and tools."""
    text = (REPO_ROOT / "docs" / "configuration.md").read_text()
    found = {"LOAD_SAMPLES"}
    for section in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        if not section.startswith(NOT_CONTAINERS):
            found |= set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", section, re.MULTILINE))
    return found


def example() -> tuple[dict[str, str], set[str]]:
    """.env.example: the variables it shows (`NAME=default`, set or in a comment) and the
    names of its last block, what compose sets itself."""
    text = ENV_EXAMPLE.read_text()
    shown_part, _, fixed_part = text.partition(FIXED_BLOCK)
    shown = dict(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=(.*)$", shown_part, re.MULTILINE))
    fixed_text = fixed_part.split("\n", 1)[1]
    return shown, set(re.findall(r"\b[A-Z][A-Z0-9_]{2,}\b", fixed_text))


def set_by_compose() -> set[str]:
    """Variables some app service's `environment:` sets to a value of its own, not to the
    user's variable of that name (`${NAME...}`): .env cannot change them there."""
    services = load_compose()["services"]
    found = set()
    for name in APP_SERVICES:
        for key, value in environment_of(services[name]).items():
            if f"${{{key}" not in value:
                found.add(key)
    return found


def test_every_app_container_reads_the_users_env_file_and_compose_runs_without_one() -> None:
    services = load_compose()["services"]
    for name in APP_SERVICES:
        assert services[name]["env_file"] == [{"path": ".env", "required": False}], name
    for name in ("postgres", "redis", "spark-master", "spark-worker"):
        assert "env_file" not in services[name], name
    # The file holds secrets: never committed, never copied into the image.
    assert ".env" in (REPO_ROOT / ".gitignore").read_text().split()
    assert ".env" in (REPO_ROOT / ".dockerignore").read_text().split()


def test_the_example_env_file_shows_every_variable_the_docs_list_for_the_containers() -> None:
    shown, fixed = example()
    documented = documented_for_containers()
    missing = documented - set(shown) - fixed
    assert not missing, f".env.example does not show {sorted(missing)}"
    stale = (set(shown) | fixed) - documented
    assert not stale, f".env.example shows variables docs/configuration.md does not: {stale}"
    # Only the required key is set; every other line is a comment showing the default.
    assert re.findall(r"^[A-Z][A-Z0-9_]*=", ENV_EXAMPLE.read_text(), re.MULTILINE) == [
        "SECRET_KEY="
    ]


def test_the_example_says_what_compose_sets_itself_and_shows_nothing_it_would_override():
    shown, fixed = example()
    overridden = set_by_compose() - {"DJANGO_SUPERUSER_PASSWORD"}  # migrate's: shown
    assert fixed == overridden
    assert not set(shown) & overridden


def test_the_admin_password_written_in_env_reaches_migrate_only() -> None:
    variables = {"SECRET_KEY": "k", "DJANGO_SUPERUSER_PASSWORD": "pw"}
    services = load_compose(variables)["services"]
    assert environment_of(services["migrate"])["DJANGO_SUPERUSER_PASSWORD"] == "pw"
    for name in APP_SERVICES[1:]:
        # `environment:` wins over the env_file that carries .env's value.
        assert environment_of(services[name])["DJANGO_SUPERUSER_PASSWORD"] == "", name


def test_load_samples_0_makes_migrate_skip_the_sample_data() -> None:
    services = load_compose({"SECRET_KEY": "k", "LOAD_SAMPLES": "0"})["services"]
    assert environment_of(services["migrate"])["LOAD_SAMPLES"] == "0"
    assert "--unless-turned-off" in service_command(services["migrate"])[2]
    default = load_compose({"SECRET_KEY": "k"})["services"]["migrate"]
    assert environment_of(default)["LOAD_SAMPLES"] == "1"

    def setting(value: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", "from webapp.settings import base; print(base.LOAD_SAMPLES)"],
            env={"LOAD_SAMPLES": value, "PYTHONPATH": str(REPO_ROOT)},
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    # The setting `load_samples --unless-turned-off` asks (tests/integration/test_samples.py).
    assert [setting("0"), setting("1"), setting("")] == ["False", "True", "True"]


def published(service: dict) -> list[tuple[str, str]]:
    """(host address, container port) of each `ports:` entry; "" for every address."""
    found = []
    for entry in service.get("ports", []):
        parts = str(entry).split(":")
        address = parts[0] if len(parts) == 3 else ""
        found.append((address, parts[-1]))
    return found


def test_only_the_signed_in_services_are_published_and_the_spark_ui_stays_on_loopback():
    services = load_compose()["services"]
    for name, service in services.items():
        for address, port in published(service):
            if name in SERVED:
                assert (address, port) == ("", str(SERVED[name])), name
            else:
                # No sign-in there (Spark's web UI, its master's port): the host's own only.
                assert address == "127.0.0.1", f"{name} publishes {port} on every address"
    assert published(services["spark-master"]) == [("127.0.0.1", "8080")]
    assert not published(services["spark-worker"])
    assert "ssh -L 8080:127.0.0.1:8080" in " ".join(header().split())
