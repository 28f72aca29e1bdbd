"""``--profile``, the compose profiles option ``validate``, ``plan``, ``render`` and ``import`` share."""

from __future__ import annotations

import os

import click

from tierctl.compose.profiles import active_profiles

#: ``--profile P``, repeatable, as docker compose takes it (COMPOSE_PROFILES when absent).
profile_option = click.option(
    "--profile",
    "profile",
    multiple=True,
    metavar="P",
    help="Activate a compose profile, as docker compose does (repeatable; default: "
    "COMPOSE_PROFILES). Without one, checks that compare services (ports, GPUs, container "
    "names) look at the default set and each profile's set separately.",
)


def chosen_profiles(given: tuple[str, ...]) -> tuple[str, ...] | None:
    """The ``--profile`` values, else COMPOSE_PROFILES; None when neither names one."""
    return active_profiles(given, os.environ)
