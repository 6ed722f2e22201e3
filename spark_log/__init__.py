"""spark-log: a Spark-native streaming log.

The public surface is small and explicit; everything else lives in private modules.
"""
from . import errors as errors
from . import partitioner as partitioner
from ._admin import Admin as Admin
from ._admin import PartitionDescription as PartitionDescription
from ._admin import TopicDescription as TopicDescription
from ._consumer import Consumer as Consumer
from ._consumer import ConsumerRecord as ConsumerRecord
from ._group_admin import GroupDescription as GroupDescription
from ._group_admin import GroupListing as GroupListing
from ._group_admin import GroupMember as GroupMember
from ._group_admin import GroupPartition as GroupPartition
from ._group_session import OffsetAndMetadata as OffsetAndMetadata
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
    "GroupDescription",
    "GroupListing",
    "GroupMember",
    "GroupPartition",
    "OffsetAndMetadata",
    "PartitionDescription",
    "PartitionReassignment",
    "Producer",
    "RaftConfig",
    "SparkLogError",
    "TopicConfig",
    "TopicDescription",
    "errors",
    "partitioner",
]
