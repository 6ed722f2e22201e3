"""``Cluster`` never goes back to an older leader epoch (KIP-320's client rule).

A deposed leader cut off from the controller keeps answering metadata with its old image,
in which it still leads in the old leader epoch.  A client that has seen a newer epoch
for a partition keeps that entry: an answer with an older epoch is stale for the
partition (whatever its metadata offset says), the refresh moves on to another broker, and
the broker that answered stale is asked last afterwards.  A topic recreated under the same
name (a new topic id) starts over.
"""
from __future__ import annotations

from typing import Any

import pytest

from spark_log import _client
from spark_log.proto import broker_pb2 as pb


def _answer(offset: int, leader: int, epoch: int, topic_id: str = "id-1") -> pb.MetadataResponse:
    response = pb.MetadataResponse(metadata_offset=offset, controller_id=1)
    response.brokers.add(broker_id=1, address="zombie:1")
    response.brokers.add(broker_id=2, address="fresh:2")
    topic = response.topics.add(name="t", topic_id=topic_id)
    topic.partitions.add(partition=0, leader_id=leader, leader_epoch=epoch)
    topic.partitions.add(partition=1, leader_id=2, leader_epoch=7)
    return response


class _Stub:
    def __init__(self, address: str, asked: list[str], answers: dict[str, pb.MetadataResponse]) -> None:
        self.address, self.asked, self.answers = address, asked, answers

    def Metadata(self, request: Any, timeout: float) -> pb.MetadataResponse:  # noqa: N802 - gRPC's name
        self.asked.append(self.address)
        return self.answers[self.address]


def _cluster(monkeypatch: pytest.MonkeyPatch, answers: dict[str, pb.MetadataResponse],
             asked: list[str]) -> _client.Cluster:
    cluster = _client.Cluster(["fresh:2", "zombie:1"])
    monkeypatch.setattr(cluster, "broker", lambda address: _Stub(address, asked, answers))
    return cluster


def test_an_older_leader_epoch_is_stale_and_the_refresh_asks_another_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    # the zombie's image even claims a higher metadata offset: only the epoch tells it is stale
    answers = {"fresh:2": _answer(10, leader=2, epoch=2), "zombie:1": _answer(20, leader=1, epoch=0)}
    cluster = _cluster(monkeypatch, answers, asked)
    assert cluster.leader("t", 0) == ("fresh:2", 2)
    assert asked == ["fresh:2"]
    for _ in range(4):  # refreshes start with the next broker in turn: the zombie is asked, never believed
        cluster.forget("t")
        assert cluster.leader("t", 0) == ("fresh:2", 2), f"went back to the zombie's epoch; asked {asked}"
    assert asked.count("zombie:1") == 1, asked   # the rotation reached it once; from then on it is asked last
    at = asked.index("zombie:1")
    assert asked[at + 1] == "fresh:2", asked      # after its stale answer the same refresh went on
    assert cluster.stale_answers == 1
    assert cluster.known_leader_epoch("t", 0) == 2
    cluster.close()


def test_when_every_broker_is_stale_the_newer_entry_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    answers = {"fresh:2": _answer(10, leader=2, epoch=2), "zombie:1": _answer(20, leader=1, epoch=0)}
    cluster = _cluster(monkeypatch, answers, asked)
    assert cluster.leader("t", 0) == ("fresh:2", 2)
    answers["fresh:2"] = _answer(21, leader=1, epoch=1)  # both behind now (a lagging image on the fresh one)
    cluster.forget("t")
    info = cluster.topic("t")
    assert (info.partitions[0].leader_id, info.partitions[0].leader_epoch) == (2, 2)
    assert info.partitions[1].leader_epoch == 7        # partitions that are not stale are taken as they come
    assert cluster.leader("t", 0) == ("fresh:2", 2)
    assert sorted(asked[1:]) == ["fresh:2", "zombie:1"]  # both asked before settling for what was known
    answers["fresh:2"] = _answer(30, leader=1, epoch=3)  # a newer epoch is taken, even back on broker 1
    cluster.forget("t")
    assert cluster.leader("t", 0) == ("zombie:1", 3)
    cluster.close()


def test_a_recreated_topic_starts_its_epochs_over(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    answers = {"fresh:2": _answer(10, leader=2, epoch=5), "zombie:1": _answer(10, leader=2, epoch=5)}
    cluster = _cluster(monkeypatch, answers, asked)
    assert cluster.leader("t", 0) == ("fresh:2", 5)
    answers["fresh:2"] = answers["zombie:1"] = _answer(40, leader=1, epoch=0, topic_id="id-2")
    cluster.forget("t")
    assert cluster.leader("t", 0) == ("zombie:1", 0)
    assert cluster.stale_answers == 0
    cluster.close()
