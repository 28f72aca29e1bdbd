"""Engine argv as parsed flags: the launcher, then ``--flag [value...]`` tokens.

Rollout compares argv by flags (grouped by :mod:`tierctl.compose.argv`, as the contracts group
them), not by raw strings, so ``--tp-size=4`` and ``--tp-size 4`` are the same setting and the
order of flags does not matter; that is also how an engine's ``/server_info`` reports them (one
key per flag, dashes as underscores).
"""

from __future__ import annotations

from dataclasses import dataclass

from tierctl.compose.argv import FlagValue, first_flag, flag_value, format_flag_value, parse_flags


@dataclass(frozen=True)
class ParsedArgv:
    """An engine command split into launcher and flags.

    Attributes:
        launcher: Tokens before the first ``--flag`` (``python3 -m sglang.launch_server``).
        flags: Flag name without dashes -> value, in argv order.
    """

    launcher: tuple[str, ...]
    flags: dict[str, FlagValue]


def parse_argv(tokens: list[str] | tuple[str, ...]) -> ParsedArgv:
    """Split an argv into launcher tokens and flags (grouped by :mod:`tierctl.compose.argv`).

    Args:
        tokens: The command tokens.

    Returns:
        The launcher and an ordered flag map; a repeated flag keeps its last value, as argparse
        does.
    """
    argv = tuple(tokens)
    start = first_flag(argv)
    flags: dict[str, FlagValue] = {}
    for use in parse_flags(argv, start, None):
        values = use.values
        if not use.name:
            # ``--`` and what follows it are positionals: keep them visible rather than drop them.
            for token in (use.token, *values):
                flags[f"<positional:{token}>"] = True
            continue
        flags[use.name] = flag_value(values)
    return ParsedArgv(launcher=argv[:start], flags=flags)


@dataclass(frozen=True)
class FlagChange:
    """One flag that differs between two argvs; ``None`` on a side means absent there."""

    flag: str
    old: FlagValue | None
    new: FlagValue | None

    def __str__(self) -> str:
        if self.old is None:
            if self.new is True:
                return f"+ --{self.flag}"
            return f"+ --{self.flag} {format_flag_value(self.new or True)}"
        if self.new is None:
            return f"- --{self.flag}"
        return f"--{self.flag}: {format_flag_value(self.old)} -> {format_flag_value(self.new)}"


def diff_argv(old: list[str], new: list[str]) -> tuple[FlagChange, ...]:
    """Flag-level differences between two argvs, launcher changes reported as ``<launcher>``.

    Args:
        old: The old command tokens.
        new: The new command tokens.

    Returns:
        The changes, in the order the flags appear (old first, then flags only in new).
    """
    a, b = parse_argv(old), parse_argv(new)
    changes: list[FlagChange] = []
    if a.launcher != b.launcher:
        changes.append(FlagChange("<launcher>", " ".join(a.launcher), " ".join(b.launcher)))
    for name, value in a.flags.items():
        if name not in b.flags:
            changes.append(FlagChange(name, value, None))
        elif b.flags[name] != value:
            changes.append(FlagChange(name, value, b.flags[name]))
    for name, value in b.flags.items():
        if name not in a.flags:
            changes.append(FlagChange(name, None, value))
    return tuple(changes)
