"""A node process runs without pandas: ``refuse_pandas()`` makes ``import pandas`` fail.

No broker or controller code uses pandas, yet a node process used to load it (about 340
modules, 0.5 s of CPU at every process start, more on a loaded machine): the first
``pa.array(...)`` from Python objects asks pyarrow's pandas shim whether its input is a
pandas object, and the shim imports pandas to find out.  ``brokers.node`` even paid it on
purpose at start (``_warm_up_arrow``), so that the import would not stall the Raft thread
at its first append.

With pandas refused, the shim's import fails once, pyarrow records that pandas is absent,
and every later ``pa.array`` skips the check: the same arrays, no pandas.  Only
``python -m brokers.node`` refuses it (``brokers.node``'s first lines), never a process
that imports ``Node`` as a library (tests, the hosting application's driver, a user's
notebook), where pandas may be wanted.

Thread-safety: call once, before the process starts threads.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Sequence

__all__ = ["refuse_pandas", "PandasRefused"]


class PandasRefused(importlib.abc.MetaPathFinder):
    """A meta path finder that fails every import of ``pandas`` or a submodule of it."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (a spark-log node process runs without pandas)",
                                      name=fullname)
        return None


def refuse_pandas() -> None:
    """Make ``import pandas`` fail in this process from now on (module docstring).  Does
    nothing if pandas is already loaded or already refused."""
    if "pandas" in sys.modules or any(isinstance(finder, PandasRefused) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, PandasRefused())
