"""``spark-log groups ...``: consumer groups from the command line, in the style of Kafka's
``kafka-consumer-groups.sh``.

    spark-log groups list [--json]
    spark-log groups describe GROUP [--json]      state, members, and per partition the committed
                                                  offset, log end offset and lag
    spark-log groups reset-offsets GROUP --topic T [--partitions 0,1]
        (--to-earliest | --to-latest | --to-datetime 2024-05-01T12:00:00 | --shift-by N | --to-offset N)
        [--execute]                               without --execute: a dry run that prints the plan
    spark-log groups delete GROUP
    spark-log groups delete-offsets GROUP --topic T [--partitions 0,1]

Every command refuses what the group's coordinator refuses (e.g. a reset or delete while
the group has live members: ``NON_EMPTY_GROUP``), one line on stderr, exit code 1.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from .errors import InvalidConfigError

if TYPE_CHECKING:
    from ._group_admin import GroupDescription

__all__ = ["add_parser", "run", "describe_table", "describe_json"]


def add_parser(commands: Any) -> None:
    groups = commands.add_parser("groups", help="consumer groups: list, describe (lag), reset offsets, delete")
    actions = groups.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every group")
    listing.add_argument("--json", action="store_true")
    describe = actions.add_parser("describe", help="a group's members and, per partition, offsets and lag")
    describe.add_argument("group")
    describe.add_argument("--json", action="store_true", help="print JSON instead of a table")
    reset = actions.add_parser("reset-offsets", help="reset a group's offsets (a dry run without --execute)")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True, action="append", help="a topic (repeat for several)")
    reset.add_argument("--partitions", default=None, metavar="0,1", help="only these partitions")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM]",
                        help="the first record at or after it (local time without an offset)")
    target.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (N may be negative)")
    target.add_argument("--to-offset", type=int, metavar="N")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: only print them)")
    reset.add_argument("--json", action="store_true")
    delete = actions.add_parser("delete", help="delete a group without members and its offsets")
    delete.add_argument("group")
    offsets = actions.add_parser("delete-offsets", help="delete a group's offsets of a topic")
    offsets.add_argument("group")
    offsets.add_argument("--topic", required=True)
    offsets.add_argument("--partitions", default=None, metavar="0,1")


def _partitions(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return sorted({int(item) for item in text.split(",") if item.strip()})
    except ValueError:
        raise InvalidConfigError(f"--partitions takes numbers like 0,1,2, got {text!r}") from None


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def describe_table(d: GroupDescription) -> list[str]:
    """Kafka's describe columns, one line per partition, after a summary line."""
    members = {m.member_id: m for m in d.members}
    lines = [f"group {d.group_id}  state {d.state}  members {len(d.members)}  group epoch {d.group_epoch}  "
             f"assignor {d.assignor or '-'}  coordinator {d.coordinator_id}  total lag {d.total_lag}"]
    header = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = []
    for (topic, partition), p in sorted(d.partitions.items()):
        member = members.get(p.member_id or "")
        rows.append([topic, str(partition), _cell(p.committed_offset), _cell(p.log_end_offset), _cell(p.lag),
                     _cell(p.member_id), _cell(member.client_host if member else None),
                     _cell(member.client_id if member else None)])
    for m in d.members:  # members without partitions show too
        if not m.assignment:
            rows.append(["-", "-", "-", "-", "-", m.member_id, _cell(m.client_host), _cell(m.client_id)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines.extend("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
    return lines


def describe_json(d: GroupDescription) -> dict[str, Any]:
    return {
        "group": d.group_id, "state": d.state, "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch,
        "assignor": d.assignor, "coordinator": d.coordinator_id, "total_lag": d.total_lag,
        "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                     "host": m.client_host, "member_epoch": m.member_epoch, "state": m.state,
                     "subscribed_topics": list(m.subscribed_topics), "subscribed_pattern": m.subscribed_pattern,
                     "assignment": [list(tp) for tp in m.assignment],
                     "target_assignment": [list(tp) for tp in m.target_assignment]} for m in d.members],
        "partitions": [{"topic": t, "partition": p, "committed_offset": g.committed_offset, "metadata": g.metadata,
                        "log_end_offset": g.log_end_offset, "lag": g.lag, "member_id": g.member_id}
                       for (t, p), g in sorted(d.partitions.items())],
    }


def run(args: argparse.Namespace) -> int:
    from ._admin import Admin

    with Admin(args.bootstrap) as admin:
        if args.action == "list":
            groups = admin.list_groups()
            if args.json:
                print(json.dumps([{"group": g.group_id, "state": g.state, "members": g.members,
                                   "coordinator": g.coordinator_id} for g in groups], indent=1))
            else:
                for g in groups:
                    print(f"{g.group_id}\t{g.state}\t{g.members} member{'' if g.members == 1 else 's'}")
        elif args.action == "describe":
            d = admin.describe_group(args.group)
            print(json.dumps(describe_json(d), indent=1) if args.json else "\n".join(describe_table(d)))
        elif args.action == "reset-offsets":
            return _reset(admin, args)
        elif args.action == "delete":
            admin.delete_group(args.group)
            print(f"deleted group {args.group}")
        else:
            deleted = admin.delete_group_offsets(args.group, args.topic, _partitions(args.partitions))
            print(f"deleted {len(deleted)} committed offset{'' if len(deleted) == 1 else 's'} of group {args.group}")
    return 0


def _reset(admin: Any, args: argparse.Namespace) -> int:
    to: str | dt.datetime | None = None
    if args.to_earliest:
        to = "earliest"
    elif args.to_latest:
        to = "latest"
    elif args.to_datetime is not None:
        try:
            to = dt.datetime.fromisoformat(args.to_datetime)
        except ValueError:
            raise InvalidConfigError(f"--to-datetime takes an ISO 8601 time like 2024-05-01T12:00:00, got "
                                     f"{args.to_datetime!r}") from None
    planned = admin.reset_group_offsets(args.group, args.topic, to=to, shift_by=args.shift_by,
                                        to_offset=args.to_offset, partitions=_partitions(args.partitions),
                                        execute=args.execute)
    if args.json:
        print(json.dumps({"group": args.group, "executed": bool(args.execute),
                          "offsets": [{"topic": t, "partition": p, "new_offset": o}
                                      for (t, p), o in sorted(planned.items())]}, indent=1))
        return 0
    print(f"{'GROUP':<20}  {'TOPIC':<30}  {'PARTITION':>9}  {'NEW-OFFSET':>10}")
    for (topic, partition), offset in sorted(planned.items()):
        print(f"{args.group:<20}  {topic:<30}  {partition:>9}  {offset:>10}")
    if not args.execute:
        print("dry run: nothing committed (add --execute to commit these offsets)")
    return 0
