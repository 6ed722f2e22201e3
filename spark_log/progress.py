"""Progress bars (rich, on stderr) for long CLI work: producing a file, compacting,
reassigning, starting the local cluster.  Public so that the launcher (``brokers``) can
show one too; a no-op when stderr is not a terminal unless asked."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator, TextIO

__all__ = ["progress", "progress_steps"]


@contextmanager
def progress(description: str, total: int | None, *, enabled: bool | None) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields ``advance(n)``.  ``enabled`` None: when stderr
    is a terminal."""
    show = sys.stderr.isatty() if enabled is None else enabled
    if not show:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr, force_terminal=True if enabled else None, width=100)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
        bar.refresh()


@contextmanager
def progress_steps(description: str, *, enabled: bool | None,
                   file: TextIO | None = None) -> Iterator[Callable[..., None]]:
    """A rich progress bar on stderr whose total may change as the work is measured; yields
    ``update(completed, total, description=None)``.  ``enabled`` None: when stderr is a
    terminal."""
    out = file if file is not None else sys.stderr
    show = out.isatty() if enabled is None else enabled
    if not show:
        yield lambda completed, total, description=None: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    console = Console(file=out, force_terminal=True if enabled else None, width=100)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task(description, total=None)

        def update(completed: int, total: int, description: str | None = None) -> None:
            if description is not None:
                bar.update(task, completed=completed, total=total, description=description)
            else:
                bar.update(task, completed=completed, total=total)

        yield update
        bar.refresh()


