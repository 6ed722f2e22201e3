"""A local session's Python workers import pyspark from the byte-compiled install, with Spark's
duplicate source zips off their path (``connectors/worker_python.py``)."""
from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.spark]


def _origin(_: Any) -> tuple[str, list[str]]:
    import sys

    return str(sys.modules["pyspark.worker"].__file__), [p for p in sys.path if p.endswith(".zip")]


def test_python_workers_run_pyspark_from_its_install_with_no_zip_on_their_path(spark: Any) -> None:
    import pyspark

    (origin, zips), = spark.sparkContext.parallelize([0], 1).map(_origin).collect()
    installed = pyspark.__file__.rsplit("/", 1)[0]
    assert origin == f"{installed}/worker.py", origin
    assert not [z for z in zips if "pyspark" in z or "py4j" in z], zips
