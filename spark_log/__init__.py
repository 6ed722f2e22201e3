"""spark-log: a Spark-native streaming log.

The public surface is small and explicit; everything else lives in private modules.

Importing ``spark_log`` turns gRPC's fork support off (``GRPC_ENABLE_FORK_SUPPORT=false``,
unless the environment already sets it) before gRPC loads.  With it on, gRPC 1.81+ runs
its post-fork handler in every forked child, whose poller then dies on the epoll fd that
``subprocess.Popen(close_fds=True)`` closed before ``exec`` (grpc/grpc#43055): the child
exits before it runs the program.  spark-log processes fork only to ``exec`` (Spark's JVM
gateway, broker processes), so nothing needs gRPC in a forked child.  Import spark_log
before grpc for this to take effect.
"""
import os as _os

_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from . import acls as acls
from . import errors as errors
from . import partitioner as partitioner
from ._admin import Admin as Admin
from ._admin import PartitionDescription as PartitionDescription
from ._admin import TopicDescription as TopicDescription
from ._compaction import PlanInfo as PlanInfo
from ._compaction import ReplicaCompaction as ReplicaCompaction
from ._consumer import Consumer as Consumer
from ._consumer import ConsumerRecord as ConsumerRecord
from ._group_admin import GroupDescription as GroupDescription
from ._group_admin import GroupListing as GroupListing
from ._group_admin import GroupMember as GroupMember
from ._group_admin import GroupPartition as GroupPartition
from ._group_session import ConsumerGroupMetadata as ConsumerGroupMetadata
from ._group_session import OffsetAndMetadata as OffsetAndMetadata
from ._producer import Producer as Producer
from ._quorum import QuorumDescription as QuorumDescription
from ._quorum import QuorumReplica as QuorumReplica
from ._reassignment import ElectionResult as ElectionResult
from ._reassignment import PartitionReassignment as PartitionReassignment
from ._security_admin import QuotaEntry as QuotaEntry
from ._security_admin import ScramUser as ScramUser
from .acls import AclBinding as AclBinding
from .acls import AclBindingFilter as AclBindingFilter
from .config import BrokerConfig as BrokerConfig
from .config import RaftConfig as RaftConfig
from .config import TopicConfig as TopicConfig
from .errors import SparkLogError as SparkLogError
from .security import ClientSecurity as ClientSecurity

__version__ = "0.1.0"

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "Admin",
    "BrokerConfig",
    "ClientSecurity",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "ElectionResult",
    "GroupDescription",
    "GroupListing",
    "GroupMember",
    "GroupPartition",
    "OffsetAndMetadata",
    "PartitionDescription",
    "PartitionReassignment",
    "PlanInfo",
    "Producer",
    "QuorumDescription",
    "QuorumReplica",
    "QuotaEntry",
    "RaftConfig",
    "ReplicaCompaction",
    "ScramUser",
    "SparkLogError",
    "TopicConfig",
    "TopicDescription",
    "acls",
    "errors",
    "partitioner",
]
