"""What a reported figure measures: its unit and which direction is better, carried by type.

Every table and report that prints a figure (``bench run``, ``bench ab``, ``readout``) asks
the figure's :class:`Quantity` how to print it and whether a ratio is good news. Nothing is
inferred from a name: ``output_tok_per_s`` ends in ``_s`` and is a rate, not a duration (the
A/B table once printed it in "ms", 1,000 times too high).

One rule for comparisons, everywhere: a ratio is ``canary / control`` (``B / A``) for every
metric, whatever its direction; whether that ratio is *better* or *worse* is a separate
judgement derived from the quantity's :class:`Direction` (:func:`judge_ratio`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Literal

Change = Literal["better", "worse", "same", "unclear"]


class Unit(enum.Enum):
    """The unit a figure is stored in (always SI base: seconds, per second)."""

    SECONDS = "s"
    TOKENS_PER_SECOND = "tok/s"
    REQUESTS_PER_SECOND = "req/s"
    PERCENT = "%"
    COUNT = "count"

    @property
    def shown_as(self) -> str:
        """The unit tables print the figure in (durations in ms)."""
        return "ms" if self is Unit.SECONDS else self.value


class Direction(enum.Enum):
    """Which way a metric improves."""

    LOWER_IS_BETTER = "lower"
    HIGHER_IS_BETTER = "higher"


@dataclass(frozen=True)
class Quantity:
    """A reported figure's label, unit and direction."""

    label: str
    unit: Unit
    direction: Direction

    @property
    def is_count(self) -> bool:
        """Counts and percentages are compared as A → B, not as a ratio."""
        return self.unit in (Unit.COUNT, Unit.PERCENT)

    def cell(self, value: float | None) -> str:
        """The value as tables print it (see :func:`format_value`)."""
        return format_value(value, self.unit)


def format_value(value: float | None, unit: Unit) -> str:
    """A figure as tables print it: durations in ms (3 significant figures, at least one
    decimal below 10 ms), rates, percentages and counts as plain numbers; ``-`` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit is Unit.SECONDS:
        ms = value * 1e3
        return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 1000 else f"{ms:.0f}"
    if unit is Unit.COUNT or float(value).is_integer():
        return f"{value:.0f}"
    return f"{value:.1f}"


def judge_ratio(
    low: float | None, high: float | None, direction: Direction, tolerance: float = 0.0
) -> Change:
    """Whether a ``canary / control`` ratio is better or worse, from its interval.

    ``better``/``worse`` when the whole interval lies past ``1 ± tolerance`` on that side
    (for a lower-is-better metric, below 1 is better; for higher-is-better, above 1);
    ``same`` when the interval lies inside the band; ``unclear`` otherwise, or when there is
    no interval.
    """
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "unclear"
    band_low, band_high = 1.0 / (1.0 + tolerance), 1.0 + tolerance
    if high < band_low:
        below: Change = "better" if direction is Direction.LOWER_IS_BETTER else "worse"
        return below
    if low > band_high:
        above: Change = "worse" if direction is Direction.LOWER_IS_BETTER else "better"
        return above
    if low >= band_low and high <= band_high:
        return "same"
    return "unclear"


def judge_counts(a: float | None, b: float | None, direction: Direction) -> Change:
    """B against A for a count (errors, misses, completion %): equal is ``same``."""
    if a is None or b is None:
        return "unclear"
    if a == b:
        return "same"
    lower = b < a
    return "better" if lower == (direction is Direction.LOWER_IS_BETTER) else "worse"
