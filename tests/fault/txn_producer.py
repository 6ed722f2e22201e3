"""A transactional producer process for kill -9 tests (``test_transactions_failover.py``).

    python -m tests.fault.txn_producer BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID OUT [HOLD]

Runs transactions of two values per partition until killed; every step is a JSON line in
OUT, fsynced before the step it announces: ``{"txn", "phase": "begin", "values"}`` (every
value of the transaction, before the first send), ``"commit-called"``, ``"committed"``.
With ``HOLD`` (a transaction number), that transaction stops after its values were sent and
flushed, before its commit: ``"held"`` is written and the process waits to be killed, so a
test kills it inside an open transaction every time, not when a poll happens to see it
there (the window between ``begin`` and ``commit-called`` is a few milliseconds).
"""
from __future__ import annotations

import json
import os
import sys


def main(bootstrap: str, topic: str, partitions: str, transactional_id: str, out_path: str,
         hold: str = "-1") -> None:
    import threading

    from spark_log import Producer

    n = int(partitions)
    with open(out_path, "a") as out, Producer(bootstrap, transactional_id=transactional_id) as producer:
        def note(**line: object) -> None:
            out.write(json.dumps(line) + "\n")
            out.flush()
            os.fsync(out.fileno())

        producer.init_transactions()
        txn = 0
        while True:
            values = [(p, f"{transactional_id}-{txn}-{p}-{i}") for p in range(n) for i in range(2)]
            note(txn=txn, phase="begin", values=values)
            producer.begin_transaction()
            for partition, value in values:
                producer.send(topic, value.encode(), partition=partition)
            producer.flush()
            if txn == int(hold):
                note(txn=txn, phase="held")
                threading.Event().wait()  # until killed: the transaction stays open
            note(txn=txn, phase="commit-called")
            producer.commit_transaction()
            note(txn=txn, phase="committed")
            txn += 1


if __name__ == "__main__":
    main(*sys.argv[1:7])
