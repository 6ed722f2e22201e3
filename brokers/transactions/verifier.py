"""KIP-890's server-side defence, the partition leader's half: before the first
transactional write of a producer to a partition (no transaction of that producer and epoch
open there yet), the leader asks the transaction's coordinator whether the partition was
added to the open transaction, so a write that arrives late (after its transaction ended)
cannot open a transaction nobody will ever end.  The coordinator is this broker's own
``TransactionCoordinator`` or, elsewhere, its AddPartitions RPC with ``verify_only``."""
from __future__ import annotations

from typing import Callable

import grpc

from brokers.metadata.image import MetadataImage
from brokers.net.peers import PeerCalls
from spark_log import errors
from spark_log.errors import CoordinatorNotAvailableError
from spark_log.proto import transactions_pb2 as pb

from .coordinator import TransactionCoordinator
from .model import INTERNAL_TOPIC, partition_for

__all__ = ["TxnVerifier"]


class TxnVerifier:
    def __init__(self, *, broker_id: int, image: Callable[[], MetadataImage], local: TransactionCoordinator,
                 peers: PeerCalls, timeout_ms: int = 10_000) -> None:
        self.broker_id = broker_id
        self._image = image
        self._local = local
        self._peers = peers
        self._timeout_s = timeout_ms / 1000

    def verify(self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int) -> None:
        """Raises the coordinator's typed error (``InvalidTxnStateError``,
        ``ProducerFencedError``, a retriable coordinator error) unless ``(topic,
        partition)`` is in ``producer_id``'s open transaction in ``epoch``."""
        image = self._image()
        state = image.topics.get(INTERNAL_TOPIC)
        if state is None:
            raise CoordinatorNotAvailableError(f"no transaction coordinator exists yet ({INTERNAL_TOPIC})")
        index = partition_for(transactional_id, len(state.partitions))
        leader = state.partitions[index].leader
        if leader == self.broker_id:
            self._local.verify(transactional_id, producer_id, epoch, (topic, partition))
            return
        address = image.broker_address(leader)
        if address is None:
            raise CoordinatorNotAvailableError(f"{INTERNAL_TOPIC}-{index} has no leader right now")
        request = pb.AddPartitionsRequest(transactional_id=transactional_id, producer_id=producer_id,
                                          producer_epoch=epoch, verify_only=True,
                                          partitions=[pb.TopicPartition(topic=topic, partition=partition)])
        try:
            call = self._peers.unary(address, "/spark_log.transactions.v1.TransactionCoordinator/AddPartitions",
                                     pb.AddPartitionsRequest, pb.AddPartitionsResponse)
            call(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc, address=address) from None
