"""spark-log: a Spark-native streaming log.

The public surface is small and explicit; everything else lives in private modules.
"""
from . import errors as errors
from .config import BrokerConfig as BrokerConfig
from .config import RaftConfig as RaftConfig
from .config import TopicConfig as TopicConfig
from .errors import SparkLogError as SparkLogError

__version__ = "0.1.0"

__all__ = [
    "BrokerConfig",
    "RaftConfig",
    "SparkLogError",
    "TopicConfig",
    "errors",
]
