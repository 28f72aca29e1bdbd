"""Just enough of the Prometheus text format to read an engine's ``/metrics``.

Pipelines often rewrite an engine prefix's ``:`` to ``_``; :func:`metric_total` accepts either.
The engine profiles (:mod:`tierctl.engines`) know which families to sum and their label filters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A label value is quoted and may hold any character, ``}`` included (vLLM's
# ``cache_config_info`` carries configuration values as labels).
_SAMPLE = re.compile(
    r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>(?:[^}"]|"(?:[^"\\]|\\.)*")*)\})?'
    r"\s+(?P<value>\S+)"
)
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    """One sample line (``value_text``: the value as written, for a value used as an
    identity rather than a number, such as a process start time)."""

    name: str
    labels: dict[str, str]
    value: float
    value_text: str = ""


def parse_metrics(text: str) -> list[Sample]:
    """Parse the sample lines of a Prometheus text exposition (comments skipped)."""
    out: list[Sample] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        labels = dict(_LABEL.findall(m.group("labels") or ""))
        out.append(Sample(m.group("name"), labels, value, m.group("value")))
    return out


def metric_total(samples: list[Sample], name: str) -> float | None:
    """Sum of a metric over its label sets, under ``engine:x`` or ``engine_x``; None if absent."""
    names = {name, name.replace(":", "_")}
    values = [s.value for s in samples if s.name in names]
    return sum(values) if values else None
