"""TC001 argv-pinning: each replica's argv equals the spec's effective argv, token for token."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from tierctl.contracts.context import Context, ReplicaView
from tierctl.contracts.credentials import redact_argv
from tierctl.contracts.report import Violation

MAX_SHOWN = 5


def check(ctx: Context) -> Iterator[Violation]:
    """One violation per replica whose command differs from the spec's argv."""
    for view in ctx.replicas.values():
        if view.service is None:
            continue  # reported by TC006 (service missing)
        # The spec's argv is compose text ($$ is a literal $); the file is read interpolated.
        wanted = [token.replace("$$", "$") for token in view.expected.argv]
        if wanted == list(view.argv):
            continue
        # Credentials never reach a report, not even as a differing token.
        expected = redact_argv(wanted)
        actual = redact_argv(view.argv)
        diffs = describe_differences(ctx, view, expected, actual)
        shown = "; ".join(diffs[:MAX_SHOWN])
        more = f"; (+{len(diffs) - MAX_SHOWN} more)" if len(diffs) > MAX_SHOWN else ""
        yield Violation(
            rule="TC001",
            service=view.expected.service,
            message=f"argv differs from the spec's for {view.expected.name}: {shown}{more}",
            location=ctx.compose.location(
                "services", view.expected.service, "command", _first_difference(expected, actual)
            ),
            expected=" ".join(expected),
            found=" ".join(actual),
        )


def _first_difference(expected: list[str], actual: list[str]) -> int:
    """Index in the file's argv of the first token that differs (where the line points)."""
    for i, (want, got) in enumerate(zip(expected, actual, strict=False)):
        if want != got:
            return i
    return max(0, min(len(expected), len(actual)) - 1) if actual else 0


def _flag_at(tokens: list[str], index: int) -> str | None:
    """The flag a value token at ``index`` belongs to."""
    for i in range(min(index, len(tokens) - 1), -1, -1):
        if tokens[i].startswith("--"):
            return tokens[i]
    return None


def _owner_note(ctx: Context, view: ReplicaView, flag: str | None, found: list[str]) -> str:
    """' (r2's value)' when the wrong value is exactly what another replica should carry."""
    if not flag:
        return ""
    name = flag.lstrip("-")
    if len(found) == 1 and view.expected.flags.get(name) is not None:
        for other in ctx.other_replicas(view.expected.name):
            want = other.expected.flags.get(name)
            if want is not None and str(want) == found[0] and want != view.expected.flags[name]:
                return f" ({other.expected.name}'s value)"
    return ""


def describe_differences(
    ctx: Context, view: ReplicaView, expected: list[str], actual: list[str]
) -> list[str]:
    """The differing tokens in argv order, each with the flag it belongs to."""
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=expected, b=actual, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        want, got = _clip(expected[a0:a1]), _clip(actual[b0:b1])
        flag = _flag_at(expected, a0) if want and not want[0].startswith("--") else None
        where = f"{flag} " if flag else ""
        if op == "replace":
            note = _owner_note(ctx, view, flag, got)
            out.append(f"{where}expected {' '.join(want)!r}, found {' '.join(got)!r}{note}")
        elif op == "delete":
            out.append(
                f"missing {' '.join(want)!r}" + (f" after {expected[a0 - 1]!r}" if a0 else "")
            )
        else:
            out.append(
                f"unexpected {' '.join(got)!r}" + (f" after {actual[b0 - 1]!r}" if b0 else "")
            )
    if _same_tokens_reordered(expected, actual):
        out.insert(0, "same flags in a different order")
    return out


def _clip(tokens: list[str], most: int = 6) -> list[str]:
    """At most ``most`` tokens of a long run (a whole missing argv stays one readable item)."""
    if len(tokens) <= most:
        return tokens
    return [*tokens[:most], f"... ({len(tokens) - most} more tokens)"]


def _same_tokens_reordered(expected: list[str], actual: list[str]) -> bool:
    return expected != actual and sorted(expected) == sorted(actual)
