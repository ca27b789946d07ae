"""The Spark properties every session the app starts gets (runtime/spark/session.py), read
without starting a JVM."""

from __future__ import annotations

from pathlib import Path

from runtime.spark.session import LOG4J2_CONFIG, SparkSessionConfig


def config(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "iceberg.jar").write_bytes(b"")
    return SparkSessionConfig(
        master="local[1]",
        jars_dir=str(tmp_path),
        warehouse=str(tmp_path / "warehouse"),
        catalog_name="lv",
        extra_conf=extra,
    ).spark_conf()


def test_the_driver_logs_with_the_apps_log4j2_file_which_starts_at_warn(tmp_path):
    options = config(tmp_path)["spark.driver.extraJavaOptions"]
    assert options == f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
    text = LOG4J2_CONFIG.read_text()
    assert "rootLogger.level = warn" in text
    assert "appender.console.target = SYSTEM_ERR" in text


def test_java_options_from_spark_conf_come_after_the_apps_so_theirs_win(tmp_path):
    options = config(tmp_path, **{"spark.driver.extraJavaOptions": "-Dx=1"})[
        "spark.driver.extraJavaOptions"
    ]
    assert options.startswith("-Dlog4j2.configurationFile=") and options.endswith(" -Dx=1")
