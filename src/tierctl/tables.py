"""Terminal tables that fit the terminal without ever cutting a number.

rich shrinks a table that is wider than the terminal by cutting cells (``184…``), which for a
table of measurements prints a wrong figure. :class:`FitTable` is decided at render time,
from the width the console offers: every column is at least as wide as its widest cell (a
number is never wrapped or cut); headers wrap at their spaces; and when even that does not
fit, the table is split into parts stacked one under the other, each repeating the key
columns (the lane, the arm, the metric) so every part reads on its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

#: What a column costs beyond its content with rich's default box: one space of padding on
#: each side and one border line.
_COLUMN_COST = 3


@dataclass(frozen=True)
class Col:
    """One column: its header, alignment, and whether it is repeated in every part."""

    header: str
    key: bool = False  # a name column (left-aligned, repeated); else a figure (right-aligned)


def _cell_len(markup: str) -> int:
    return Text.from_markup(markup).cell_len


class FitTable:
    """A table of rows (rich markup strings) laid out for the console's width when printed.

    Args:
        columns: the columns, in order; key columns are repeated in every part.
        rows: the cells, one list per row, as long as ``columns``.
        title: the title of the first part (the others say they continue it).
        section_every: draw a line after every ``section_every`` rows (0: none).
    """

    def __init__(
        self,
        columns: Sequence[Col],
        rows: Sequence[Sequence[str]],
        *,
        title: str = "",
        section_every: int = 0,
    ) -> None:
        self.columns = list(columns)
        self.rows = [list(r) for r in rows]
        self.title = title
        self.section_every = section_every

    def need(self, k: int) -> int:
        """The narrowest column ``k`` can be: its widest cell, and its header's longest
        word (headers wrap at spaces, never inside a word)."""
        cells = [_cell_len(r[k]) for r in self.rows]
        words = [len(w) for w in self.columns[k].header.split()] or [0]
        return max([*cells, *words, 1])

    def parts(self, width: int) -> list[list[int]]:
        """The columns of each part, so that each part fits ``width`` at its columns' needs
        (a part holds at least one column beside the keys, whatever the width)."""
        keys = [k for k, c in enumerate(self.columns) if c.key]
        base = 1 + sum(self.need(k) + _COLUMN_COST for k in keys)
        out: list[list[int]] = []
        current: list[int] = []
        used = base
        for k, c in enumerate(self.columns):
            if c.key:
                continue
            cost = self.need(k) + _COLUMN_COST
            if current and used + cost > width:
                out.append(current)
                current, used = [], base
            current.append(k)
            used += cost
        if current or not out:
            out.append(current)
        return [sorted([*keys, *part]) for part in out]

    def widths(self, part: Sequence[int], width: int) -> dict[int, int]:
        """Each column's width in a part: its need, widened to its whole header where the
        spare width allows (in column order), so headers wrap only when they must."""
        out = {k: self.need(k) for k in part}
        spare = width - 1 - sum(w + _COLUMN_COST for w in out.values())
        for k in part:
            extra = len(self.columns[k].header) - out[k]
            if 0 < extra <= spare:
                out[k] += extra
                spare -= extra
        return out

    def tables(self, width: int) -> Iterator[tuple[str, Table]]:
        """The title and rich table of each part, for a console ``width`` wide. Every column
        gets a fixed width (:meth:`widths`): rich's own shrinking would cut cells."""
        parts = self.parts(width)
        for n, part in enumerate(parts):
            widths = self.widths(part, width)
            title = self.title if n == 0 else f"(continued, part {n + 1} of {len(parts)})"
            if n == 0 and len(parts) > 1:
                title = f"{title} (part 1 of {len(parts)})".lstrip()
            table = Table()
            for k in part:
                col = self.columns[k]
                table.add_column(
                    col.header,
                    justify="left" if col.key else "right",
                    width=widths[k],
                    overflow="fold",
                )
            for i, row in enumerate(self.rows):
                end = self.section_every > 0 and i % self.section_every == self.section_every - 1
                table.add_row(*(row[k] for k in part), end_section=end)
            yield title, table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # The title is a paragraph of its own, as wide as the console: as a rich table title
        # it would wrap to the (possibly narrow) part's width.
        for title, table in self.tables(options.max_width):
            if title:
                yield Text(title)
            yield table
