"""Read out: canary vs control from Prometheus, with paired statistics and a verdict."""

from tierctl.readout.analysis import Arm, Readout, arms_from_tier, run_readout
from tierctl.runtime.promapi import PrometheusClient

__all__ = ["Arm", "PrometheusClient", "Readout", "arms_from_tier", "run_readout"]
