"""Synthetic engine metrics for backfilling a real Prometheus: the generator lives in
:mod:`tierctl.demo.history` (the fleet demo uses it too); the tests import it from here."""

from tierctl.demo.history import BUCKETS, ArmData, openmetrics

__all__ = ["BUCKETS", "ArmData", "openmetrics"]
