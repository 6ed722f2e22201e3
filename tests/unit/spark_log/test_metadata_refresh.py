"""``Cluster.refresh`` never stays with a broker whose image is old.

A broker cut off from the others by a network partition still answers clients with its
last image, in which it may still lead.  Metadata answers carry the metadata-log offset
of the image: an answer older than one already seen is skipped, and each refresh starts
with the next broker, so the client finds a newer image within a few refreshes even when
the stale broker would be asked first (found by the real-partition test,
``tests/fault/test_netns_partitions.py``, where a producer kept sending to a deposed
leader for good).
"""
from __future__ import annotations

from typing import Any

import pytest

from spark_log import _client
from spark_log.proto import broker_pb2 as pb


def _answer(offset: int, leader: int) -> pb.MetadataResponse:
    response = pb.MetadataResponse(metadata_offset=offset, controller_id=1)
    response.brokers.add(broker_id=1, address="stale:1")
    response.brokers.add(broker_id=2, address="fresh:2")
    topic = response.topics.add(name="t")
    topic.partitions.add(partition=0, leader_id=leader, leader_epoch=offset)
    return response


ANSWERS = {"stale:1": _answer(10, leader=1), "fresh:2": _answer(12, leader=2)}


class _Stub:
    def __init__(self, address: str, asked: list[str]) -> None:
        self.address, self.asked = address, asked

    def Metadata(self, request: Any, timeout: float) -> pb.MetadataResponse:  # noqa: N802 - gRPC's name
        self.asked.append(self.address)
        return ANSWERS[self.address]


def test_refreshes_reach_the_newest_image_and_never_go_back(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    cluster = _client.Cluster(["stale:1", "fresh:2"])
    monkeypatch.setattr(cluster, "broker", lambda address: _Stub(address, asked))
    leaders = []
    for _ in range(4):
        cluster.forget("t")
        leaders.append(cluster.leader("t", 0)[0])
    assert leaders[0] == "stale:1"                    # nothing newer seen yet: the stale answer is taken
    assert leaders[1:] == ["fresh:2"] * 3, f"stayed with the stale image: {leaders}, asked {asked}"
    assert asked[:2] == ["stale:1", "fresh:2"]        # the second refresh starts with the next broker
    cluster.close()
