"""Progress bars for long work, drawn by the CLI and the demo from the library's progress
reports (a user-interface module: below both, so the demo does not import the CLI).

The library reports (:class:`tierctl.bench.execute.BenchProgress`, a rollout's
:class:`tierctl.rollout.progress.RolloutProgress`); only this module draws.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.status import Status

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


def _elapsed(seconds: float) -> str:
    """``41 s``, ``2 min 05 s``: how long a wait has lasted."""
    whole = max(0, round(seconds))
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


class RolloutWaits:
    """A :class:`~tierctl.rollout.progress.RolloutProgress` for the terminal: while a gate
    waits (an engine restarting, a scrape, the soak) one live line says what it waits for and
    for how long; when output is not a terminal, a plain line every ``every_s`` seconds of the
    wait. The end of each wait is one permanent line. Use as a context manager."""

    def __init__(self, console: Console | None = None, every_s: float = 10.0) -> None:
        self._console = console or Console(stderr=True)
        self._every_s = every_s
        self._status: Status | None = None
        self._shown: dict[str, float] = {}

    def __enter__(self) -> RolloutWaits:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def waiting(self, service: str, what: str, elapsed_s: float, budget_s: float) -> None:
        """Show the wait: live on a terminal, every ``every_s`` seconds otherwise."""
        line = f"{service}: waiting for {what}: {_elapsed(elapsed_s)} of {_elapsed(budget_s)}"
        if self._console.is_terminal:
            if self._status is None:
                self._status = self._console.status(escape(line))
                self._status.start()
            else:
                self._status.update(escape(line))
            return
        last = self._shown.get(service)
        if last is None or elapsed_s - last >= self._every_s:
            self._shown[service] = elapsed_s
            self._console.print(escape(line), highlight=False)

    def waited(self, service: str, what: str, elapsed_s: float, ok: bool) -> None:
        """One permanent line: the wait's outcome and how long it took."""
        self._stop()
        self._shown.pop(service, None)
        how = "after" if ok else "still not there after"
        self._console.print(
            escape(f"{service}: {what} {how} {_elapsed(elapsed_s)}"), highlight=False
        )
