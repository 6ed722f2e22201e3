"""KIP-890's server-side defence, the partition leader's half: before the first
transactional write of a producer to a partition (no transaction of that producer and epoch
open there yet), the leader asks the transaction's coordinator whether the partition was
added to the open transaction, so a write that arrives late (after its transaction ended)
cannot open a transaction nobody will ever end.  The coordinator is this broker's own
``TransactionCoordinator`` or, elsewhere, its AddPartitions RPC with ``verify_only``."""
from __future__ import annotations

import threading
from typing import Callable

import grpc

from brokers.metadata.image import MetadataImage
from brokers.net.channels import PEER_CHANNEL_OPTIONS, Channels
from spark_log import errors
from spark_log.errors import CoordinatorNotAvailableError
from spark_log.proto import transactions_pb2 as pb

from .coordinator import TransactionCoordinator
from .model import INTERNAL_TOPIC, partition_for

__all__ = ["TxnVerifier"]


class TxnVerifier:
    def __init__(self, *, broker_id: int, image: Callable[[], MetadataImage], local: TransactionCoordinator,
                 channels: Channels, timeout_ms: int = 10_000) -> None:
        self.broker_id = broker_id
        self._image = image
        self._local = local
        self._channels = channels
        self._timeout_s = timeout_ms / 1000
        self._lock = threading.Lock()
        self._stubs: dict[str, tuple[grpc.Channel, Callable[..., pb.AddPartitionsResponse]]] = {}

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
            self._stub(address)(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc, address=address) from None

    def _stub(self, address: str) -> Callable[..., pb.AddPartitionsResponse]:
        with self._lock:
            found = self._stubs.get(address)
            if found is None:
                channel = self._channels.open(address, PEER_CHANNEL_OPTIONS)
                found = (channel, channel.unary_unary(
                    "/spark_log.transactions.v1.TransactionCoordinator/AddPartitions",
                    request_serializer=pb.AddPartitionsRequest.SerializeToString,
                    response_deserializer=pb.AddPartitionsResponse.FromString))
                self._stubs[address] = found
            return found[1]

    def close(self) -> None:
        with self._lock:
            stubs, self._stubs = list(self._stubs.values()), {}
        for channel, _ in stubs:
            channel.close()
