"""A started node freezes its start-up heap (``brokers.node.freeze_startup_heap``): the
objects alive once it serves leave the collector's generations, so a full collection no
longer walks them, and ``main`` does it once ``start()`` returned."""
from __future__ import annotations

import gc
import inspect

from brokers import node


def test_the_start_up_heap_leaves_the_collectors_generations() -> None:
    kept = [object() for _ in range(3)] + [[i] for i in range(1000)]  # tracked, alive
    before = gc.get_freeze_count()
    try:
        node.freeze_startup_heap()
        assert gc.get_freeze_count() >= before + 1000
        assert gc.collect() >= 0 and all(len(item) == 1 for item in kept[3:])  # frozen, not freed
    finally:
        gc.unfreeze()


def test_main_freezes_after_the_node_started_and_before_it_waits() -> None:
    source = inspect.getsource(node.main)
    assert source.index("node.start()") < source.index("freeze_startup_heap()") < source.index("wait_for_signal(done)")
