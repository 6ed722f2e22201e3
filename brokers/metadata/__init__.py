"""Cluster metadata: records, the immutable image, deltas, snapshots and the listener.

    records.py      the metadata-log entries (frozen dataclasses, JSON codec)
    image.py        MetadataImage (EMPTY), BrokerInfo, TopicImage, PartitionInfo
    delta.py        MetadataDelta(image).replay(record) ... .apply() -> MetadataImage
    snapshot.py     encode_image / decode_image (the Raft state-machine snapshot)
    publisher.py    MetadataListener: keeps a node's image, calls publishers (delta, image)
"""
from .delta import LocalReplicaChanges as LocalReplicaChanges
from .delta import MetadataDelta as MetadataDelta
from .image import EMPTY as EMPTY
from .image import BrokerInfo as BrokerInfo
from .image import MetadataImage as MetadataImage
from .image import PartitionInfo as PartitionInfo
from .image import SchemaVersion as SchemaVersion
from .image import TopicImage as TopicImage
from .publisher import MetadataListener as MetadataListener
from .publisher import MetadataPublisher as MetadataPublisher
from .snapshot import decode_image as decode_image
from .snapshot import encode_image as encode_image

__all__ = [
    "EMPTY",
    "BrokerInfo",
    "LocalReplicaChanges",
    "MetadataDelta",
    "MetadataImage",
    "MetadataListener",
    "MetadataPublisher",
    "PartitionInfo",
    "SchemaVersion",
    "TopicImage",
    "decode_image",
    "encode_image",
]
