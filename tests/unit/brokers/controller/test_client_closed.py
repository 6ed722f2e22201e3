"""A closed ``ControllerClient`` refuses calls at once ("closed") instead of reconnecting
and retrying until its deadline: a node that stops closes it first, so that its ISR
thread or a forwarded Admin request in flight cannot hold the shutdown up."""
from __future__ import annotations

import pytest

from brokers.controller.client import ControllerClient
from spark_log.errors import BrokerNotAvailableError
from tests.support.ports import free_ports


def test_calls_after_close_fail_as_closed() -> None:
    (port,) = free_ports(1)  # nobody listens: an open client would retry until timeout_s
    client = ControllerClient([f"127.0.0.1:{port}"], timeout_s=600.0)
    client.close()
    with pytest.raises(BrokerNotAvailableError, match="closed"):
        client.heartbeat(broker_id=1, broker_epoch=1)
    with pytest.raises(BrokerNotAvailableError, match="closed"):
        client.alter_partition(broker_id=1, broker_epoch=1, topic="t", partition=0, leader_epoch=0,
                               partition_epoch=0, new_isr=[1])
