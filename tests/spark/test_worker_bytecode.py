"""Spark's Python workers import pyspark from the byte code ``make install`` added to
pyspark.zip (``connectors/worker_bytecode.py``), not by compiling its sources."""
from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.spark]


def _where_pyspark_came_from(_: Any) -> str:
    import sys

    return str(sys.modules["pyspark.worker"].__file__)


def test_a_python_worker_runs_pyspark_from_the_zips_byte_code(spark: Any) -> None:
    (origin,) = spark.sparkContext.parallelize([0], 1).map(_where_pyspark_came_from).collect()
    assert origin.endswith("pyspark.zip/pyspark/worker.pyc"), origin
