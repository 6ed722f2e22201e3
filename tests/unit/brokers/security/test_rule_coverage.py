"""Every method of every gRPC service in ``spark_log/proto`` has an access rule.

With the authorizer on, a method without a rule in ``brokers/security/rules.py`` is refused
to every caller but super users and nodes; this test makes the gap visible when a service
is added (or a method appended to one): it imports every ``spark_log/proto/*_pb2`` module,
lists each service's methods from its descriptors and fails naming every path that has no
rule.  It also fails on a rule for a method no protocol file declares (a renamed or removed
RPC).  Adds well under 1 s.
"""
from __future__ import annotations

import importlib
import pkgutil

import spark_log.proto
from brokers.security.rules import RULES, Rule, undeclared


def _protocol_methods() -> list[str]:
    paths: list[str] = []
    for module in pkgutil.iter_modules(spark_log.proto.__path__):
        if not module.name.endswith("_pb2"):
            continue
        descriptor = importlib.import_module(f"{spark_log.proto.__name__}.{module.name}").DESCRIPTOR
        for service in descriptor.services_by_name.values():
            paths.extend(f"/{service.full_name}/{method.name}" for method in service.methods)
    return paths


def test_every_protocol_method_has_an_access_rule() -> None:
    paths = _protocol_methods()
    services = {path.split("/")[1] for path in paths}
    assert {"spark_log.broker.v1.Broker", "spark_log.broker.v1.Admin", "spark_log.raft.RaftService",
            "spark_log.controller.ControllerService", "spark_log.security.v1.Security",
            "spark_log.security.v1.SecurityController"} <= services
    missing = undeclared(paths)
    assert not missing, ("these RPCs have no access rule: declare each in brokers/security/rules.py RULES "
                         f"(Kafka's operation and resource for it): {missing}")


def test_every_rule_names_a_method_of_the_protocol() -> None:
    stale = sorted(set(RULES) - set(_protocol_methods()))
    assert not stale, f"rules for methods no spark_log/proto service declares (renamed or removed?): {stale}"


def test_the_check_reports_a_method_without_a_rule() -> None:
    rules: dict[str, Rule] = dict(RULES)
    served = ["/spark_log.broker.v1.Broker/Produce", "/spark_log.groups.v1.GroupCoordinator/OffsetCommit",
              "/spark_log.broker.v1.Broker/Produce", "/spark_log.groups.v1.GroupCoordinator/OffsetCommit"]
    assert undeclared(served, rules) == ["/spark_log.groups.v1.GroupCoordinator/OffsetCommit"]
    del rules["/spark_log.broker.v1.Broker/Produce"]
    assert undeclared(served, rules) == ["/spark_log.broker.v1.Broker/Produce",
                                         "/spark_log.groups.v1.GroupCoordinator/OffsetCommit"]
