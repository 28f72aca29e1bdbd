"""Where each key of a compose file sits, so that every message can name file and line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tierctl.errors import Location
from tierctl.readers import PathKey, format_path, yaml_line_map
from tierctl.yaml12 import Yaml12Loader

# libyaml's parser with YAML 1.2 scalars: `restart: no` and `"22:22"`-like values stay
# strings, as compose reads them.
YamlLoader = Yaml12Loader

# Messages point at services.<name>.<key>[i].<sub> at the deepest; deeper keys are not recorded
# so that a large inline config does not cost a walk of every scalar.
_LINE_DEPTH = 5

#: (file, line) of each key path.
Lines = Mapping[PathKey, tuple[str, int]]


def line_map(text: str) -> dict[PathKey, int]:
    """Line of each key/item path, from the YAML node tree (anchors resolved as aliases).

    Read with the bounded reader (:mod:`tierctl.readers`); an unreadable text gives no lines.
    """
    return dict(yaml_line_map(text, line_depth=_LINE_DEPTH + 1).items())


def merged_lines(texts: Sequence[tuple[str, str]]) -> dict[PathKey, tuple[str, int]]:
    """(file, line) of each key path over files merged in order; a later file wins."""
    out: dict[PathKey, tuple[str, int]] = {}
    for name, text in texts:
        out.update({k: (name, v) for k, v in line_map(text).items()})
    return out


def locate(lines: Lines, path: PathKey, default_file: str) -> Location:
    """File and line of ``path`` (or its nearest ancestor that has one), and the dotted path."""
    for end in range(len(path), -1, -1):
        hit = lines.get(tuple(path[:end]))
        if hit is not None:
            return Location(file=hit[0], line=hit[1], path=format_path(tuple(path)))
    return Location(file=default_file, path=format_path(tuple(path)))
