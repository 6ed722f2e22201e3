"""Checkpoint files: atomic replace, strict parsing."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.log import checkpoint


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    assert checkpoint.read_offset(path) is None
    checkpoint.write_offset(path, 42)
    assert checkpoint.read_offset(path) == 42
    assert path.read_text() == "0\n1\n42\n"
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("text", ["", "0\n1\n", "0\n1\n42", "1\n1\n42\n", "0\n1\nx\n", "0\n2\n1\n"])
def test_damaged_files_do_not_parse(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(ValueError):
        checkpoint.read_offset(path)
