"""Compose profiles: which services run together (the law behind the comparing checks)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tierctl.compose.profiles import ALL, ProfileScope, active_profiles, enabled

_names = st.sampled_from(["a", "b", "c"])
_scopes = st.dictionaries(
    st.sampled_from(["s1", "s2", "s3", "s4", "s5"]),
    st.lists(_names, max_size=2, unique=True).map(tuple),
    min_size=1,
)


def test_active_profiles_like_compose() -> None:
    assert active_profiles(("b", "a", "b"), {"COMPOSE_PROFILES": "c"}) == ("b", "a")
    assert active_profiles((), {"COMPOSE_PROFILES": " a, ,b "}) == ("a", "b")
    assert active_profiles((), {"COMPOSE_PROFILES": ""}) is None
    assert active_profiles((), {}) is None


def test_enabled_like_compose() -> None:
    assert enabled((), ())
    assert not enabled(("a",), ())
    assert enabled(("a", "b"), ("b",))
    assert enabled(("a",), (ALL,))


@given(_scopes, st.none() | st.lists(_names | st.just(ALL), max_size=3).map(tuple))
def test_two_services_run_together_exactly_when_one_checked_set_holds_both(
    profiles: dict[str, tuple[str, ...]], active: tuple[str, ...] | None
) -> None:
    scope = ProfileScope(active, profiles)
    sets = [set(s.services) for s in scope.sets()]
    for a in profiles:
        for b in profiles:
            if a != b:
                assert scope.together(a, b) == any({a, b} <= s for s in sets), (a, b)
        # Every service that runs is in some checked set, and only those.
        assert scope.runs(a) == any(a in s for s in sets)


@given(_scopes, st.lists(_names, min_size=1, max_size=3).map(tuple))
def test_the_active_set_is_the_one_compose_runs(
    profiles: dict[str, tuple[str, ...]], active: tuple[str, ...]
) -> None:
    (only,) = ProfileScope(active, profiles).sets()
    assert set(only.services) == {n for n, ps in profiles.items() if enabled(ps, active)}
    assert only.profiles == active
