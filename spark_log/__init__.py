"""spark-log: a Spark-native streaming log.

The public surface is small and explicit; everything else lives in private modules.
"""
from . import errors as errors
from . import partitioner as partitioner
from ._admin import Admin as Admin
from ._admin import PartitionDescription as PartitionDescription
from ._admin import TopicDescription as TopicDescription
from ._compaction import PlanInfo as PlanInfo
from ._compaction import ReplicaCompaction as ReplicaCompaction
from ._consumer import Consumer as Consumer
from ._consumer import ConsumerRecord as ConsumerRecord
from ._producer import Producer as Producer
from ._reassignment import ElectionResult as ElectionResult
from ._reassignment import PartitionReassignment as PartitionReassignment
from .config import BrokerConfig as BrokerConfig
from .config import RaftConfig as RaftConfig
from .config import TopicConfig as TopicConfig
from .errors import SparkLogError as SparkLogError

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "BrokerConfig",
    "Consumer",
    "ConsumerRecord",
    "ElectionResult",
    "PartitionDescription",
    "PartitionReassignment",
    "PlanInfo",
    "Producer",
    "RaftConfig",
    "ReplicaCompaction",
    "SparkLogError",
    "TopicConfig",
    "TopicDescription",
    "errors",
    "partitioner",
]
