"""spark-log: a Spark-native streaming log.

The public surface is small and explicit; everything else lives in private modules.
"""
from . import acls as acls
from . import errors as errors
from . import partitioner as partitioner
from ._admin import Admin as Admin
from ._admin import PartitionDescription as PartitionDescription
from ._admin import TopicDescription as TopicDescription
from ._consumer import Consumer as Consumer
from ._consumer import ConsumerRecord as ConsumerRecord
from ._producer import Producer as Producer
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
    "ConsumerRecord",
    "ElectionResult",
    "PartitionDescription",
    "PartitionReassignment",
    "Producer",
    "QuotaEntry",
    "RaftConfig",
    "ScramUser",
    "SparkLogError",
    "TopicConfig",
    "TopicDescription",
    "acls",
    "errors",
    "partitioner",
]
