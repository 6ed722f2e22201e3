"""The transaction coordinator (KIP-98 transactions, KIP-890's defences, and the
many-participant transactions a Spark micro-batch needs).

- ``model``: ``TxnMeta`` (one transactional id), states, participants, settings, the
  internal topic ``__transaction_state`` and ``partition_for``.
- ``records``: its records (one per transactional id, JSON) and frames.
- ``core`` ``TxnShard``: the ids of one internal partition as a pure state machine.
- ``coordinator`` ``TransactionCoordinator``: the IO shell (loads, durable appends, the
  completer that writes markers and aborts timed-out transactions).
- ``markers``: writing markers (every broker) and sending them (coordinators).
- ``verifier``: the partition leader's KIP-890 check of a first transactional write.
- ``service``: the gRPC services.
"""
from .coordinator import TransactionCoordinator as TransactionCoordinator
from .markers import MarkerHandler as MarkerHandler
from .markers import MarkerSender as MarkerSender
from .model import INTERNAL_TOPIC as INTERNAL_TOPIC
from .model import TxnConfig as TxnConfig
from .service import MarkerServicer as MarkerServicer
from .service import TxnServicer as TxnServicer
from .verifier import TxnVerifier as TxnVerifier

__all__ = ["INTERNAL_TOPIC", "MarkerHandler", "MarkerSender", "MarkerServicer", "TransactionCoordinator",
           "TxnConfig", "TxnServicer", "TxnVerifier"]
