"""Compose's YAML tags ``!reset`` and ``!override`` as values, and the reader that knows them.

In an override file (``docker compose -f base.yaml -f over.yaml``) or an ``extends``, a value
tagged ``!reset`` removes what the earlier file set (``ports: !reset []``), and ``!override``
replaces it whole instead of merging (``volumes: !override [...]``). Read alone, a file drops
its ``!reset`` keys and keeps its ``!override`` values as plain values, as compose does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from tierctl.yaml12 import FastConstructor, Yaml12Loader


class Reset:
    """A ``!reset`` value: remove the key from what came before."""

    def __repr__(self) -> str:
        return "Reset()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reset)

    def __hash__(self) -> int:
        return hash(Reset)


@dataclass(frozen=True)
class Override:
    """An ``!override`` value: replace what came before, do not merge."""

    value: Any


class ComposeYamlLoader(Yaml12Loader):
    """The YAML 1.2 safe loader plus compose's ``!reset`` / ``!override`` tags."""


def _reset(loader: Any, node: yaml.Node) -> Reset:
    return Reset()


def _override(loader: Any, node: yaml.Node) -> Override:
    if isinstance(node, yaml.MappingNode):
        tag = "tag:yaml.org,2002:map"
    elif isinstance(node, yaml.SequenceNode):
        tag = "tag:yaml.org,2002:seq"
    else:
        # A tagged scalar is a string to go-yaml (its tag replaces the implicit int, bool or
        # null), so Compose reads `ipc: !override 7` as "7" and `ports: !override 7` as a
        # string where a list belongs (refused).
        tag = "tag:yaml.org,2002:str"
    plain = type(node)(tag, node.value, node.start_mark, node.end_mark)
    return Override(loader.construct_object(plain, deep=True))


ComposeYamlLoader.add_constructor("!reset", _reset)
ComposeYamlLoader.add_constructor("!override", _override)


class FastComposeYamlLoader(FastConstructor, ComposeYamlLoader):
    """:class:`ComposeYamlLoader` with the same results, faster on big files (a fleet);
    ``!reset`` and ``!override`` go through PyYAML's constructor as before."""
