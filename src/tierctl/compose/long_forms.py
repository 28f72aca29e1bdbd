"""Compose's short syntaxes parsed into the long forms ``docker compose config`` prints.

Ports (``[host_ip:][published:]target[/protocol]``, ranges, IPv6 in brackets), mounts
(``source:target[:mode]``), devices, byte sizes (``512m``), durations (``90s`` prints as
``1m30s``, Go's spelling) and dotenv files. Each parser raises :class:`FormError` with the
rule and the fix when Compose would refuse the value; the messages follow Compose's.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from tierctl.compose.forms import FormError

_T = TypeVar("_T")
_PROTOCOLS = ("tcp", "udp", "sctp")


def _port_number(text: str, what: str) -> tuple[int, int]:
    """``80`` or ``70-71`` as (start, end)."""
    start, dash, end = text.partition("-")
    try:
        lo = int(start)
        hi = int(end) if dash else lo
    except ValueError:
        raise FormError(
            f"invalid {what} port: {text}",
            rule="a port is a number or a range N-M",
            fix="write ports as [HOST_IP:][HOST:]CONTAINER[/PROTOCOL], e.g. 127.0.0.1:8000:80",
        ) from None
    if lo < 0 or hi < lo or hi > 65535:
        raise FormError(
            f"invalid {what} port range: {text}",
            rule="a port range N-M needs 0 <= N <= M <= 65535",
            fix="write the lower port first",
        )
    return lo, hi


def _split_host_ip(text: str) -> tuple[str | None, str]:
    """(host_ip, rest) of ``ip:published:target``; IPv6 is written in brackets."""
    if text.startswith("["):
        close = text.find("]")
        if close == -1 or text[close + 1 : close + 2] != ":":
            raise FormError(
                f"invalid IP address in port {text}",
                rule="an IPv6 host address is written in brackets: [::1]:8000:80",
                fix="close the bracket and follow it with :",
            )
        return text[1:close], text[close + 2 :]
    parts = text.split(":")
    if len(parts) <= 2:
        return None, text
    return ":".join(parts[:-2]), ":".join(parts[-2:])


def parse_port(entry: Any) -> list[dict[str, Any]]:
    """One ``ports`` entry as the long forms Compose prints (a range gives one per port).

    Raises:
        FormError: a value Compose refuses (a bad number, IP address, protocol or range).
    """
    if isinstance(entry, dict):
        return [_long_port(entry)]
    if isinstance(entry, bool) or not isinstance(entry, int | str):
        raise FormError(
            f"a port must be a string, a number or a mapping, not {type(entry).__name__}",
            rule="compose ports syntax",
            fix="write ports as strings: '8000:80'",
        )
    text = str(entry)
    spec, slash, protocol = text.partition("/")
    protocol = protocol if slash else "tcp"
    if protocol.lower() not in _PROTOCOLS:
        raise FormError(
            f"invalid proto: {protocol}",
            rule="a port's protocol is tcp, udp or sctp",
            fix="write 8000:80/tcp or 8000:80/udp",
        )
    host_ip, rest = _split_host_ip(spec)
    if host_ip is not None and host_ip != "":
        try:
            ipaddress.ip_address(host_ip)
        except ValueError:
            raise FormError(
                f"invalid IP address: {host_ip}",
                rule="a port's host address is an IPv4 or IPv6 address",
                fix="write 127.0.0.1:8000:80 (or leave the address out)",
            ) from None
    published, colon, target = rest.rpartition(":")
    if not colon:
        published, target = "", rest
    lo, hi = _port_number(target, "container")
    hosts: list[str | None]
    if published:
        hlo, hhi = _port_number(published, "host")
        if hi - lo != hhi - hlo:
            if hi != lo:
                raise FormError(
                    f"invalid ranges specified for container and host Ports: {target} and "
                    f"{published}",
                    rule="a container port range needs a host range of the same length",
                    fix="give both ranges the same number of ports",
                )
            hosts = [published]
        else:
            hosts = [str(hlo + i) for i in range(hi - lo + 1)]
    else:
        hosts = [None] * (hi - lo + 1)
    out: list[dict[str, Any]] = []
    for i, port in enumerate(range(lo, hi + 1)):
        long: dict[str, Any] = {"mode": "ingress"}
        if host_ip:
            long["host_ip"] = host_ip
        long["target"] = port
        host = hosts[i] if len(hosts) > 1 else hosts[0]
        if host is not None:
            long["published"] = host
        long["protocol"] = protocol.lower()
        out.append(long)
    return out


#: Marks a long port whose ``published`` was written as a number: Compose's unicity key
#: formats it differently (``%!s(int=8000)``), so it never matches a ``"8000"``; dropped from
#: the printed form.
PUBLISHED_INT = "\x00published-int"


def _long_port(entry: dict[str, Any]) -> dict[str, Any]:
    out = dict(entry)
    out.setdefault("mode", "ingress")
    out.setdefault("protocol", "tcp")
    if "published" in out and out["published"] is not None:
        if isinstance(out["published"], int) and not isinstance(out["published"], bool):
            out[PUBLISHED_INT] = True
        out["published"] = str(out["published"])
    target = out.get("target")
    if isinstance(target, str) and target.isdigit() and len(target.lstrip("0")) <= 19:
        # a longer one is past any port (and int() of 4,300+ digits raised); Compose's cast
        # refuses it, as tierctl.compose.casts does
        out["target"] = int(target)
    return out


def port_key(long: dict[str, Any]) -> str:
    """What makes two ports the same one for Compose (its unicity rule)."""
    published = long.get("published", "")
    if long.get(PUBLISHED_INT):
        published = f"%!s(int={published})"
    return (
        f"{long.get('host_ip', '0.0.0.0')}:{published}:"
        f"{long.get('target')}/{long.get('protocol', 'tcp')}"
    )


def unique_by(items: Iterable[_T], key: Callable[[_T], str]) -> list[_T]:
    """compose-go's unicity rule: a later entry with the same key replaces the earlier one,
    in the earlier one's place."""
    out: list[_T] = []
    index: dict[str, int] = {}
    for item in items:
        k = key(item)
        if k in index:
            out[index[k]] = item
        else:
            index[k] = len(out)
            out.append(item)
    return out


def unique_ports(longs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Compose's last unicity pass over ports, on their long forms."""
    return unique_by(longs, port_key)


def written_port_key(entry: Any) -> str:
    """Compose's unicity key of a port as written, before the long forms exist: a short port
    is its own text (``9000:90`` and ``0.0.0.0:9000:90`` differ here, and meet again in
    :func:`unique_ports`), a long one its address, ports and protocol."""
    if isinstance(entry, dict):
        return port_key(_long_port(entry))
    return str(entry)


def long_ports(data: dict[str, Any]) -> dict[str, Any]:
    """A project's short ports in their long forms, made unique again, as compose-go's loader
    leaves them after each file (merge, unicity, schema, canonical, unicity) and after an
    included project: the next file's ports then meet these long forms (a short ``80`` there
    and a long ``{target: 80, mode: host}`` of the same file both replace the earlier long
    ``80``, the short one last). A port that does not parse is left for its located refusal."""

    def longs(ports: list[Any]) -> list[Any] | None:
        if all(isinstance(p, dict) for p in ports):
            return None
        try:
            # Unique as written first (two equal short texts are one, in the first's place),
            # then in long form: compose-go's unicity, canonical, unicity.
            written = unique_by(ports, written_port_key)
            out = [p for e in written for p in ([e] if isinstance(e, dict) else parse_port(e))]
        except (FormError, TypeError, ValueError):
            return None
        return unique_by(out, written_port_key)

    return _with_ports(data, longs)


def _with_ports(
    data: dict[str, Any], change: Callable[[list[Any]], list[Any] | None]
) -> dict[str, Any]:
    """``data`` with each service's ``ports`` list replaced by ``change(ports)`` (kept when
    that is None); everything else, and ``data`` itself, left as it is."""
    services = data.get("services")
    if not isinstance(services, dict):
        return data
    out = dict(services)
    for name, svc in services.items():
        ports = svc.get("ports") if isinstance(svc, dict) else None
        if isinstance(ports, list):
            changed = change(ports)
            if changed is not None:
                out[name] = {**svc, "ports": changed}
    return {**data, "services": out}


def included_ports(data: dict[str, Any]) -> dict[str, Any]:
    """An included project's ports as Compose hands them to the including file: in long form
    (:func:`long_ports`) with compose-go's defaults set on every mapping (``protocol: tcp``,
    ``mode: ingress``), ``published`` kept as written. So ``"8000:80"`` and ``{target: 80,
    published: 8000}`` in an included file are two ports (their unicity keys differ) that the
    including file's schema check calls equal, and Compose refuses the project."""
    return _with_ports(
        long_ports(data),
        lambda ports: [
            {"protocol": "tcp", "mode": "ingress", **p} if isinstance(p, dict) else p for p in ports
        ],
    )


def is_windows_path(text: str) -> bool:
    """``C:\\x`` or ``c:/x``: a drive letter is not a ``:`` separator."""
    return len(text) >= 3 and text[0].isalpha() and text[1] == ":" and text[2] in "\\/"


def _is_path(source: str) -> bool:
    """A bind mount's source: ``.``, ``/``, ``~``, a Windows pipe or a drive letter."""
    if not source:
        return False
    return (
        source[0] in "./~"
        or source.startswith("\\\\")
        or (len(source) > 1 and source[0].isalpha() and source[1] == ":")
    )


_PROPAGATIONS = ("shared", "rshared", "slave", "rslave", "private", "rprivate")


def _mount_parts(text: str) -> list[tuple[str, bool]]:
    """The sections of a short mount, each with whether a ``:`` ended it; a letter followed
    by ``:`` is a drive letter and stays in its section."""
    parts: list[tuple[str, bool]] = []
    buffer = ""
    for char in text:
        if char == ":" and len(buffer) == 1 and buffer.isalpha():
            buffer += char
        elif char == ":":
            parts.append((buffer, True))
            buffer = ""
        else:
            buffer += char
    parts.append((buffer, False))
    return parts


def parse_volume(text: str) -> dict[str, Any]:
    """One short-syntax mount as its long form (before paths are made absolute), read as
    Compose reads it: ``SOURCE:TARGET[:OPTIONS]``, a lone ``TARGET`` is an anonymous volume,
    options ``ro``/``rw``/``nocopy``/``z``/``Z``/a propagation, unknown options ignored.

    Raises:
        FormError: an empty section or a fourth section.
    """
    if len(text) <= 2:
        return {"type": "volume", "target": text, "volume": {}} if text else _empty(text)
    source = target = ""
    options: list[str] = []
    for section, colon in _mount_parts(text):
        if not section:
            raise FormError(
                f"invalid spec: {text}: empty section between colons",
                rule="a short mount is SOURCE:TARGET[:MODE]",
                fix="write ./models:/models:ro, or use the long syntax",
            )
        if not source and not colon:
            target = section
        elif not source:
            source = section
        elif not target:
            target = section
        elif colon:
            raise FormError(
                f"invalid spec: {text}: too many colons",
                rule="a short mount is SOURCE:TARGET[:MODE]",
                fix="write ./models:/models:ro, or use the long syntax",
            )
        else:
            options = section.split(",")
    out: dict[str, Any] = {"type": "bind" if _is_path(source) else "volume"}
    if source:
        out["source"] = source
    out["target"] = target
    bind: dict[str, Any] = {}
    volume: dict[str, Any] = {}
    for option in options:
        if option == "ro":
            out["read_only"] = True
        elif option == "rw":
            out.pop("read_only", None)
        elif option == "nocopy":
            volume["nocopy"] = True
        elif option in ("z", "Z"):
            bind["selinux"] = option
        elif option in _PROPAGATIONS:
            bind["propagation"] = option
        elif option in ("cached", "delegated", "consistent"):
            out["consistency"] = option
    if out["type"] == "bind":
        bind["create_host_path"] = True
    if bind:
        out["bind"] = bind
    if volume or out["type"] == "volume":
        out["volume"] = volume
    return out


def _empty(text: str) -> dict[str, Any]:
    raise FormError(
        "invalid empty volume spec",
        rule="a short mount is SOURCE:TARGET[:MODE]",
        fix="remove the empty entry",
    )


def parse_device(entry: Any) -> dict[str, Any]:
    """A ``devices`` entry as ``{source, target, permissions}`` (the short syntax's default
    permissions are ``rwm``; the long syntax's are what it says)."""
    if isinstance(entry, dict):
        return dict(entry)
    parts = str(entry).split(":")
    if len(parts) == 1:
        return {"source": parts[0], "target": parts[0], "permissions": "rwm"}
    if len(parts) == 2:
        if parts[1] and set(parts[1]) <= set("rwm") and not parts[1].startswith("/"):
            return {"source": parts[0], "target": parts[0], "permissions": parts[1]}
        return {"source": parts[0], "target": parts[1], "permissions": "rwm"}
    if len(parts) == 3:
        return {"source": parts[0], "target": parts[1], "permissions": parts[2]}
    raise FormError(
        f"invalid device: {entry}",
        rule="a device is SOURCE[:TARGET[:PERMISSIONS]]",
        fix="write /dev/x:/dev/x:rwm",
    )


_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(b|ib)?\s*$", re.IGNORECASE)
_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_bytes(value: Any) -> int:
    """``512m``, ``1g``, ``1024`` as a number of bytes (binary units, as Compose reads them).

    Raises:
        FormError: not a size.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _BYTES.match(str(value))
    if match is None:
        raise FormError(
            f"invalid size: {value!r}",
            rule="a size is a number with an optional unit b, k, m, g",
            fix="write 512m or 1g",
        )
    size = float(match.group(1)) * _BYTE_UNITS[match.group(2).lower()]
    if not -(2.0**63) <= size < 2.0**63:
        # Compose computes in float64 and converts to int64: past its range (a 5,000-digit
        # size is infinite as a float, and int() of it raised) that is the smallest int64.
        return -(2**63)
    return int(size)


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": 10**9}
_NS.update({"m": 60 * 10**9, "h": 3600 * 10**9})


def parse_duration_ns(text: str) -> int:
    """Go's ``time.ParseDuration``: ``1m30s``, ``90s``, ``1.5h``, ``500ms``.

    Raises:
        FormError: not a duration.
    """
    s = text.strip()
    sign = -1 if s.startswith("-") else 1
    s = s.lstrip("+-")
    if s == "0":
        return 0
    pos = 0
    total = 0.0
    while pos < len(s):
        match = _DURATION_PART.match(s, pos)
        if match is None:
            raise FormError(
                f"invalid duration: {text!r}",
                rule="a duration is a number with a unit: ns, us, ms, s, m, h (1m30s)",
                fix="write 30s or 1m30s",
            )
        total += float(match.group(1)) * _NS[match.group(2)]
        pos = match.end()
    if not s:
        raise FormError(
            f"invalid duration: {text!r}",
            rule="a duration is a number with a unit",
            fix="write 30s",
        )
    return sign * round(total)


def format_duration(ns: int) -> str:
    """Go's ``time.Duration.String``: ``1m30s``, ``500ms``, ``1h0m0s``, ``0s``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if ns >= size:
                return sign + _decimal(ns, size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = _decimal(rest, 10**9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _decimal(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def go_path_clean(path: str) -> str:
    """Go's ``path.Clean`` (slash paths): ``""`` is ``.``, repeated and trailing slashes go,
    ``.`` and ``..`` are resolved lexically (``/..`` is ``/``). Compose cleans every mount's
    target with it (``/x/`` is ``/x``, ``/x/../y`` is ``/y``); ``posixpath.normpath`` differs
    (it keeps a leading ``//``)."""
    if not path:
        return "."
    rooted = path.startswith("/")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(part)
    joined = "/".join(parts)
    return "/" + joined if rooted else joined or "."


def absolute(path: str, folder: str) -> str:
    """A path as Compose resolves it: ``~`` is the home folder, relative is from ``folder``."""
    if path.startswith("~"):
        path = os.path.expanduser(path)
    if os.path.isabs(path) or is_windows_path(path):
        return path
    return os.path.normpath(os.path.join(folder, path))


def _relative(path: str) -> bool:
    return not (os.path.isabs(path) or path.startswith("~") or is_windows_path(path))


def rebase_service(
    service: dict[str, Any],
    folder: str,
    move: Callable[[str], str] | None = None,
    *,
    default_context: bool = True,
) -> dict[str, Any]:
    """A service from an included or extended file, its relative paths (bind mounts,
    ``env_file``, ``build``) made absolute from that file's folder, as Compose resolves them
    before the service joins the including project; ``move``: what to make of each relative
    path instead (``tierctl import`` rewrites them relative to the spec's folder).
    ``default_context``: a ``build`` that names no context builds in ``folder`` (an included
    file's); False for ``extends``, whose service builds in the project's folder unless its
    own file names a context (as Compose reads them)."""

    def moved(path: str) -> str:
        return absolute(path, folder) if move is None else move(path)

    def maybe(path: str) -> str:
        # Compose resolves every env_file and build path (~ too); ``move`` only relative ones.
        return moved(path) if move is None or _relative(path) else path

    out = dict(service)
    volumes = out.get("volumes")
    if isinstance(volumes, list):
        rebased: list[Any] = []
        for mount in volumes:
            if isinstance(mount, str):
                try:
                    long = parse_volume(mount)
                except FormError:
                    rebased.append(mount)
                    continue
                source = str(long.get("source", ""))
                if long["type"] == "bind" and _relative(source):
                    mount = moved(source) + mount[len(source) :]
            elif isinstance(mount, dict) and mount.get("type") == "bind":
                written = mount.get("source")
                if isinstance(written, str) and _relative(written):
                    mount = {**mount, "source": moved(written)}
            rebased.append(mount)
        out["volumes"] = rebased
    env_file = out.get("env_file")
    if isinstance(env_file, str):
        out["env_file"] = maybe(env_file)
    elif isinstance(env_file, list):
        out["env_file"] = [
            maybe(e)
            if isinstance(e, str)
            else {**e, "path": maybe(str(e["path"]))}
            if isinstance(e, dict) and isinstance(e.get("path"), str)
            else e
            for e in env_file
        ]
    build = out.get("build")
    if isinstance(build, str):
        out["build"] = maybe(build)
    elif (
        isinstance(build, dict)
        and isinstance(build.get("context", "."), str)
        and (default_context or "context" in build)
    ):
        out["build"] = {**build, "context": maybe(str(build.get("context", ".")))}
    develop = out.get("develop")
    watch = develop.get("watch") if isinstance(develop, dict) else None
    if isinstance(develop, dict) and isinstance(watch, list):
        # compose watch's paths are the project's files, relative to its folder.
        out["develop"] = {
            **develop,
            "watch": [
                {**w, "path": moved(w["path"])}
                if isinstance(w, dict) and isinstance(w.get("path"), str) and _relative(w["path"])
                else w
                for w in watch
            ],
        }
    return out
