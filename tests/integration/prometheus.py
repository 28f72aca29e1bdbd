"""Test helpers around the real Prometheus server (Debian's ``prometheus`` package).

``make test`` installs the package; tests that need it are skipped with a reason without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierctl.runtime.local_prom import LocalPrometheus, prometheus_binaries
from tierctl.runtime.local_prom import backfill as _backfill

BINARIES = prometheus_binaries()
needs_prometheus = pytest.mark.skipif(
    BINARIES is None,
    reason="Debian's prometheus package is not installed (make test installs it as root)",
)


def backfill(openmetrics: str, data_dir: Path) -> None:
    """Backfill with the installed promtool."""
    assert BINARIES is not None
    _backfill(openmetrics, data_dir, promtool=BINARIES[1])


@contextlib.contextmanager
def running_prometheus(
    workdir: Path, config: str = "global: {}\n", data_dir: Path | None = None
) -> Iterator[str]:
    """Start Prometheus on a free loopback port; yields its URL; always stops it."""
    assert BINARIES is not None
    with LocalPrometheus(workdir, config, data_dir=data_dir, binary=BINARIES[0]) as prom:
        yield prom.url


@contextlib.contextmanager
def backfilled_prometheus(workdir: Path, openmetrics: str) -> Iterator[str]:
    """A real Prometheus holding ``openmetrics`` (backfilled with promtool); yields its URL."""
    data = workdir / "data"
    backfill(openmetrics, data)
    with running_prometheus(workdir, data_dir=data) as url:
        yield url


#: A two-replica SGLang spec whose services are ``svc-r1`` (control) and ``svc-r2`` (canary),
#: as the backfilled arms of that name: what ``tierctl readout --spec`` tests read.
READOUT_SPEC = (
    "tier: t\nhost: t\noutput: c.yaml\n"
    "engine: {kind: sglang, version: 0.5.23, service: 'svc-{replica}',\n"
    "  image: 'x/y@sha256:" + "a" * 64 + "', args: {prefill-decode-interval: 1}}\n"
    "replicas:\n  r1: {gpus: [0], role: control}\n"
    "  r2: {gpus: [1], role: canary, args: {prefill-decode-interval: 2}}\n"
    "telemetry: {variant: 'tier-pdi{prefill-decode-interval}', places: [service-labels]}\n"
)
