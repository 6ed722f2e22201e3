"""The class archive's settings and naming (``connectors.class_archive``); the Spark side
(a session maps it, a damaged one is refused) is in ``tests/spark/test_class_archive.py``."""
from __future__ import annotations

from pathlib import Path

import pytest

from connectors import class_archive
from spark_log.errors import InvalidConfigError


@pytest.fixture
def spark_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"x" * 10)
    monkeypatch.setattr(class_archive, "_spark_home", lambda: home)
    monkeypatch.setenv("SPARK_LOG_CLASS_ARCHIVE_DIR", str(tmp_path / "archives"))
    monkeypatch.delenv("SPARK_LOG_CLASS_ARCHIVE", raising=False)
    return home


def _place_archive() -> Path:
    path = class_archive.archive_path()
    assert path is not None, "no java on this machine"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"archive")
    return path


def test_no_archive_leaves_the_options_as_they_are(spark_home: Path) -> None:
    assert class_archive.with_archive("") == ""
    assert class_archive.with_archive("-Xss4m") == "-Xss4m"


def test_an_archive_for_this_jvm_and_spark_is_added_to_the_options(spark_home: Path) -> None:
    path = _place_archive()
    assert class_archive.with_archive("") == f"-XX:SharedArchiveFile={path}"
    assert class_archive.with_archive("-Xss4m") == f"-XX:SharedArchiveFile={path} -Xss4m"
    # the user's own archive wins
    assert class_archive.with_archive("-XX:SharedArchiveFile=/x.jsa") == "-XX:SharedArchiveFile=/x.jsa"


def test_other_jars_name_another_archive(spark_home: Path) -> None:
    path = _place_archive()
    (spark_home / "jars" / "spark-core.jar").write_bytes(b"x" * 11)  # an upgraded jar
    assert class_archive.archive_path() != path
    assert class_archive.with_archive("") == ""
    (spark_home / "jars" / "spark-core.jar").write_bytes(b"x" * 10)
    (spark_home / "jars" / "extra.jar").write_bytes(b"")
    assert class_archive.archive_path() != path


def test_off_turns_it_off_and_other_values_are_refused(spark_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _place_archive()
    monkeypatch.setenv("SPARK_LOG_CLASS_ARCHIVE", "off")
    assert class_archive.with_archive("-Xss4m") == "-Xss4m"
    monkeypatch.setenv("SPARK_LOG_CLASS_ARCHIVE", "yes")
    with pytest.raises(InvalidConfigError, match="SPARK_LOG_CLASS_ARCHIVE must be 'auto' or 'off'"):
        class_archive.with_archive("")


def test_without_java_there_is_no_archive(spark_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(class_archive, "_java", lambda: None)
    assert class_archive.archive_key() is None
    assert class_archive.archive_path() is None
    assert class_archive.with_archive("-Xss4m") == "-Xss4m"


def test_local_cluster_executors_get_it_too_and_other_masters_only_the_driver(spark_home: Path) -> None:
    assert class_archive.java_options_conf("local-cluster[2,1,1024]") == {}  # no archive yet
    path = _place_archive()
    option = f"-XX:SharedArchiveFile={path}"
    assert class_archive.java_options_conf("local[2]") == {"spark.driver.extraJavaOptions": option}
    assert class_archive.java_options_conf("yarn", {"spark.driver.extraJavaOptions": "-Xss4m"}) == {
        "spark.driver.extraJavaOptions": f"{option} -Xss4m"}
    assert class_archive.java_options_conf("local-cluster[2,1,1024]", {"spark.executor.extraJavaOptions": "-Xss4m"}) == {
        "spark.driver.extraJavaOptions": option, "spark.executor.extraJavaOptions": f"{option} -Xss4m"}


def test_a_path_spark_would_split_is_not_used(spark_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPARK_LOG_CLASS_ARCHIVE_DIR", str(tmp_path / "with space"))
    _place_archive()
    assert class_archive.with_archive("-Xss4m") == "-Xss4m"
