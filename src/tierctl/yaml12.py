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


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"
_VALUE = "tag:yaml.org,2002:value"
#: Scalars whose value is immutable, so one constructed value can serve every equal node.
_SHARED_SCALAR_TYPES = (int, float, bool, type(None))
#: Bounds on the memo dicts (a long-lived process reading many files must not grow forever).
_MEMO_LIMIT = 100_000
_MISSING = object()
# Keyed by the loader class too: a subclass may add resolvers or constructors.
_RESOLVED: dict[tuple[type, str, tuple[bool, bool]], str] = {}
_SCALARS: dict[tuple[type, str, str], Any] = {}


class FastConstructor(_Base):  # type: ignore[misc]
    """A mixin for a PyYAML loader: the same values, built faster on big files (a fleet).

    Two of PyYAML's per-node costs are paid once per distinct scalar instead: the implicit
    tag of a plain scalar (a list of regular expressions tried for each of the ~1,500
    scalars of a rendered tier, most of them repeated) and the construction of an int,
    float or bool. Mappings, sequences and strings are built by one recursive walk instead
    of PyYAML's generator per node; every other tag (``!reset``, ``!override``, one PyYAML
    refuses) goes through PyYAML's own constructor, and merge keys through its own
    ``flatten_mapping``, so the values are PyYAML's.
    """

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """The tag of a node; a plain scalar's depends only on its text (no path resolvers)."""
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (type(self), value, implicit)
        tag = _RESOLVED.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(_RESOLVED) > _MEMO_LIMIT:
                _RESOLVED.clear()
            _RESOLVED[key] = tag
        return tag

    def construct_document(self, node: yaml.Node) -> Any:
        """The document's value, as PyYAML's ``construct_document`` builds it."""
        try:
            return self._build(node)
        finally:
            self.constructed_objects: dict[Any, Any] = {}
            self.recursive_objects: dict[Any, Any] = {}
            self.deep_construct = False

    def _build(self, node: yaml.Node) -> Any:
        built = self.constructed_objects
        if node in built:
            return built[node]
        tag = node.tag
        kind = type(node)
        value: Any
        if kind is yaml.ScalarNode:
            if tag == _STR:
                return node.value  # a str is not worth a memo entry
            if tag == _NULL:
                return None
            key = (type(self), tag, node.value)
            value = _SCALARS.get(key, _MISSING)
            if value is _MISSING:
                value = self.construct_object(node, deep=True)
                if isinstance(value, _SHARED_SCALAR_TYPES):
                    if len(_SCALARS) > _MEMO_LIMIT:
                        _SCALARS.clear()
                    _SCALARS[key] = value
            return value
        if kind is yaml.MappingNode and tag == _MAP:
            for key_node, _ in node.value:
                if key_node.tag in (_MERGE, _VALUE):
                    self.flatten_mapping(node)
                    break
            mapping: dict[Any, Any] = {}
            built[node] = mapping
            for key_node, value_node in node.value:
                key = self._build(key_node)
                try:
                    hash(key)
                except TypeError:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        "found unhashable key",
                        key_node.start_mark,
                    ) from None
                mapping[key] = self._build(value_node)
            return mapping
        if kind is yaml.SequenceNode and tag == _SEQ:
            items: list[Any] = []
            built[node] = items
            items.extend(self._build(item) for item in node.value)
            return items
        value = self.construct_object(node, deep=True)
        built[node] = value
        return value


class FastYaml12Loader(FastConstructor, Yaml12Loader):
    """:class:`Yaml12Loader` with :class:`FastConstructor`: the same values, faster."""
