"""The class archive ``make install`` builds (``connectors.class_archive``): the suite's own
local session maps it, and the check a build runs before it installs one refuses a
damaged archive (a JVM crashes with SIGBUS on a truncated one)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from connectors import class_archive

pytestmark = [pytest.mark.spark]


def _archive() -> Path:
    if os.environ.get("SPARK_LOG_CLASS_ARCHIVE", "").strip().lower() == "off":
        pytest.skip("SPARK_LOG_CLASS_ARCHIVE=off")
    path = class_archive.archive_path()
    if path is None or not path.is_file():
        pytest.skip("no class archive for this JVM and Spark (make install builds it)")
    return path


def test_the_local_sessions_driver_maps_the_archive(spark: Any) -> None:
    path = _archive()
    jvm = spark.sparkContext._jvm
    pid = jvm.java.lang.ProcessHandle.current().pid()
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", "")
    assert f"-XX:SharedArchiveFile={path}" in options
    mapped = {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if len(line.split()) >= 6}
    assert str(path) in mapped, f"the driver JVM (pid {pid}) has not mapped {path}"


def test_a_damaged_archive_is_refused_and_the_real_one_passes(spark: Any, tmp_path: Path) -> None:
    path = _archive()
    classpath = spark.sparkContext._jvm.java.lang.System.getProperty("java.class.path")
    assert class_archive.mapping_problem(path, classpath) is None
    truncated = tmp_path / "truncated.jsa"
    with path.open("rb") as whole, truncated.open("wb") as part:
        part.write(whole.read(path.stat().st_size // 10))
    problem = class_archive.mapping_problem(truncated, classpath)
    assert problem is not None and "does not map" in problem
    copy = tmp_path / "copy.jsa"
    shutil.copyfile(path, copy)
    other = tmp_path / "other.jar"
    shutil.copyfile(classpath.split(":")[-1], other)
    problem = class_archive.mapping_problem(copy, f"{other}:{classpath}")  # not the classpath it was made with
    assert problem is not None and "does not map" in problem
