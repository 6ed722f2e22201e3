"""The controller: the active Raft leader's request handling over the metadata log.

    controller.py       QuorumController (StateMachine on voters + request protocol)
    registration.py     broker registration / heartbeat / fencing records
    leases.py           in-memory broker leases of the active controller
    election.py         leader election and ISR changes on fence / unfence
    placement.py        replica placement across brokers and racks/hosts
    topics.py           create / delete topic validation
    alter_partition.py  ISR changes requested by leaders
    configs.py          alter configs
    schema_versions.py  schema evolution of typed topics
    wire.py, service.py the gRPC ControllerService
    client.py           ControllerClient (finds the active controller)
    heartbeater.py      BrokerHeartbeater (a broker's registration + lease renewal)
"""
from .client import ClusterDescription as ClusterDescription
from .client import ControllerClient as ControllerClient
from .controller import HeartbeatResult as HeartbeatResult
from .controller import QuorumController as QuorumController
from .heartbeater import BrokerHeartbeater as BrokerHeartbeater

__all__ = ["BrokerHeartbeater", "ClusterDescription", "ControllerClient", "HeartbeatResult", "QuorumController"]
