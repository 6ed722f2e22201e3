"""BrokerHeartbeater: registers once, heartbeats, registers again when fenced out."""
from __future__ import annotations

from brokers.controller.controller import HeartbeatResult
from brokers.controller.heartbeater import BrokerHeartbeater
from spark_log.errors import FencedEpochError


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.epoch = 0
        self.reject_heartbeat = False

    def register_broker(self, *, broker_id: int, incarnation: str, address: str, rack: str = "") -> int:
        self.epoch += 1
        self.calls.append(("register", self.epoch))
        return self.epoch

    def heartbeat(self, *, broker_id: int, broker_epoch: int) -> HeartbeatResult:
        self.calls.append(("heartbeat", broker_epoch))
        if self.reject_heartbeat:
            raise FencedEpochError("register again")
        return HeartbeatResult(fenced=False, broker_epoch=broker_epoch, metadata_offset=7)


def test_register_then_heartbeat_then_reregister() -> None:
    client = FakeClient()
    beater = BrokerHeartbeater(client, broker_id=3, address="127.0.0.1:9000")  # type: ignore[arg-type]
    assert not beater.wait_registered(0)
    beater.beat()
    assert beater.broker_epoch == 1 and beater.wait_registered(0) and not beater.fenced
    beater.beat()
    client.reject_heartbeat = True
    beater.beat()
    assert beater.broker_epoch is None and beater.fenced
    client.reject_heartbeat = False
    beater.beat()
    beater.beat()
    assert client.calls == [("register", 1), ("heartbeat", 1), ("heartbeat", 1), ("register", 2), ("heartbeat", 2)]
    assert len(beater.incarnation) == 32
