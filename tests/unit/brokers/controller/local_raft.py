"""A stand-in for RaftNode in unit tests: one voter that commits every proposal at once.

``propose`` applies the payloads to the state machine synchronously (offsets from 0),
like a single-node quorum; ``lose_leadership`` / ``win_leadership`` drive leader changes.
"""
from __future__ import annotations

from brokers.controller.controller import QuorumController
from spark_log.errors import NotControllerError


class LocalRaft:
    def __init__(self, controller: QuorumController, *, address: str = "127.0.0.1:9000") -> None:
        self.controller = controller
        self.address = address
        self.epoch = 0
        self.is_leader = False
        self.next_offset = 0
        self.proposals: list[list[bytes]] = []
        self.other_leader: str | None = None
        self.activate = True  # win_leadership also runs the controller's activation
        controller.attach(self)

    def win_leadership(self) -> None:
        self.epoch += 1
        self.is_leader = True
        self.controller.on_leader_change(self.controller.node_id, self.epoch)
        if self.activate:
            self.controller.activate()

    def lose_leadership(self, other: str | None = "127.0.0.1:9001") -> None:
        self.epoch += 1
        self.is_leader = False
        self.other_leader = other
        self.controller.on_leader_change(None if other is None else 99, self.epoch)

    def leader_address(self) -> str | None:
        return self.address if self.is_leader else self.other_leader

    def propose(self, payloads: list[bytes], *, timeout_s: float = 10.0) -> int:
        if not self.is_leader:
            raise NotControllerError("not leader", leader_address=self.other_leader)
        self.proposals.append(list(payloads))
        for payload in payloads:
            self.controller.apply(self.next_offset, self.epoch, payload)
            self.next_offset += 1
        return self.next_offset - 1
