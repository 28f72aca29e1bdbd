"""Hypothesis strategies for whole compose projects, the differential suite's generated corpus.

A project is several files: a base file, zero to two override files (``-f base -f over``), an
``extends`` source and an ``include``d file, plus env files. Services use short and long
syntax of ports, volumes, environment, labels and devices, ``env_file``, ``deploy.resources``,
``profiles``, ``depends_on``, anchors with merge keys, ``!reset``/``!override`` and
interpolation in every default/required form. A part of what is drawn is invalid on purpose
(a bad host IP, ``- DEBUG = true``, an undefined volume, an unset required variable...), so
refusals are compared too.

Every name in the text carries the placeholder ``{P}``: the harness replaces it with a prefix
so that many projects can share one ``docker compose`` call (their services never meet), and
with nothing when a case is written as a fixture.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

#: The environment every project is read in (both sides): set, empty and unset variables.
ENVIRON: dict[str, str] = {
    "SET": "value",
    "EMPTY": "",
    "PORT": "8080",
    "TAG": "1.2",
    "MODELS": "/srv/models",
}

#: The profiles every project is read with (unless it reads ``COMPOSE_PROFILES``).
PROFILES: tuple[str, ...] = ("on",)

#: Every project's first file before any override (``name:`` and the ``.env`` readers go here).
BASE_FILE = "{P}base.yml"

#: The ``-p`` most projects are read with (projects sharing a call share it).
PROJECT_NAME = "oracle"

#: Env files each project may name (written beside its compose files).
ENV_FILES: dict[str, str] = {
    "{P}a.env": "A=1\n# a comment\nexport B='two words'\nC=\"quoted\"\nSHARED=from-a\n",
    "{P}b.env": "SHARED=from-b\nD=4 # trailing comment\n\nE=\n"
    "I=${SET}-i\nJ='${SET}'\nK=\"${UNSET:-d} q\\n2\"\nL=${A}${SHARED}\nM=$$x\nN=a\\nb\n",
}


@dataclass
class Project:
    """A generated project: its files (name -> text, ``{P}`` unreplaced) and the ``-f`` order."""

    files: dict[str, str]
    order: list[str]
    features: list[str] = field(default_factory=list)
    #: ``-p``: the harness's shared name by default; None: Compose picks it (``name:``,
    #: ``COMPOSE_PROJECT_NAME``, the folder's name).
    project_name: str | None = PROJECT_NAME
    #: Variables set besides :data:`ENVIRON` (``COMPOSE_PROFILES``, ``COMPOSE_PROJECT_NAME``).
    env: dict[str, str] = field(default_factory=dict)
    #: ``--profile`` values; None: :data:`PROFILES`; ``()``: none (``COMPOSE_PROFILES`` applies).
    profiles: tuple[str, ...] | None = None
    #: The project folder's own name (a folder of its own); None: the shared folder.
    folder: str | None = None

    @property
    def solo(self) -> bool:
        """Whether the project needs a folder of its own (a ``.env``, a named folder)."""
        return self.folder is not None or ".env" in self.files

    def options_key(self) -> tuple[object, ...]:
        """What must be equal for two projects to share one ``docker compose`` call."""
        named = sorted(n for t in self.files.values() for n in re.findall(r"(?m)^name:.*$", t))
        return (self.project_name, sorted(self.env.items()), self.profiles, named)

    def render(self, prefix: str) -> tuple[dict[str, str], list[str]]:
        """The files and the ``-f`` order with ``{P}`` replaced by ``prefix``."""
        return (
            {k.replace("{P}", prefix): v.replace("{P}", prefix) for k, v in self.files.items()},
            [f.replace("{P}", prefix) for f in self.order],
        )


_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {}
_BOOLEANS = st.booleans()


def _sampled(values: Any) -> st.SearchStrategy[Any]:
    """``st.sampled_from(values)``, built once per list of values: a composite draws from
    it thousands of times, and building (and validating) a strategy costs more than a draw.
    The draws are the same as from a fresh strategy."""
    key = "s" + repr(values)
    found = _STRATEGIES.get(key)
    if found is None:
        found = _STRATEGIES[key] = st.sampled_from(values)
    return found


def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    """``st.integers(low, high)``, built once (:func:`_sampled`)."""
    key = f"i{low},{high}"
    found = _STRATEGIES.get(key)
    if found is None:
        found = _STRATEGIES[key] = st.integers(low, high)
    return found


def _j(value: Any) -> str:
    """A value as YAML flow text (JSON is YAML)."""
    return json.dumps(value, ensure_ascii=False)


_REFS = [
    "${SET}",
    "$SET",
    "${UNSET:-dflt}",
    "${EMPTY:-dflt}",
    "${EMPTY-dflt}",
    "${UNSET-dflt}",
    "${SET:+alt}",
    "${UNSET:+alt}",
    "${SET+alt}",
    "${UNSET}",
    "${EMPTY}",
    "$$literal",
    "cost $$5",
    "${UNSET:-${SET}}",
    "${SET:?need SET}",
    "${EMPTY?unset only}",
    # alternatives (":+" set and non-empty, "+" set), nested defaults, "$$" escapes
    "${EMPTY:+alt}",
    "${EMPTY+alt}",
    "${UNSET+alt}",
    "${SET:+${UNSET:-nested}}",
    "${UNSET:-${EMPTY:-deep}}",
    "${UNSET:-${SET:+inner}}",
    "${SET+$$lit}",
    "${UNSET:-$$}",
    "$${SET}",
    "$$$$",
    "a$$$${SET}",
    "${UNSET:-a:b}",
    "${UNSET:-}",
    "${SET:-}",
    "${PORT:+${TAG}}",
]
_BAD_REFS = [
    "${UNSET:?set UNSET}",
    "${EMPTY:?not empty}",
    "${UNSET?boom}",
    "${ A}",
    "${A!}",
    # required without a message, unset or empty (issue #42)
    "${UNSET:?}",
    "${UNSET?}",
    "${EMPTY:?}",
]

texts = st.one_of(
    st.sampled_from(["plain", "two words", "x=y", "true", "8080", "a:b", "", "é"]),
    st.sampled_from(_REFS),
    st.builds(lambda a, b: a + "-" + b, st.sampled_from(_REFS), st.sampled_from(_REFS)),
)
bad_texts = st.sampled_from(_BAD_REFS)
scalars = st.one_of(texts, st.integers(0, 99999), st.booleans(), st.sampled_from([0.5, 1.25]))

_KEYS = st.sampled_from(["A", "B", "SHARED", "SET", "UNSET", "PORT", "LOG_LEVEL", "X_1"])

short_ports = st.sampled_from(
    [
        "80",
        "8000:80",
        "8000:8000",
        "127.0.0.1:8000:80",
        "127.0.0.1::81",
        "0.0.0.0:8000:80",
        "[::1]:9000:90/udp",
        "8000:80/udp",
        "8000:80/tcp",
        "5000:5000/sctp",
        "7000-7001:70-71",
        "6000-6001:60",
        "3000-3002",
        "${PORT:-9000}:80",
        "${UNSET:-9000}:80",
        "9000:80",
        "${PORT}:8080",
    ]
)
bad_ports = st.sampled_from(
    ["300.1.1.1:80:80", "8000:80/xyz", "7000:70-71", "abc:80", "1.2.3:80:80", "80-70"]
)
long_ports = st.fixed_dictionaries(
    {"target": st.sampled_from([80, 8000, 90])},
    optional={
        "published": st.sampled_from(["8000", 8000, "9000", "${PORT}"]),
        "host_ip": st.sampled_from(["127.0.0.1", "0.0.0.0", "::1"]),
        "app_protocol": st.just("http"),
        "protocol": st.sampled_from(["tcp", "udp"]),
        "mode": st.sampled_from(["ingress", "host"]),
    },
)
ports = st.one_of(short_ports, short_ports, long_ports, st.sampled_from([80, 8080]))

short_volumes = st.sampled_from(
    [
        "./data:/data",
        "./data:/data:ro",
        "./models:/models:rw",
        "/abs/path:/abs",
        "/abs/other:/abs",
        "{P}data:/var/lib/data",
        "{P}data:/var/lib/data:nocopy",
        "{P}cache:/root/.cache",
        "/anon",
        "./x:/x:z",
        "~/hf:/root/hf",
        "${MODELS}:/models:ro",
        "${UNSET:-./fallback}:/fb",
        ".:/app",
    ]
)
bad_volumes = st.sampled_from(
    [
        "{P}undeclared:/u",
        "./a:/b:c:d",
        ":/empty",
        "./a:/b:bogus",
        # long forms Compose refuses (issue #38): no target, an unknown type
        {"type": "bind", "source": "./data"},
        {"type": "volume", "source": "{P}data"},
        {"type": "bogus", "source": "./a", "target": "/a"},
        {"type": "bind", "source": "./a", "target": "/a", "bind": {"propagation": "nope"}},
    ]
)
long_volumes = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("bind"),
            "source": st.sampled_from(["./data", "/abs", "${MODELS}", "./data/"]),
            "target": st.sampled_from(["/data", "/abs", "/data/", "/x/../y"]),
        },
        optional={
            "read_only": st.booleans(),
            "bind": st.fixed_dictionaries(
                {},
                optional={
                    "create_host_path": st.booleans(),
                    "propagation": st.sampled_from(["rprivate", "shared"]),
                    "selinux": st.sampled_from(["z", "Z"]),
                },
            ),
            "consistency": st.sampled_from(["cached", "delegated"]),
        },
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("volume"),
            "source": st.sampled_from(["{P}data", "{P}data", "{P}cache"]),
            "target": st.sampled_from(["/var/lib/data", "/v"]),
        },
        optional={
            "read_only": st.booleans(),
            "volume": st.fixed_dictionaries(
                {}, optional={"nocopy": st.booleans(), "subpath": st.just("sub")}
            ),
        },
    ),
    # an anonymous volume: no source
    st.fixed_dictionaries({"type": st.just("volume"), "target": st.sampled_from(["/anon", "/w"])}),
    st.fixed_dictionaries(
        {"type": st.just("tmpfs"), "target": st.just("/t")},
        optional={
            "tmpfs": st.fixed_dictionaries(
                {}, optional={"size": st.sampled_from(["64m", 1024, "1g"]), "mode": st.just(1777)}
            )
        },
    ),
)
volumes = st.one_of(short_volumes, short_volumes, long_volumes)

devices = st.one_of(
    st.sampled_from(
        ["/dev/a:/dev/a", "/dev/b", "/dev/c:/dev/d:r", "/dev/e:/dev/e:rwm", "/dev/a:/dev/z"]
    ),
    st.fixed_dictionaries(
        {"source": st.just("/dev/f"), "target": st.sampled_from(["/dev/f", "/dev/a"])},
        optional={"permissions": st.sampled_from(["r", "rw"])},
    ),
)


def _env_list(draw: st.DrawFn, bad: bool) -> list[str]:
    items = []
    for key in draw(st.lists(_KEYS, max_size=4)):
        form = draw(_sampled(["kv", "kv", "bare", "empty"]))
        if form == "kv":
            items.append(f"{key}={draw(texts)}")
        elif form == "bare":
            items.append(key)
        else:
            items.append(f"{key}=")
    if bad:
        items.append(draw(_sampled(["DEBUG = true", "DEBUG =true"])))
    return items


@st.composite
def environments(draw: st.DrawFn, bad: bool = False) -> Any:
    """``environment`` in list or map form."""
    if bad or draw(_BOOLEANS):
        return _env_list(draw, bad)
    return draw(st.dictionaries(_KEYS, st.one_of(scalars, st.none()), max_size=4))


@st.composite
def labels(draw: st.DrawFn) -> Any:
    """``labels`` in list or map form."""
    keys = st.sampled_from(["com.example.role", "tier", "replica", "x"])
    if draw(_BOOLEANS):
        return [
            f"{k}={draw(texts)}" if draw(_BOOLEANS) else k for k in draw(st.lists(keys, max_size=3))
        ]
    return draw(st.dictionaries(keys, st.one_of(scalars, st.none()), max_size=3))


env_files = st.one_of(
    st.sampled_from(["{P}a.env", "{P}b.env", "{P}g.env"]),
    st.lists(st.sampled_from(["{P}a.env", "{P}b.env", "{P}g.env"]), min_size=1, max_size=2),
    st.just([{"path": "{P}missing.env", "required": False}, "{P}a.env"]),
    # the long form's `format: raw` (values as written, no quotes, no interpolation)
    st.lists(
        st.fixed_dictionaries(
            {"path": st.sampled_from(["{P}g.env", "{P}r.env", "{P}b.env"])},
            optional={"format": st.just("raw"), "required": st.booleans()},
        ),
        min_size=1,
        max_size=2,
    ),
)

# A generated env file ({P}g.env, issue #38): compose-go's dotenv scanner's shapes, one line
# in about twelve one that Compose refuses (an unterminated quote, a BOM or space in a name).
_DOTENV_KEYS = ["G1", "G_2", "g.3", "G-4", "G[5]", "SET", "EMPTY", "UNSET"]
_DOTENV_VALUES = [
    "plain",
    "$SET",
    "${UNSET:-${SET}}",
    "'${SET}'",
    '"it\'s"',
    "'say \"hi\"'",
    '"a # not a comment"',
    '"a\\\\$SET"',
    "'a\\b'",
    "  spaced  ",
    '""',
    "''",
    "two words",
    "x #comment",
    "x#kept",
    "'single'",
    "'a\\'b'",
    "'multi\nline'",
    '"double"',
    '"a\\"b"',
    '"\\$SET"',
    '"\\n\\t\\q\\\\"',
    '"\\0101\\012\\0"',
    '"${SET}-${UNSET:-d}"',
    "${SET}",
    "$$x",
    "${G1}",
    '"x" G9=tail',
    "",
]
_DOTENV_BAD = [
    'G6="open',
    "G7='open",
    "\ufeffG8=1",
    "G 9=1",
    "G10=${UNSET:?need G10}",
    'G11="${UNSET?}"',
    "G12=${ x}",
]


@st.composite
def dotenv_texts(draw: st.DrawFn) -> str:
    """A dotenv file of 1-5 statements (``export``, YAML-style ``K: v``, bare keys, comments)."""
    lines = []
    for _ in range(draw(_integers(1, 5))):
        kind = draw(_integers(0, 11))
        if kind == 0:
            lines.append(draw(_sampled(_DOTENV_BAD)))
        elif kind == 1:
            lines.append(draw(_sampled([*_DOTENV_KEYS, "# note", "", "export =x"])))
        else:
            prefix = draw(_sampled(["", "", "export ", "  "]))
            sep = draw(_sampled(["=", "=", " = ", ": "]))
            key, value = draw(_sampled(_DOTENV_KEYS)), draw(_sampled(_DOTENV_VALUES))
            lines.append(f"{prefix}{key}{sep}{value}")
    end = draw(_sampled(["\n", "\n", "", "\r\n"]))
    # A BOM that starts the file is dropped; `export` alone at the end is refused.
    head = draw(_sampled([""] * 10 + ["\ufeff"]))
    tail = draw(_sampled([""] * 20 + ["export", "export "]))
    return head + end.join(lines) + end + tail


#: Lines of an env file read with ``format: raw`` ({P}r.env): whole lines, ``KEY=value`` as
#: written; a key with white space or none is refused.
_RAW_LINES = [
    "R1=plain",
    "R2='single' # kept",
    'R3="double"',
    "R4=${SET}",
    "R5=$$x",
    "R6=a\\nb",
    "R7=  spaced  ",
    "R8=x=y",
    "R9=",
    "  R10=indented",
    "\tR11=tab",
    "R.12-x=dots",
    "SET",
    "UNSET",
    "# comment",
    "   # indented comment",
    "",
    "R13=\ufeffbom",
]
_RAW_BAD = ["R 14=x", "export R15=1", "=nokey", "R16 =x", "BARE KEY"]


@st.composite
def raw_env_texts(draw: st.DrawFn) -> str:
    """An env file for ``format: raw``: 1-5 lines, one in twelve one Compose refuses."""
    lines = []
    for _ in range(draw(_integers(1, 5))):
        bad = draw(_integers(0, 11)) == 0
        lines.append(draw(_sampled(_RAW_BAD if bad else _RAW_LINES)))
    end = draw(_sampled(["\n", "\n", "", "\r\n"]))
    head = draw(_sampled([""] * 10 + ["\ufeff"]))
    return head + end.join(lines) + end


resources = st.fixed_dictionaries(
    {},
    optional={
        "limits": st.fixed_dictionaries(
            {},
            optional={
                "cpus": st.sampled_from(["0.5", 1, "2", 1.5]),
                "memory": st.sampled_from(["512m", "1g", "1024", "1.5g", "64M", 1024]),
                "pids": st.sampled_from([100]),
            },
        ),
        "reservations": st.fixed_dictionaries(
            {},
            optional={
                "memory": st.sampled_from(["256m"]),
                "devices": st.lists(
                    st.fixed_dictionaries(
                        {"capabilities": st.just(["gpu"])},
                        optional={
                            "driver": st.just("nvidia"),
                            "count": st.sampled_from(["all", 1, 2]),
                            "device_ids": st.sampled_from([["0"], ["0", "1"]]),
                        },
                    ).filter(lambda d: not ("count" in d and "device_ids" in d)),
                    max_size=2,
                ),
            },
        ),
    },
)

healthchecks = st.fixed_dictionaries(
    {
        "test": st.sampled_from(
            ["curl -f http://localhost/health", ["CMD", "true"], ["CMD-SHELL", "exit 0"]]
        )
    },
    optional={
        "interval": st.sampled_from(["90s", "1m30s", "500ms", "10s", "1h", "2m"]),
        "timeout": st.sampled_from(["5s", "1.5s"]),
        "retries": st.integers(0, 5),
        "start_period": st.sampled_from(["0s", "30s"]),
        "disable": st.booleans(),
    },
)

commands = st.one_of(
    st.sampled_from(["echo hi", "sh -c 'echo $$HOME'", "python -m app --port ${PORT}"]),
    st.lists(st.sampled_from(["python", "-m", "app", "--flag", "${SET}", "8000"]), max_size=4),
)

#: Networks every project declares (top level, drawn in :func:`top_networks`); services
#: attach to them in short (list) or long (map) syntax.
NETWORKS = ("{P}front", "{P}back", "{P}ext")
service_networks = st.one_of(
    st.lists(st.sampled_from(NETWORKS[:2]), min_size=1, max_size=2, unique=True),
    st.dictionaries(
        st.sampled_from(NETWORKS),
        st.one_of(
            st.none(),
            st.just({}),
            st.fixed_dictionaries(
                {},
                optional={
                    "aliases": st.lists(
                        st.sampled_from(["a", "b", "${SET}", "api"]), max_size=2, unique=True
                    ),
                    "priority": st.sampled_from([0, 10]),
                    "ipv6_address": st.just("2001:db8::5"),
                },
            ),
        ),
        min_size=1,
        max_size=3,
    ),
    st.just({"{P}back": {"ipv4_address": "172.28.1.5", "aliases": ["db"]}}),
)
#: Top-level networks: empty, null, driver/ipam/labels (both forms)/options, named, external.
network_bodies = st.one_of(
    st.sampled_from([{}, None, {"driver": "bridge"}, {"internal": True, "attachable": True}]),
    st.fixed_dictionaries(
        {},
        optional={
            "driver": st.just("bridge"),
            "ipam": st.just({"config": [{"subnet": "172.28.0.0/16"}]}),
            "labels": labels(),
            "driver_opts": st.sampled_from([{"com.example.mtu": "1400"}, {"n": 1}]),
            "name": st.sampled_from(["{P}named", "{P}net-${SET}"]),
            "enable_ipv6": st.booleans(),
        },
    ),
)

_ULIMIT = st.one_of(
    st.sampled_from([1024, 0, -1, 65535, "2048", "${PORT}"]),
    st.fixed_dictionaries(
        {
            "soft": st.sampled_from([1024, 0, "512", "${PORT}"]),
            "hard": st.sampled_from([2048, 0, "4096"]),
        }
    ),
)
ulimits = st.dictionaries(
    st.sampled_from(["nofile", "nproc", "memlock", "core"]), _ULIMIT, min_size=1, max_size=3
)

SECRETS = ("{P}s_file", "{P}s_env", "{P}s_ext")
CONFIGS = ("{P}c_file", "{P}c_content", "{P}c_env")


def _refs(names: tuple[str, ...], targets: list[str]) -> st.SearchStrategy[Any]:
    """``secrets``/``configs`` of a service: names, or long syntax with target/uid/gid/mode."""
    long = st.fixed_dictionaries(
        {"source": st.sampled_from(names)},
        optional={
            "target": st.sampled_from(targets),
            "uid": st.sampled_from(["1000", "0"]),
            "gid": st.sampled_from(["1000"]),
            "mode": st.sampled_from([288, 0o644, "0440", "440", 420]),
        },
    )
    return st.lists(st.one_of(st.sampled_from(names), long), min_size=1, max_size=3)


builds = st.one_of(
    st.sampled_from([".", "./app", "sub"]),
    st.fixed_dictionaries(
        {},
        optional={
            "context": st.sampled_from([".", "./app", "${UNSET:-./ctx}"]),
            "dockerfile": st.sampled_from(["Dockerfile.dev", "../Dockerfile"]),
            "args": st.one_of(
                st.lists(
                    st.sampled_from(["A=1", "SET", "UNSET", "EMPTY", "B=", "V=${SET}", "A=2"]),
                    max_size=3,
                ),
                st.dictionaries(
                    st.sampled_from(["A", "SET", "UNSET", "V"]),
                    st.one_of(st.none(), scalars),
                    max_size=3,
                ),
            ),
            "labels": labels(),
            "target": st.sampled_from(["prod", "dev"]),
            "cache_from": st.lists(st.sampled_from(["app:cache", "type=local,src=/c"]), max_size=2),
        },
    ),
)

_FIELDS = {
    "networks": service_networks,
    "ulimits": ulimits,
    "secrets": _refs(SECRETS, ["/run/secrets/x", "tgt", "/abs/s"]),
    "configs": _refs(CONFIGS, ["/etc/c", "rel/c"]),
    "build": builds,
    "ports": st.lists(ports, max_size=4),
    "expose": st.lists(st.sampled_from(["3000", 3001, "4000-4001"]), max_size=2),
    "volumes": st.lists(volumes, max_size=4),
    "environment": environments(),
    "labels": labels(),
    "devices": st.lists(devices, max_size=3),
    "env_file": env_files,
    "dns": st.one_of(
        st.sampled_from(["8.8.8.8"]), st.lists(st.sampled_from(["1.1.1.1", "8.8.8.8"]), max_size=2)
    ),
    "tmpfs": st.one_of(st.just("/tmp"), st.lists(st.sampled_from(["/tmp", "/run"]), max_size=2)),
    "command": commands,
    "healthcheck": healthchecks,
    "deploy": st.builds(lambda r: {"resources": r}, resources),
    "container_name": st.sampled_from(["{P}c1", "{P}c2", "{P}c3", "{P}c4", "{P}c5"]),
    "restart": st.sampled_from(["no", "always", "unless-stopped"]),
    "shm_size": st.sampled_from(["1g", "64m", 1024]),
    "image": st.sampled_from(
        ["nginx:1.27", "busybox", "registry.local/app:${TAG}", "app:${UNSET:-latest}"]
    ),
}
_BAD_FIELDS = {
    "ports": st.builds(lambda p, b: [*p, b], st.lists(ports, max_size=2), bad_ports),
    "volumes": st.builds(lambda v, b: [*v, b], st.lists(volumes, max_size=2), bad_volumes),
    "environment": environments(bad=True),
    "image": bad_texts,
    "labels": st.just({1: "int key"}),
    "env_file": st.sampled_from(["{P}nonexistent.env", [{"path": "{P}a.env", "format": "bogus"}]]),
    "cpus": st.just("lots"),
    "mem_limit": st.just("1 gigabyte"),
    "healthcheck": st.just({"test": "true", "interval": "soon"}),
    "extra_hosts": st.just(["nocolon"]),
    "ipc": st.just(7),
    "networks": st.sampled_from([["{P}nonet"], {"{P}nonet": None}, {"{P}front": {"aliases": "a"}}]),
    "ulimits": st.sampled_from([{"nofile": "many"}, {"nofile": {"soft": 1}}]),
    "secrets": st.sampled_from([["{P}nosecret"], [{"target": "/x"}]]),
    "configs": st.just(["{P}noconfig"]),
    "build": st.sampled_from([{"args": "A=1"}, 5]),
}
#: Bad values drawn only in a base file: in an override, Compose's merge keeps the earlier
#: file's mapping under a scalar of the wrong type (``build: 5`` over ``build: {...}``) and
#: the merged project validates, where tierctl refuses the override's value (a deliberate
#: difference, docs/compose.md; fixture 049).
_BASE_ONLY_BAD = ("build",)
_BAD_OVER = sorted(k for k in _BAD_FIELDS if k not in _BASE_ONLY_BAD)
NAMES = ["web", "db", "worker"]


@st.composite
def service_body(draw: st.DrawFn, *, override: bool, bad: bool) -> dict[str, Any]:
    """The keys of one service in one file."""
    keys = draw(st.lists(st.sampled_from(sorted(_FIELDS)), unique=True, max_size=5))
    body: dict[str, Any] = {}
    if not override:
        body["image"] = draw(_FIELDS["image"])
    for key in keys:
        body[key] = draw(_FIELDS[key])
    if bad:
        key = draw(_sampled(_BAD_OVER if override else sorted(_BAD_FIELDS)))
        body[key] = draw(_BAD_FIELDS[key])
    return body


#: The four kinds of service body, built once (building a strategy per draw costs more than
#: drawing from it).
_BODIES = {(o, b): service_body(override=o, bad=b) for o in (False, True) for b in (False, True)}


def _body(*, override: bool, bad: bool) -> st.SearchStrategy[dict[str, Any]]:
    return _BODIES[(override, bad)]


def _block(body: dict[str, Any], indent: str, tags: dict[str, str]) -> list[str]:
    lines = []
    for key, value in body.items():
        tag = tags.get(key)
        if tag is not None:
            lines.append(f"{indent}{key}: {tag} {_j(value) if tag == '!override' else ''}".rstrip())
        else:
            lines.append(f"{indent}{key}: {_j(value)}")
    return lines


@st.composite
def top_level(draw: st.DrawFn) -> str:
    """The base file's top-level networks, secrets and configs (what services refer to)."""
    nets = {n: draw(network_bodies) for n in NETWORKS[:2]}
    nets["{P}ext"] = draw(_sampled([{"external": True}, {"external": True, "name": "x"}]))
    secrets = {
        "{P}s_file": {"file": draw(_sampled(["./{P}s.txt", "{P}sub/s.txt", "/abs/s"]))},
        "{P}s_env": {"environment": draw(_sampled(["SET", "EMPTY"]))},
        "{P}s_ext": draw(
            st.sampled_from(
                [{"external": True}, {"name": "{P}s-${SET}", "environment": "SET"}] * 6
                + [{"name": "{P}s-${SET}"}]  # no source: refused
            )
        ),
    }
    configs = {
        "{P}c_file": {"file": draw(_sampled(["./{P}c.txt", "{P}sub/c.txt"]))},
        "{P}c_content": {"content": draw(_sampled(["plain", "v=${SET}", "$$HOME"]))},
        "{P}c_env": {"environment": "SET"},
    }
    out = []
    for key, defs in (("networks", nets), ("secrets", secrets), ("configs", configs)):
        out.append(f"{key}:")
        out += [f"  {name}: {_j(body)}" for name, body in defs.items()]
    return "\n".join(out) + "\n"


#: An included file without resources: read as none, or (the last three) refused, as
#: Compose validates an included file's top level on its own.
_INCLUDED_EMPTY = ["", "# nothing\n", "\n", "services: {}\n", "x-{P}e: 1\n", "---\n",
                   "volumes:\n", "bogus: 1\n"]  # fmt: skip


@st.composite
def projects(draw: st.DrawFn) -> Project:
    """One whole project: files, ``-f`` order and the features it exercises."""
    features: list[str] = []
    bad_file = draw(_sampled([None] * 22 + ["base", "over"]))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    profiled = {n: draw(_sampled([None, None, ["on"], ["off"], ["on", "off"]])) for n in names}
    files: dict[str, str] = {}
    order = ["{P}base.yml"]
    base: list[str] = []
    top_anchor = draw(_BOOLEANS)
    if top_anchor:
        features.append("anchors")
        common = {"environment": draw(environments()), "labels": {"tier": "common"}}
        base.append(f"x-{{P}}common: &{{P}}common {_j(common)}")
    base.append("services:")
    bad_service = draw(_sampled(names)) if bad_file == "base" else None
    for name in names:
        body = draw(_body(override=False, bad=name == bad_service))
        if profiled[name]:
            body["profiles"] = profiled[name]
            features.append("profiles")
        # Mostly on an earlier service (no loop); now and then on any, so loops are drawn too.
        earlier = names[: names.index(name)]
        others = earlier if draw(_integers(0, 9)) else [n for n in names if n != name]
        if others and draw(_integers(0, 2)) == 0:
            dep = draw(_sampled(others))
            features.append("depends_on")
            body["depends_on"] = draw(
                st.sampled_from(
                    [
                        [f"{{P}}{dep}"],
                        [f"{{P}}{dep}"],
                        {f"{{P}}{dep}": {"condition": "service_started"}},
                        {f"{{P}}{dep}": {"condition": "service_healthy", "required": False}},
                        {f"{{P}}{dep}": {"condition": "service_started", "restart": True}},
                    ]
                    + ([{f"{{P}}{dep}": {}}] if draw(_integers(0, 4)) == 0 else [])
                )
            )
        base.append(f"  {{P}}{name}:")
        if top_anchor and draw(_BOOLEANS):
            base.append("    <<: *{P}common")
        base += _block(body, "    ", {})
    if draw(_integers(0, 2)) == 0:
        features.append("extends")
        src_body = draw(_body(override=False, bad=False))
        own = draw(_body(override=True, bad=False))
        if draw(_integers(0, 2)):
            # In a subfolder half the time: its relative paths are from its own folder.
            common = draw(_sampled(["{P}common.yml", "{P}sub/common.yml"]))
            lines = ["services:", "  {P}base:", *_block(src_body, "    ", {})]
            if draw(_BOOLEANS):
                # ... and that service extends another of its own file (a chain of two).
                features.append("extends-chain")
                root = draw(_body(override=False, bad=False))
                lines += ['    extends: {service: "{P}root"}', "  {P}root:"]
                lines += _block(root, "    ", {})
            # Its top-level resources, as a file Compose could also read on its own.
            lines.append(draw(top_level()).rstrip("\n"))
            lines.append("volumes:\n  {P}data: {}\n  {P}cache: {}")
            files[common] = "\n".join(lines) + "\n"
            base += ["  {P}ext:", f'    extends: {{file: "{common}", service: "{{P}}base"}}']
        else:
            base += ["  {P}tmpl:", *_block(src_body, "    ", {}), '    profiles: ["off"]']
            base += ["  {P}ext:", '    extends: {service: "{P}tmpl"}']
        base += _block(own, "    ", {})
    if draw(_integers(0, 4)) == 0:
        features.append("include")
        inc_body = draw(_body(override=False, bad=False))
        for key in ("env_file", "networks", "secrets", "configs"):
            inc_body.pop(key, None)  # the included project is read on its own
        inc = draw(_sampled(["{P}inc.yml", "{P}sub/inc.yml"]))
        if inc != "{P}inc.yml" and draw(_BOOLEANS):
            inc_body["env_file"] = "inc.env"
            files["{P}sub/inc.env"] = "INC=1\nSHARED=from-inc\n"
            features.append("include-env_file")
        files[inc] = "\n".join(["services:", "  {P}inc:", *_block(inc_body, "    ", {})])
        files[inc] += "\nvolumes:\n  {P}data: {}\n"
        entries: list[Any] = [inc if draw(_BOOLEANS) else {"path": inc}]
        if draw(_integers(0, 4)) == 0:
            # an empty included file (or one holding only a comment) adds nothing
            features.append("include-empty")
            files["{P}empty.yml"] = draw(_sampled(_INCLUDED_EMPTY))
            entries.append("{P}empty.yml")
        if draw(_integers(0, 5)) == 0:
            # the including file redefines the included service: Compose refuses it
            features.append("include-redefined")
            base += ["  {P}inc:", '    image: "busybox"']
        base.insert(0, f"include: {_j(entries)}")
    base_volumes = "volumes:\n  {P}data: {}\n  {P}cache: {}\n"
    if "include" in features:
        base_volumes = "volumes:\n  {P}cache: {}\n"
    files["{P}base.yml"] = "\n".join(base) + "\n" + base_volumes + draw(top_level())
    for i in range(draw(_integers(0, 2))):
        features.append("override")
        over = ["services:"]
        for name in draw(st.lists(st.sampled_from(names), min_size=1, unique=True)):
            body = draw(_body(override=True, bad=bad_file == "over" and i == 0))
            tags: dict[str, str] = {}
            for key in list(body):
                tag = draw(_sampled([None, None, None, None, "!reset", "!override"]))
                if tag is not None and key != "image":
                    tags[key] = tag
                    features.append(tag)
            if draw(_integers(0, 5)) == 0:
                body["profiles"] = draw(_sampled([["on"], ["off"]]))
            if draw(_integers(0, 9)) == 0:
                # `name: null` in an override adds nothing to the earlier file's service
                features.append("override-null")
                over.append(f"  {{P}}{name}: {draw(_sampled(['null', '~', '']))}".rstrip())
            elif body:
                over += [f"  {{P}}{name}:", *_block(body, "    ", tags)]
            else:
                over.append(f"  {{P}}{name}: {{}}")
        if draw(_integers(0, 29)) == 0:
            # a null service no earlier file defines: Compose refuses it
            features.append("override-null-undefined")
            over.append("  {P}ghost: null")
        if draw(_integers(0, 5)) == 0:
            features.append("networks-override")
            over += ["networks:", f"  {{P}}front: {_j(draw(network_bodies))}"]
        if draw(_integers(0, 9)) == 0:
            # a section with nothing under it: nothing over the base file's (models: none)
            features.append("override-null-section")
            over.append(draw(_sampled(["volumes:", "secrets:", "configs:", "models:"])))
        name_i = f"{{P}}over{i}.yml"
        files[name_i] = "\n".join(over) + "\n"
        order.append(name_i)
    if draw(_integers(0, 14)) == 0:
        # an override without a YAML document (empty, a comment): Compose passes over it
        features.append("override-empty-file")
        files["{P}empty-over.yml"] = draw(_sampled(["", "# nothing here\n", "\n"]))
        order.insert(draw(_integers(0, len(order))), "{P}empty-over.yml")
    text = "\n".join(files.values())
    for key in ("ports", "volumes", "environment", "env_file", "labels", "devices", "deploy"):
        if f"{key}:" in text:
            features.append(key)
    for key in ("networks", "ulimits", "secrets", "configs", "build"):
        if f"\n    {key}:" in text:
            features.append(key)
    if "${" in text or "$" in text:
        features.append("interpolation")
    if re.search(r"\$\{\w+:?\+", text):
        features.append("interpolation-alt")
    if re.search(r"\$\{[^}]*\$\{", text):
        features.append("interpolation-nested")
    if "$$" in text:
        features.append("interpolation-escape")
    if "extends: {file:" in text:
        features.append("extends-file")
    if bad_file:
        features.append("invalid")
    for name, content in ENV_FILES.items():
        if name.replace("{P}", "") in text.replace("{P}", ""):
            files[name] = content
    if "g.env" in text.replace("{P}", ""):
        files["{P}g.env"] = draw(dotenv_texts())
        features.append("dotenv-generated")
    if "r.env" in text.replace("{P}", ""):
        files["{P}r.env"] = draw(raw_env_texts())
    if '"format": "raw"' in text:
        features.append("env_file-raw")
    project = Project(files=files, order=order)
    features += draw(project_inputs(project))
    project.features = sorted(set(features))
    return project


#: ``-p`` values (issue #38): Compose takes only names already normal (lower case, digits,
#: ``-``, ``_``, starting with a letter or digit).
_GIVEN_NAMES = ["tier-1", "a_b", "9lives", "Upper", "a b", "_a", "_", "-a", "a.b", "é"]
#: ``name:`` values: normalised by Compose (``_x`` is ``x``, ``Abc`` ``abc``); one that
#: normalises to nothing is refused, an empty one names nothing.
_FILE_NAMES = [
    "tier-2",
    "Abc",
    "_x",
    "_",
    "my proj",
    '"${SET}"',
    '"${UNSET-}"',
    '"${UNSET:-dflt}"',
    '"x-${TAG}"',
    '""',
    '"-lead"',
    '"a.b_C"',
]
#: The project folder's own name (no ``-p``, no ``name:``).
_FOLDERS = ["Proj One", "_x", "_", "UPPER", "ok-1", "a.b"]
#: ``COMPOSE_PROFILES`` values (read when no ``--profile`` is given).
_ENV_PROFILES = ["on", "off", "on,off", "", "*", "x", "on,"]


@st.composite
def project_inputs(draw: st.DrawFn, project: Project) -> list[str]:
    """What the project takes besides its compose files, in about one project in four: the
    project name from ``-p``, ``COMPOSE_PROJECT_NAME`` (the environment or ``.env``),
    ``name:`` or the folder; ``COMPOSE_PROFILES`` instead of ``--profile``; a ``.env`` that
    the compose file's references read. Sets them on ``project``; returns its features."""
    features: list[str] = []
    dotenv: list[str] = []
    how = draw(_sampled([None] * 12 + ["-p", "-p", "name", "name", "env", "folder"]))
    if how == "-p":
        project.project_name = draw(_sampled(_GIVEN_NAMES))
        features.append("project-name-p")
    elif how == "name":
        project.project_name = None
        base = BASE_FILE
        project.files[base] = f"name: {draw(_sampled(_FILE_NAMES))}\n" + project.files[base]
        features.append("project-name-file")
    elif how == "env":
        project.project_name = None
        value = draw(_sampled(_GIVEN_NAMES))
        if draw(_BOOLEANS):
            project.env["COMPOSE_PROJECT_NAME"] = value
        else:
            dotenv.append(f"COMPOSE_PROJECT_NAME={value}")
        features.append("project-name-env")
    elif how == "folder":
        project.project_name = None
        project.folder = draw(_sampled(_FOLDERS))
        features.append("project-name-folder")
    if draw(_integers(0, 7)) == 0:
        project.profiles = ()
        value = draw(_sampled(_ENV_PROFILES))
        if draw(_BOOLEANS):
            project.env["COMPOSE_PROFILES"] = value
        else:
            dotenv.append(f"COMPOSE_PROFILES={value}")
        features.append("profiles-env")
    if dotenv or draw(_integers(0, 11)) == 0:
        # The project's .env: the generated dotenv shapes, read by a service's references.
        text = draw(dotenv_texts()) if draw(_integers(0, 3)) else ""
        project.files[".env"] = "\n".join(dotenv) + ("\n" if dotenv else "") + text
        refs = {f"D_{k}": f"${{{k}-unset}}" for k in ("G1", "G_2", "G9", "SET", "EMPTY", "UNSET")}
        base = BASE_FILE
        project.files[base] = project.files[base].replace(
            "services:\n",
            f"services:\n  {{P}}dotenv: {_j({'image': 'busybox', 'environment': refs})}\n",
            1,
        )
        features.append("dotenv-project")
    return features
