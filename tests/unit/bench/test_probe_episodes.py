"""The proxy's view of probe misses: N consecutive misses mark a backend unhealthy."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tierctl.bench.probe import Episode, unhealthy_episodes
from tierctl.bench.samples import ProbeSample


def _probes(pattern: str) -> list[ProbeSample]:
    """'.' = answered, 'x' = missed; one probe per second."""
    return [
        ProbeSample(float(i), None if c == "x" else 0.01, None if c == "x" else 200)
        for i, c in enumerate(pattern)
    ]


def test_two_misses_are_not_an_episode():
    assert unhealthy_episodes(_probes("..xx..xx..")) == []


def test_episode_starts_at_third_miss_and_ends_at_next_success():
    assert unhealthy_episodes(_probes("..xxxx..")) == [Episode(4.0, 6.0)]


def test_episode_still_open_at_the_end():
    assert unhealthy_episodes(_probes(".xxx.xxx")) == [Episode(3.0, 4.0), Episode(7.0, None)]


def test_threshold_is_configurable():
    assert len(unhealthy_episodes(_probes("x.x.x."), misses_to_mark=1)) == 3


def test_order_of_samples_does_not_matter():
    probes = _probes("..xxx.xxxx")
    assert unhealthy_episodes(list(reversed(probes))) == unhealthy_episodes(probes)


@given(st.text(alphabet=".x", max_size=60), st.integers(min_value=1, max_value=5))
def test_episodes_match_runs_of_misses(pattern, n):
    runs = [len(r) for r in pattern.split(".") if r]
    episodes = unhealthy_episodes(_probes(pattern), n)
    assert len(episodes) == sum(1 for r in runs if r >= n)
    assert all(e.end_s is None or e.end_s > e.start_s for e in episodes)
