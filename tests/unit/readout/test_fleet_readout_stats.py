"""The fleet readout's pooled counts and its refusals (the comparisons themselves run against
a real Prometheus: tests/integration/test_readout_fleet.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.errors import InputError
from tierctl.readout.fleet import (
    FleetReadoutHost,
    mantel_haenszel,
    ratio_of_rate_ratios,
    run_fleet_readout,
)
from tierctl.runtime.promapi import PrometheusClient

counts = st.tuples(st.integers(1, 500), st.integers(0, 5000)).map(lambda t: (t[0], t[0] + t[1]))


@settings(deadline=None)  # the first call imports scipy
@given(counts, counts)
def test_mantel_haenszel_of_one_stratum_is_its_rate_ratio(
    k: tuple[int, int], c: tuple[int, int]
) -> None:
    got = mantel_haenszel([(k, c)], min_total=0)
    assert math.isclose(got.rate_ratio, (k[0] / k[1]) / (c[0] / c[1]), rel_tol=1e-9)


@settings(deadline=None)
@given(st.lists(st.tuples(counts, counts), min_size=1, max_size=5))
def test_mantel_haenszel_of_identical_arms_is_one_and_not_worse(
    strata: list[tuple[tuple[int, int], tuple[int, int]]],
) -> None:
    same = [(k, k) for k, _ in strata]
    got = mantel_haenszel(same, min_total=0)
    assert math.isclose(got.rate_ratio, 1.0, rel_tol=1e-9)
    assert got.verdict == "same"


def test_a_host_effect_in_aborts_cancels_in_the_ratio_of_rate_ratios() -> None:
    # The canary hosts abort 5x as often as the controls, before and after: no change.
    flat = ratio_of_rate_ratios([50, 1000], [50, 1000], [10, 1000], [10, 1000])
    assert math.isclose(flat.rate_ratio, 1.0)
    assert flat.verdict == "same"
    rose = ratio_of_rate_ratios([10, 1000], [60, 1000], [10, 1000], [10, 1000])
    assert rose.verdict == "worse"
    assert rose.ci_low > 1


def test_a_fleet_readout_needs_one_design_and_both_roles() -> None:
    client = PrometheusClient("http://127.0.0.1:1")
    canary = FleetReadoutHost("a", "canary", client, 'host_machine="a"')
    control = FleetReadoutHost("b", "control", client, 'host_machine="b"')
    with pytest.raises(InputError, match="one design"):
        run_fleet_readout([canary, control], start_s=10, end_s=20, step_s=1)
    with pytest.raises(InputError, match="no control host"):
        run_fleet_readout([canary], start_s=10, end_s=20, step_s=1, baseline=(0, 10))
    with pytest.raises(InputError, match="baseline window must end before"):
        run_fleet_readout([canary, control], start_s=10, end_s=20, step_s=1, baseline=(0, 15))
