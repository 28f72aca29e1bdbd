"""Everything the contracts look at, computed once: the spec's view and the files' view.

The spec's modules are imported where a spec's context is built (:func:`build_context`), not
at import: ``validate`` of compose files without a spec reads :func:`config_content` from here
and never needs the spec's models (start-up, issue #39).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tierctl.compose import ComposeFile, ComposeService
from tierctl.compose.argv import FlagUse, flags_dict, parse_flags, split_launcher
from tierctl.compose.profiles import ProfileScope
from tierctl.readers import load_yaml
from tierctl.yaml12 import FastYaml12Loader

if TYPE_CHECKING:
    from tierctl.engine_catalog import Catalog
    from tierctl.spec.effective import ResolvedReplica, Tier
    from tierctl.spec.tier_spec import ShellWrapper


@dataclass(frozen=True)
class ReplicaView:
    """One replica: what the spec says and what the compose file carries."""

    expected: ResolvedReplica
    service: ComposeService | None
    argv: tuple[str, ...]  # actual command, () when missing (with the image's entrypoint)
    flag_start: int
    uses: tuple[FlagUse, ...]
    flags: dict[str, Any]  # actual flags in the spec's effective-flags shape
    env: dict[str, str]  # actual environment (unset values as "")
    #: Tokens of ``argv`` before ``command[0]`` (the image's entrypoint), for locating.
    command_offset: int = 0


@dataclass(frozen=True)
class Context:
    """Input of every contract check."""

    tier: Tier
    compose: ComposeFile
    catalog: Catalog | None
    replicas: dict[str, ReplicaView]
    #: Which services can run together (the checks that compare services use it); the
    #: default puts every service in one project.
    scope: ProfileScope = field(default_factory=lambda: ProfileScope(None, {}))

    def other_replicas(self, name: str) -> list[ReplicaView]:
        """Every replica except ``name``, in spec order."""
        return [v for n, v in self.replicas.items() if n != name]


def build_context(
    tier: Tier,
    compose: ComposeFile,
    catalog: Catalog | None,
    profiles: Sequence[str] | None = None,
) -> Context:
    """Pair each replica of the spec with its compose service and parse its argv once;
    ``profiles``: the active compose profiles (None: every project the file can run)."""
    from tierctl.spec.effective import engine_profile, launcher, takes_positional, unwrap_command

    spec_launcher = launcher(tier.spec)
    profile = engine_profile(tier.spec)
    views: dict[str, ReplicaView] = {}
    for name, expected in tier.replicas.items():
        service = compose.services.get(expected.service)
        shell = tier.spec.engine.shell
        if service is None:
            command: tuple[str, ...] = ()
        elif shell is not None and shell.in_entrypoint:
            command = service.entrypoint or ()
        else:
            command = service.command or ()
        # An engine run inside a shell script: its argv is the script's engine command.
        argv = unwrap_command(shell, command) or unwrap_command(_read(shell), command) or command
        # The image's ENTRYPOINT runs the launcher (vllm/vllm-openai: `vllm serve`) when the
        # file gives the arguments only, as render writes them for it: the argv as it runs.
        entry = (
            profile.image_entrypoint(service.image) if service is not None and shell is None else ()
        )
        offset = 0
        if (
            entry
            and service is not None
            and service.entrypoint is None
            and "entrypoint" not in service.data
            and tuple(spec_launcher[: len(entry)]) == entry
            and tuple(argv[: len(entry)]) != entry
        ):
            argv, offset = (*entry, *argv), len(entry)
        if shell is None and tier.spec.engine.argv_tail is not None:
            # The words the tail's references expand to follow the engine's own (unchecked).
            argv = argv[: len(expected.argv)]
        start = split_launcher(argv, spec_launcher)
        # The engine's positional arguments (vLLM's `vllm serve MODEL`) sit between the
        # launcher and the first flag; they are read under their spec names.
        positional: dict[str, str] = {}
        if start == len(spec_launcher):
            here = None
            if offset == 0:
                image = service.image if service is not None else None
                here = takes_positional(tier.spec, image)
            start, positional = profile.positional_span(argv, spec_launcher, here)
        uses = parse_flags(argv, start, catalog)
        env = {k: v or "" for k, v in (service.environment if service else {}).items()}
        views[name] = ReplicaView(
            expected=expected,
            service=service,
            argv=argv,
            command_offset=offset,
            flag_start=start,
            uses=tuple(uses),
            flags={**positional, **profile.spec_flags(flags_dict(uses), catalog)},
            env=env,
        )
    return Context(
        tier=tier,
        compose=compose,
        catalog=catalog,
        replicas=views,
        scope=ProfileScope.of(compose, profiles),
    )


def _read(shell: ShellWrapper | None) -> ShellWrapper | None:
    """The wrapper as an interpolated file holds it: compose's ``$$`` is a ``$`` there."""
    if shell is None:
        return None
    return shell.model_copy(
        update={
            "script": shell.script.replace("$$", "$"),
            "command": [t.replace("$$", "$") for t in shell.command],
        }
    )


@functools.lru_cache(maxsize=64)
def config_content(content: str, name: str) -> Any:
    """The YAML document of top-level config ``name``'s inline ``content``, parsed once for
    the contracts that read it (the variant's scrape labels, literal credentials); the result
    is shared, so it is read, never changed.

    Raises:
        InputError: the content is not YAML.
    """
    return load_yaml(
        content,
        f"configs.{name}.content",
        duplicates=False,
        line_depth=0,
        loader=FastYaml12Loader,
    ).data
