"""PyYAML's (C) safe loader with YAML 1.2 booleans and integers, as compose reads files.

YAML 1.1 (PyYAML's default) reads ``no``/``on``/``yes`` as booleans and ``22:22`` as the
sexagesimal integer 1342; compose (go-yaml v3) and YAML 1.2 read them as strings. The spec
loader and the compose reader both use this loader so that tierctl sees what compose sees.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Yaml12Loader(_Base):  # type: ignore[misc]
    """Safe loader (C parser where available) with YAML 1.2 bool and int resolution."""


Yaml12Loader.yaml_implicit_resolvers = {
    key: [
        (tag, regexp)
        for tag, regexp in resolvers
        # YAML 1.2's core schema has no timestamps: `2001-12-14` stays a string, as compose
        # (go-yaml v3) reads it into a plain value; PyYAML would build a datetime.date.
        if tag
        not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:timestamp")
    ]
    for key, resolvers in _Base.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
