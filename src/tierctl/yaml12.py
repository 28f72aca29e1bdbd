"""PyYAML's (C) safe loader with YAML 1.2 booleans and integers, as compose reads files.

YAML 1.1 (PyYAML's default) reads ``no``/``on``/``yes`` as booleans and ``22:22`` as the
sexagesimal integer 1342; compose (go-yaml v3) and YAML 1.2 read them as strings. The spec
loader and the compose reader both use this loader so that tierctl sees what compose sees.
"""

from __future__ import annotations

import re
from collections.abc import Container
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
        # Nor the YAML 1.1 "value" type: a plain `=` is the string "=" to go-yaml (Compose
        # reads `command: =` as ["="]); PyYAML resolved it to a tag it then refused.
        if tag
        not in (
            "tag:yaml.org,2002:bool",
            "tag:yaml.org,2002:int",
            "tag:yaml.org,2002:timestamp",
            "tag:yaml.org,2002:value",
        )
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
_SCALAR_NODE = yaml.ScalarNode
_MAPPING_NODE = yaml.MappingNode
_SEQUENCE_NODE = yaml.SequenceNode
# Keyed by the loader class too: a subclass may add resolvers or constructors.
_RESOLVED: dict[type, dict[tuple[str, tuple[bool, bool]], str]] = {}
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

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        if self.yaml_path_resolvers:  # pragma: no cover - no tierctl loader adds one
            raise TypeError("FastConstructor assumes a loader without path resolvers")
        # This class's memo of plain scalars' tags, by (text, implicit) (a subclass may
        # resolve differently, so each class has its own).
        self._tags = _RESOLVED.setdefault(type(self), {})

    # libyaml's composer calls these two for every node; with no path resolvers (checked in
    # __init__) PyYAML's own only return, after an attribute lookup through the whole MRO.
    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        """Nothing to do: the loader has no path resolvers."""

    def ascend_resolver(self) -> None:
        """Nothing to do: the loader has no path resolvers."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """The tag of a node; a plain scalar's depends only on its text (no path resolvers)."""
        if kind is not _SCALAR_NODE:
            return super().resolve(kind, value, implicit)
        tags = self._tags
        tag = tags.get((value, implicit))
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(tags) > _MEMO_LIMIT:
                tags.clear()
            tags[value, implicit] = tag
        return tag

    def construct_document(self, node: yaml.Node) -> Any:
        """The document's value, as PyYAML's ``construct_document`` builds it."""
        try:
            return self._build(node)
        finally:
            self.constructed_objects: dict[Any, Any] = {}
            self.recursive_objects: dict[Any, Any] = {}
            self.deep_construct = False

    def construct_document_as_pyyaml(self, node: yaml.Node) -> Any:
        """The document's value built by PyYAML's own constructor (and its order, which
        decides which of several bad values an error names)."""
        return super().construct_document(node)

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

    def build_bounded(
        self,
        root: yaml.Node,
        *,
        max_depth: int,
        max_nodes: int,
        refused_tags: Container[str],
        duplicates: bool,
    ) -> Any:
        """The document's value, built in the same walk that checks its bounds.

        The checks are :func:`tierctl.readers.load_yaml`'s bounded walk (a recursive alias,
        a nesting deeper than ``max_depth``, more than ``max_nodes`` nodes after alias
        expansion, a refused tag, a key given twice when ``duplicates``), decided on the node
        graph as written (before merge keys are flattened), as that walk decides them. This
        walk only *detects*: anything it would refuse raises :class:`OutOfBounds`, and so does
        any value that cannot be built (PyYAML's errors pass through); the caller then reads
        the text again the reference way (check, then :meth:`construct_document`) for the
        exact message. A document this walk builds is one the reference path accepts, with
        the same value (``tests/unit/test_yaml_fused_walk.py``).
        """
        try:
            walk = _BoundedWalk(self, max_depth, max_nodes, refused_tags, duplicates)
            if type(root) is _SCALAR_NODE:
                if root.tag in refused_tags:
                    raise OutOfBounds
                return walk.scalar(root)
            return walk.node(root, 1)
        finally:
            self.constructed_objects = {}
            self.recursive_objects = {}
            self.deep_construct = False


class OutOfBounds(Exception):
    """:meth:`FastConstructor.build_bounded` met what the bounded walk refuses."""


class _BoundedWalk:
    """One :meth:`FastConstructor.build_bounded` walk: sizes, heights, the current path."""

    __slots__ = ("built", "dup", "loader", "max_depth", "max_nodes", "on_path", "refused", "sizes")

    def __init__(
        self,
        loader: FastConstructor,
        max_depth: int,
        max_nodes: int,
        refused: Container[str],
        dup: bool,
    ) -> None:
        self.loader = loader
        self.built: dict[Any, Any] = loader.constructed_objects
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.refused = refused
        self.dup = dup
        self.sizes: dict[yaml.Node, tuple[int, int]] = {}  # node -> (size, height) as written
        self.on_path: set[yaml.Node] = set()

    def scalar(self, node: yaml.Node) -> Any:
        """A scalar's value, as :meth:`FastConstructor._build` builds it."""
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag == _NULL:
            return None
        return self.loader._build(node)

    def node(self, node: yaml.Node, depth: int) -> Any:
        """A mapping's or sequence's value at ``depth``; its bounds checked first."""
        known = self.sizes.get(node)
        if known is not None:
            if depth - 1 + known[1] > self.max_depth:
                raise OutOfBounds
            return self.built[node]
        if node in self.on_path or depth > self.max_depth:
            raise OutOfBounds
        tag = node.tag
        refused = self.refused
        if tag in refused:
            raise OutOfBounds
        kind = type(node)
        written = node.value  # the children as written (flatten_mapping replaces the list)
        if kind is _MAPPING_NODE:
            kids = [n for pair in written for n in pair]
            if any(type(key_node) is not _SCALAR_NODE for key_node, _ in written):
                raise OutOfBounds  # a sequence or mapping as a key: the reference path says so
            if self.dup:
                seen: set[str] = set()
                for key_node, _ in written:
                    if type(key_node) is _SCALAR_NODE:
                        key = str(key_node.value)
                        if key in seen:
                            raise OutOfBounds
                        if key != "<<":
                            seen.add(key)
        else:
            kids = written
        self.on_path.add(node)
        size, height, below = 1, 0, depth + 1
        for kid in kids:
            if type(kid) is _SCALAR_NODE:
                if below > self.max_depth or kid.tag in refused:
                    raise OutOfBounds
                size += 1
                height = height or 1
            else:
                self.node(kid, below)
                kid_size, kid_height = self.sizes[kid]
                size += kid_size
                height = max(height, kid_height)
        self.on_path.discard(node)
        if size > self.max_nodes:
            raise OutOfBounds
        self.sizes[node] = (size, 1 + height)
        return self._value(node, kind, tag)

    def _value(self, node: yaml.Node, kind: Any, tag: str) -> Any:
        """The value of a checked node whose children are all built."""
        built = self.built
        if kind is _MAPPING_NODE and tag == _MAP:
            loader = self.loader
            for key_node, _ in node.value:
                if key_node.tag in (_MERGE, _VALUE):
                    loader.flatten_mapping(node)
                    break
            mapping: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.scalar(key_node) if type(key_node) is _SCALAR_NODE else built[key_node]
                try:
                    hash(key)
                except TypeError:
                    raise OutOfBounds from None
                mapping[key] = (
                    self.scalar(value_node)
                    if type(value_node) is _SCALAR_NODE
                    else built[value_node]
                )
            built[node] = mapping
            return mapping
        if kind is _SEQUENCE_NODE and tag == _SEQ:
            items = [
                self.scalar(item) if type(item) is _SCALAR_NODE else built[item]
                for item in node.value
            ]
            built[node] = items
            return items
        value = self.loader.construct_object(node, deep=True)
        built[node] = value
        return value


class FastYaml12Loader(FastConstructor, Yaml12Loader):
    """:class:`Yaml12Loader` with :class:`FastConstructor`: the same values, faster."""
