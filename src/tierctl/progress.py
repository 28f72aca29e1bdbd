"""Progress bars for long work, drawn by the CLI and the demo from the library's progress
reports (a user-interface module: below both, so the demo does not import the CLI).

The library reports (:class:`tierctl.bench.execute.BenchProgress`); only this module draws.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

if TYPE_CHECKING:
    from tierctl.bench.samples import RequestSample


class BenchBars:
    """A :class:`~tierctl.bench.execute.BenchProgress` as rich bars: requests of the current
    run or block, and (for an A/B) the blocks done. Use as a context manager."""

    def __init__(self, console: Console | None = None) -> None:
        self._bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=False,
        )
        self._requests: TaskID | None = None
        self._blocks: TaskID | None = None
        self._started = False

    def __enter__(self) -> BenchBars:
        return self  # drawing starts with the first run: input errors print on a clean line

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._started:
            self._bars.stop()

    def begin(self, label: str, requests: int, block: int, blocks: int) -> None:
        """Start the bar of a run or block; for several blocks, count the finished ones."""
        if not self._started:
            self._bars.start()
            self._started = True
        if blocks > 1:
            if self._blocks is None:
                self._blocks = self._bars.add_task("blocks", total=blocks)
            self._bars.update(self._blocks, completed=block)
        if self._requests is None:
            self._requests = self._bars.add_task(label, total=requests)
        else:
            self._bars.reset(self._requests, total=requests, description=label)

    def blocks_done(self, blocks: int) -> None:
        """Show ``blocks`` blocks finished (called once the A/B returns)."""
        if self._blocks is not None:
            self._bars.update(self._blocks, completed=blocks)

    def request_done(self, sample: RequestSample) -> None:
        """Advance the current bar by one request."""
        if self._requests is not None:
            self._bars.advance(self._requests)
