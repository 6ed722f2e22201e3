"""``--command-config`` reaches the command's clients through ``SPARK_LOG_CLIENT_CONFIG`` and
is gone once ``main`` returns: an in-process call (a test, a notebook) must not leave every
later client, and every Spark worker started later, speaking TLS to plain clusters."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_log import cli


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\n")
    return path


@pytest.mark.parametrize("before", [None, "/elsewhere/client.properties"])
def test_command_config_is_restored_after_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch, before: str | None) -> None:
    if before is not None:
        monkeypatch.setenv("SPARK_LOG_CLIENT_CONFIG", before)
    seen: list[str | None] = []

    def topics(args: object) -> int:
        seen.append(os.environ.get("SPARK_LOG_CLIENT_CONFIG"))
        return 0

    monkeypatch.setattr(cli, "_topics", topics)
    path = _config(tmp_path)
    assert cli.main(["--bootstrap", "127.0.0.1:9", "--command-config", str(path), "topics", "list"]) == 0
    assert seen == [str(path.resolve())]  # the command saw it
    assert os.environ.get("SPARK_LOG_CLIENT_CONFIG") == before  # and it is gone (or back) after


def test_a_failing_command_restores_it_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--bootstrap", "no-port-here", "--command-config", str(_config(tmp_path)), "topics", "list"])
    assert code == 1 and "host:port" in capsys.readouterr().err
    assert "SPARK_LOG_CLIENT_CONFIG" not in os.environ
