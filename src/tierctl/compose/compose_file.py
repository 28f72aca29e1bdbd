"""A compose file as data: its services in their long forms, and where each key came from."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tierctl.compose.forms import (
    FormError,
    normalise_depends_on,
    normalise_environment,
    normalise_labels,
    split_command,
)
from tierctl.compose.interpolation import Interpolation, InterpolationError, interpolate
from tierctl.compose.lines import locate, merged_lines
from tierctl.compose.long_forms import parse_port, unique_ports
from tierctl.errors import ComposeInputError, Location
from tierctl.readers import PathKey

_T = TypeVar("_T")


@dataclass(frozen=True)
class ComposeService:
    """One service, normalised.

    Attributes:
        name: The service name.
        data: The service's keys as read (anchors merged, interpolated), in their written form.
        command: ``command`` as argv tokens; None when absent.
        environment: ``environment`` as a map; a bare key maps to None.
        labels: ``labels`` as a map; a bare key is an empty label.
        entrypoint: ``entrypoint`` as argv tokens; None when absent.
        mounted_configs: Each top-level config the service mounts (by ``configs:``), name ->
            its definition (``content``/``file``), None when the file does not define it.
    """

    name: str
    data: dict[str, Any] = field(repr=False)
    command: tuple[str, ...] | None
    environment: dict[str, str | None]
    labels: dict[str, str]
    entrypoint: tuple[str, ...] | None = None
    mounted_configs: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def image(self) -> str | None:
        """The image reference, if any."""
        value = self.data.get("image")
        return str(value) if value is not None else None

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        """GPU ids reserved in ``deploy.resources.reservations.devices[*].device_ids``."""
        deploy = self.data.get("deploy")
        resources = deploy.get("resources") if isinstance(deploy, dict) else None
        reservations = resources.get("reservations") if isinstance(resources, dict) else None
        devices = reservations.get("devices") if isinstance(reservations, dict) else None
        out: list[str] = []
        for device in devices if isinstance(devices, list) else []:
            ids = device.get("device_ids") if isinstance(device, dict) else None
            if isinstance(ids, list):
                out.extend(str(d) for d in ids)
            elif isinstance(ids, str | int) and not isinstance(ids, bool):
                out.append(str(ids))
        return tuple(out)

    @property
    def depends_on(self) -> dict[str, Any]:
        """``depends_on`` as the long map with compose's defaults (condition, required)."""
        value = normalise_depends_on(self.data.get("depends_on"))
        return value if isinstance(value, dict) else {}

    @property
    def profiles(self) -> tuple[str, ...]:
        """``profiles`` as written (merged); empty: the service runs in every project."""
        value = self.data.get("profiles")
        return tuple(str(p) for p in value) if isinstance(value, list) else ()

    @property
    def ports(self) -> tuple[dict[str, Any], ...]:
        """``ports`` in the long form Compose prints, one per port (a range gives one each):
        ``host_ip``, ``published``, ``target``, ``protocol``. A reference kept as written is
        read with its default (``${A:-9000}:80`` publishes 9000, ``${A}:80`` nothing); an
        entry Compose refuses is left out (``tierctl compose config`` names it)."""
        value = self.data.get("ports")
        out: list[dict[str, Any]] = []
        for entry in value if isinstance(value, list) else []:
            if isinstance(entry, str) and "$" in entry:
                try:
                    entry = interpolate(entry, {}, Interpolation.DEFAULTS)
                except InterpolationError:
                    continue
            try:
                out.extend(parse_port(entry))
            except FormError:
                continue
        return tuple(unique_ports(out))

    @property
    def container_name(self) -> str | None:
        """The container name, if set."""
        value = self.data.get("container_name")
        return str(value) if value is not None else None


@dataclass(frozen=True)
class ComposeFile:
    """A compose document (or several merged), normalised, with where each key came from.

    The line map is computed on first use: a clean file never needs it, and building it
    costs a second pass over the YAML.
    """

    source: str
    data: dict[str, Any] = field(repr=False)
    services: dict[str, ComposeService]
    texts: tuple[tuple[str, str], ...] = field(repr=False)  # (source, YAML text) in merge order
    raw: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    #: Read as written (``Interpolation.AS_WRITTEN``): a ``${...}`` in a string command is
    #: one word, as compose splits the string only after interpolating it.
    as_written: bool = field(default=False, compare=False)

    @property
    def tagged(self) -> dict[str, Any]:
        """The document with its ``!reset``/``!override`` values, for merging over another."""
        return self.raw if self.raw is not None else self.data

    @functools.cached_property
    def lines(self) -> dict[PathKey, tuple[str, int]]:
        """(file, line) of each key path; a later file wins, as in a merge."""
        return merged_lines(self.texts)

    def location(self, *path: str | int) -> Location:
        """File and line of ``path`` (or its nearest ancestor), and the dotted path."""
        return locate(self.lines, tuple(path), self.source)

    @classmethod
    def from_data(
        cls,
        source: str,
        data: dict[str, Any],
        texts: tuple[tuple[str, str], ...],
        raw: dict[str, Any] | None = None,
        *,
        overlay: bool = False,
        as_written: bool = False,
    ) -> ComposeFile:
        """Normalise every service of ``data`` (already interpolated); ``overlay``: an
        override file, where a ``null`` service is kept in ``data`` (the merge leaves the
        earlier service as it was) and has no :class:`ComposeService`.

        Raises:
            ComposeInputError: a service that is not a mapping, or a command, environment or
                labels value compose cannot read; located at file:line.
        """
        configs = data.get("configs")
        services: dict[str, ComposeService] = {}
        for name, body in (data.get("services") or {}).items():
            if body is None and overlay:
                continue
            if not isinstance(body, dict):
                raise ComposeInputError(
                    f"services.{name} must be a mapping",
                    location=locate(merged_lines(texts), ("services", str(name)), texts[-1][0]),
                    rule="each service is a mapping of compose keys",
                    value=type(body).__name__,
                    fix="write the service as a mapping of compose keys",
                )
            services[str(name)] = _service(str(name), body, configs, texts, as_written)
        return cls(
            source=source,
            data=data,
            services=services,
            texts=texts,
            raw=raw,
            as_written=as_written,
        )


def _service(
    name: str,
    raw: dict[str, Any],
    configs: Any,
    texts: tuple[tuple[str, str], ...],
    as_written: bool = False,
) -> ComposeService:
    def argv(value: Any) -> tuple[str, ...] | None:
        return split_command(value, references=as_written)

    def read(key: str, form: Callable[[Any], _T]) -> _T:
        try:
            return form(raw.get(key))
        except FormError as exc:
            path = ("services", name, key)
            raise ComposeInputError(
                str(exc),
                location=locate(merged_lines(texts), path, texts[-1][0]),
                rule=exc.rule,
                value=raw.get(key),
                fix=exc.fix,
            ) from None

    return ComposeService(
        name=name,
        data=raw,
        command=read("command", argv),
        environment=read("environment", normalise_environment),
        labels=read("labels", normalise_labels),
        entrypoint=read("entrypoint", argv),
        mounted_configs=_mounted(raw.get("configs"), configs),
    )


def _mounted(refs: Any, configs: Any) -> dict[str, Any]:
    """The top-level definitions of the configs a service mounts (short or long syntax)."""
    defined = configs if isinstance(configs, dict) else {}
    out: dict[str, Any] = {}
    for ref in refs if isinstance(refs, list) else []:
        source = str(ref.get("source") if isinstance(ref, dict) else ref)
        out[source] = defined.get(source)
    return out
