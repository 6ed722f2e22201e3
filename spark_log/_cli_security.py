"""``spark-log users``, ``acls``, ``quotas`` and ``whoami`` (part of ``cli.py``).

    spark-log users add NAME [--password-stdin | --password-file F] [--iterations N]
    spark-log users list | users delete NAME
    spark-log acls add (--allow-principal P | --deny-principal P) --operation OP [--operation OP ...]
                       (--topic T | --group G | --cluster | --transactional-id X)
                       [--resource-pattern-type literal|prefixed] [--host H]
    spark-log acls list [--principal P] [--topic T | --group G | --cluster | --transactional-id X]
                        [--resource-pattern-type any|match|literal|prefixed]
    spark-log acls remove (same filters as list; at least one)
    spark-log quotas alter (--user U | --user-default) and/or (--client-id C | --client-id-default)
                           [--add KEY=BYTES_PER_S ...] [--remove KEY ...]
    spark-log quotas describe
    spark-log whoami

A password is never taken on the command line (other users of the machine would see it in
the process list): it is read from stdin (``--password-stdin``), a file, or a prompt
without echo.  Connection security comes from ``--command-config FILE`` (a Kafka-style
``client.properties``), ``$SPARK_LOG_CLIENT_CONFIG``, or the dev cluster's
``client.properties``.
"""
from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from .acls import AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME
from .acls import parse_enum
from .errors import InvalidConfigError

__all__ = ["COMMANDS", "add_parsers", "run"]

COMMANDS = ("users", "acls", "quotas", "whoami")


def _resource_options(parser: argparse.ArgumentParser, *, pattern_default: str) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--topic")
    group.add_argument("--group")
    group.add_argument("--cluster", action="store_true")
    group.add_argument("--transactional-id")
    parser.add_argument("--resource-pattern-type", default=pattern_default)


def add_parsers(commands: Any) -> None:
    users = commands.add_parser("users", help="SCRAM-SHA-256 users").add_subparsers(dest="action", required=True)
    add = users.add_parser("add", help="create a user or change its password")
    add.add_argument("name")
    source = add.add_mutually_exclusive_group()
    source.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    source.add_argument("--password-file", help="read the password from this file's first line")
    add.add_argument("--iterations", type=int, default=4096)
    users.add_parser("list")
    delete = users.add_parser("delete")
    delete.add_argument("name")

    acls = commands.add_parser("acls", help="access control lists").add_subparsers(dest="action", required=True)
    add_acl = acls.add_parser("add")
    who = add_acl.add_mutually_exclusive_group(required=True)
    who.add_argument("--allow-principal")
    who.add_argument("--deny-principal")
    add_acl.add_argument("--operation", action="append", required=True)
    add_acl.add_argument("--host", default="*")
    _resource_options(add_acl, pattern_default="literal")
    for name in ("list", "remove"):
        selector = acls.add_parser(name)
        selector.add_argument("--principal")
        selector.add_argument("--operation")
        selector.add_argument("--host")
        _resource_options(selector, pattern_default="any")

    quotas = commands.add_parser("quotas", help="client byte-rate quotas").add_subparsers(dest="action", required=True)
    alter = quotas.add_parser("alter")
    user = alter.add_mutually_exclusive_group()
    user.add_argument("--user")
    user.add_argument("--user-default", action="store_true")
    client = alter.add_mutually_exclusive_group()
    client.add_argument("--client-id")
    client.add_argument("--client-id-default", action="store_true")
    alter.add_argument("--add", action="append", default=[], metavar="KEY=BYTES_PER_S")
    alter.add_argument("--remove", action="append", default=[], metavar="KEY")
    quotas.add_parser("describe")

    commands.add_parser("whoami", help="the principal the cluster authenticates you as")


def _password(args: argparse.Namespace) -> str:
    if args.password_file:
        try:
            with open(args.password_file) as handle:
                text = handle.readline()
        except OSError as exc:
            raise InvalidConfigError(f"cannot read --password-file: {exc.strerror}") from None
    elif args.password_stdin or not sys.stdin.isatty():
        text = sys.stdin.readline()
    else:
        text = getpass.getpass(f"password for {args.name}: ")
    password = text.rstrip("\r\n")
    if not password:
        raise InvalidConfigError("the password is empty")
    return password


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def _filter(args: argparse.Namespace) -> AclBindingFilter:
    kind, name = _resource(args)
    return AclBindingFilter(
        resource_type=kind, resource_name=name,
        pattern_type=parse_enum(PatternType, args.resource_pattern_type, "--resource-pattern-type"),
        principal=args.principal, host=args.host,
        operation=parse_enum(Operation, args.operation, "--operation") if args.operation else Operation.ANY)


def _users(admin: Any, args: argparse.Namespace) -> None:
    if args.action == "add":
        admin.add_user(args.name, _password(args), iterations=args.iterations)
        print(f"user {args.name} saved (SCRAM-SHA-256, {args.iterations} iterations)")
    elif args.action == "list":
        for u in admin.list_users():
            print(f"{u.name}  {u.mechanism}  iterations={u.iterations}")
    else:
        admin.delete_user(args.name)
        print(f"user {args.name} deleted")


def _acls(admin: Any, args: argparse.Namespace) -> None:
    if args.action == "add":
        kind, name = _resource(args)
        if name is None:
            raise InvalidConfigError("acls add needs a resource: --topic, --group, --cluster or --transactional-id")
        principal = args.allow_principal or args.deny_principal
        permission = Permission.ALLOW if args.allow_principal else Permission.DENY
        pattern = parse_enum(PatternType, args.resource_pattern_type, "--resource-pattern-type")
        bindings = [AclBinding(kind, name, pattern, principal, args.host,
                               parse_enum(Operation, op, "--operation"), permission) for op in args.operation]
        admin.create_acls(bindings)
        for binding in bindings:
            print("added " + binding.describe())
    elif args.action == "list":
        for binding in admin.describe_acls(_filter(args)):
            print(binding.describe())
    else:
        selector = _filter(args)
        if selector == AclBindingFilter():
            raise InvalidConfigError("acls remove needs at least one filter (it would remove every ACL)")
        for binding in admin.delete_acls([selector]):
            print("removed " + binding.describe())


def _quotas(admin: Any, args: argparse.Namespace) -> None:
    if args.action == "describe":
        for entry in admin.describe_client_quotas():
            who = ", ".join(f"{k}={'<default>' if v is None else v}" for k, v in entry.entity.items())
            print(f"{who}  " + "  ".join(f"{k}={v:g}" for k, v in sorted(entry.values.items())))
        return
    entity: dict[str, str | None] = {}
    if args.user is not None or args.user_default:
        entity["user"] = None if args.user_default else args.user
    if args.client_id is not None or args.client_id_default:
        entity["client-id"] = None if args.client_id_default else args.client_id
    if not entity:
        raise InvalidConfigError("quotas alter needs --user/--user-default and/or --client-id/--client-id-default")
    values: dict[str, float] = {}
    for item in args.add:
        key, sep, value = item.partition("=")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise InvalidConfigError(f"--add takes KEY=BYTES_PER_S, got {item!r}") from None
        if not sep:
            raise InvalidConfigError(f"--add takes KEY=BYTES_PER_S, got {item!r}")
    if not values and not args.remove:
        raise InvalidConfigError("quotas alter needs --add KEY=VALUE or --remove KEY")
    admin.alter_client_quotas(entity, set=values, remove=args.remove)
    print("quotas updated")


def run(args: argparse.Namespace) -> int:
    from ._admin import Admin

    with Admin(args.bootstrap) as admin:
        if args.command == "users":
            _users(admin, args)
        elif args.command == "acls":
            _acls(admin, args)
        elif args.command == "quotas":
            _quotas(admin, args)
        else:
            print(admin.whoami())
    return 0
