"""Compose's alternative spellings of one value, read as one shape.

A ``command`` is a list or a string split by go-shellwords' rules, as compose splits it (a
folded ``command: >`` is one string; see :mod:`tierctl.compose.shellwords`); ``environment`` and ``labels`` are a map or a list of ``KEY=VALUE`` / bare ``KEY``;
``depends_on`` is a list of names or the long map. ``docker compose config`` prints the long
form of each, and so do these functions. A value of the wrong shape raises
:class:`FormError`; the loader turns it into a located input error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tierctl.compose.shellwords import ShellWordsError, split_shell_words

#: An image pinned by digest (name@sha256:<64 hex>).
DIGEST_IMAGE = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
#: name:tag with a tag other than latest (a registry port is not a tag: host:5000/name).
TAGGED_IMAGE = re.compile(r"^[^@\s]*[^@\s/]:(?!latest$)[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class FormError(ValueError):
    """A value compose cannot read in any of its forms."""

    def __init__(self, message: str, *, rule: str, fix: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.fix = fix


def scalar_text(value: Any) -> str:
    """A YAML scalar as compose passes it to the container (``true``, ``4``, ``0.82``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return go_float(value)
    return str(value)


def go_float(value: float) -> str:
    """A float as Go prints it (``1000``, ``0.5``, ``1e+21``): compose formats with Go."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, _, exp = text.partition("e")
        sign = "-" if exp.startswith("-") else "+"
        text = f"{mantissa}e{sign}{exp.lstrip('+-').rjust(2, '0')}"
    return text


_HELD = re.compile("\ue000(\\d+)\ue001")


def _hold_references(line: str) -> tuple[str, list[str]]:
    """``line`` with each ``${...}`` that holds a blank replaced by a placeholder word (and
    the references, by index): compose splits a string command only after interpolation, so
    a reference read as written is one word (``${MODEL:?set MODEL}``), not two. ``$$`` is
    compose's escape of a literal ``$``, never a reference."""
    held: list[str] = []
    out: list[str] = []
    i = 0
    while i < len(line):
        if line.startswith("$$", i):
            out.append("$$")
            i += 2
            continue
        if line.startswith("${", i):
            depth, j = 0, i + 1
            while j < len(line):
                depth += {"{": 1, "}": -1}.get(line[j], 0)
                if depth == 0:
                    break
                j += 1
            ref = line[i : j + 1]
            if j < len(line) and any(c.isspace() for c in ref):
                out.append(f"\ue000{len(held)}\ue001")
                held.append(ref)
                i = j + 1
                continue
        out.append(line[i])
        i += 1
    return "".join(out), held


def split_command(value: Any, references: bool = False) -> tuple[str, ...] | None:
    """A ``command``/``entrypoint`` as argv tokens; None when absent. ``references``: the
    string is read as written (``Interpolation.AS_WRITTEN``), so a ``${...}`` is one word.

    Raises:
        FormError: unbalanced quotes in a string (compose refuses it too), or a mapping.
    """
    if value is None:
        return None
    if isinstance(value, str) and references and "${" in value:
        line, held = _hold_references(value)
        try:
            words = split_shell_words(line)[0]
        except ShellWordsError:
            words = None
        if words is not None:
            return tuple(_HELD.sub(lambda m: held[int(m.group(1))], w) for w in words)
    if isinstance(value, str):
        try:
            return tuple(split_shell_words(value)[0])
        except ShellWordsError as exc:
            raise FormError(
                f"cannot split the command into tokens: {exc}",
                rule="a string command is split by go-shellwords' rules, as compose does",
                fix="balance the quotes (escape a literal parenthesis) or write the command "
                "as a list",
            ) from None
    if isinstance(value, list):
        return tuple(scalar_text(v) for v in value)
    if isinstance(value, dict):
        raise FormError(
            "a command must be a string or a list",
            rule="compose command syntax",
            fix="write the command as a list of tokens",
        )
    return (scalar_text(value),)


def normalise_environment(value: Any) -> dict[str, str | None]:
    """``environment`` in map or list (``A=1``, bare ``A``) form, as a map; bare keys map to None.

    Raises:
        FormError: neither a map nor a list.
    """
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): None if v is None else scalar_text(v) for k, v in value.items()}
    if isinstance(value, list):
        out: dict[str, str | None] = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            out[key] = val if sep else None
        return out
    raise FormError(
        "must be a map or a list of KEY=VALUE",
        rule="compose environment/labels syntax",
        fix="write a mapping or a list of KEY=VALUE strings",
    )


def normalise_labels(value: Any) -> dict[str, str]:
    """``labels`` in map or list form, as a map; a bare key is an empty label, as in compose.

    Raises:
        FormError: neither a map nor a list.
    """
    return {k: "" if v is None else v for k, v in normalise_environment(value).items()}


def command_cut(value: Any) -> str | None:
    """The part of a string command that compose drops after an unquoted ``;&|<>``, or None.

    ``command: sh -c echo a; echo b`` runs ``sh -c echo a``: go-shellwords stops at ``;``.
    """
    if not isinstance(value, str):
        return None
    try:
        _, pos = split_shell_words(value)
    except ShellWordsError:
        return None
    return value[pos:] if pos >= 0 else None


#: What compose fills in for a dependency that does not say (compose-go transform/dependson).
DEPENDS_ON_DEFAULTS: dict[str, Any] = {"condition": "service_started", "required": True}


def normalise_depends_on(value: Any) -> Any:
    """``depends_on`` as the long map with compose's defaults filled in.

    A list of names means started and required; a long entry without ``condition`` or
    ``required`` gets ``service_started`` / ``true``, so ``[db]``, ``{db: {}}`` and
    ``{db: {condition: service_started, required: true}}`` read the same, as in compose.
    """
    if isinstance(value, list):
        return {str(d): dict(DEPENDS_ON_DEFAULTS) for d in value}
    if isinstance(value, dict):
        return {
            str(k): {**DEPENDS_ON_DEFAULTS, **v} if isinstance(v, dict) else v
            for k, v in value.items()
        }
    return value


def named_volume_source(mount: Any) -> str | None:
    """The named volume a service mount uses (``hf-cache:/root/.cache``), or None for a bind
    mount (``./m:/m``, ``/data:/data``, ``${DIR}:/m``), a tmpfs or an anonymous volume."""
    if isinstance(mount, dict):
        if mount.get("type", "volume") != "volume" or not mount.get("source"):
            return None
        return str(mount["source"])
    parts = str(mount).split(":")
    if len(parts) < 2:
        return None
    source = parts[0]
    if source.startswith((".", "/", "~", "$")) or (len(source) == 1 and source.isalpha()):
        return None
    return source


def referenced_resources(service: dict[str, Any]) -> Iterator[tuple[str, int | None, str]]:
    """(top-level key, index in the service's list or None, name) of every named volume,
    network, secret and config a compose service uses."""
    # Only compose's shapes are read: a file that breaks them is the schema contract's report.
    volumes = service.get("volumes")
    for i, mount in enumerate(volumes if isinstance(volumes, list) else []):
        source = named_volume_source(mount)
        if source is not None:
            yield "volumes", i, source
    networks = service.get("networks")
    for net in networks if isinstance(networks, list | dict) else []:
        yield "networks", None, str(net)
    for key in ("secrets", "configs"):
        refs = service.get(key)
        for i, ref in enumerate(refs if isinstance(refs, list) else []):
            yield key, i, str(ref.get("source") if isinstance(ref, dict) else ref)
