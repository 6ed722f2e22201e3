"""The kill tests' input files (``kill_job.write_input_files``): with ``maxFilesPerTrigger=1``
file ``k`` is micro-batch ``k``, which those tests rely on to tell which batch a row is in.
Files written back to back can share a modification time, and Spark's file source breaks
such a tie in the directory's listing order (part-001 before part-000 on ext4): CI once
saw a transactional kill test read batch 0's rows as batch 1's for that reason."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.spark.kill_job import write_input_files

pytestmark = [pytest.mark.spark]


def _first_ids_by_batch(spark: Any, folder: Path, checkpoint: Path) -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []
    query = (spark.readStream.schema("id long, value string").option("maxFilesPerTrigger", "1").parquet(str(folder))
             .writeStream.foreachBatch(lambda df, batch: seen.append((batch, df.agg({"id": "min"}).first()[0])))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    return sorted(seen)


def test_file_k_is_micro_batch_k_even_when_the_files_were_written_in_one_clock_tick(spark: Any, tmp_path: Path) -> None:
    rows, files = 10, 4
    write_input_files(tmp_path / "in", files, rows, value_bytes=4)
    times = [os.stat(tmp_path / "in" / f"part-{k:03d}.parquet").st_mtime for k in range(files)]
    assert times == sorted(set(times)), times
    assert _first_ids_by_batch(spark, tmp_path / "in", tmp_path / "ck") == [(k, k * rows) for k in range(files)]

    # the failure it prevents: the same files with one shared time come out of order
    for k in range(files):
        os.utime(tmp_path / "in" / f"part-{k:03d}.parquet", (times[0], times[0]))
    tied = _first_ids_by_batch(spark, tmp_path / "in", tmp_path / "ck-tied")
    assert sorted(first for _, first in tied) == [k * rows for k in range(files)]
    if os.listdir(tmp_path / "in") != sorted(os.listdir(tmp_path / "in")):  # a hash-ordered directory (ext4)
        assert tied != [(k, k * rows) for k in range(files)]
