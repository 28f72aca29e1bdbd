"""The error hierarchy of tierctl.

Every error an operator can see derives from :class:`TierctlError` and carries the exit code
the CLI returns for it::

    TierctlError                      exit 1  (runtime failures, contract violations)
    ├── InputError                    exit 2  (unusable input: bad file, bad flag, bad usage)
    │   ├── SpecError                 exit 2  (a tier spec that breaks a rule; located)
    │   └── ComposeInputError         exit 2  (a compose file that cannot be read)
    ├── ContractViolation             exit 1  (a deployment contract does not hold)
    └── RuntimeFailure                exit 1  (a server, a driver or a gate failed)
        └── GateFailed                exit 1  (a rollout gate did not pass)

A message states where (file, line, field path), the rule, the value seen and the fix, so the
CLI can print it without a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Location:
    """Where in an input file a problem sits."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    path: str | None = None

    def __str__(self) -> str:
        parts: list[str] = []
        if self.file:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            parts.append(where)
        if self.path:
            parts.append(self.path)
        return ": ".join(parts)


class TierctlError(Exception):
    """Root of every error tierctl reports; ``exit_code`` is what the CLI exits with."""

    exit_code: int = 1

    def __init__(
        self,
        message: str,
        *,
        location: Location | None = None,
        rule: str | None = None,
        value: object = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.rule = rule
        self.value = value
        self.fix = fix

    def format(self) -> str:
        """Render the error as the operator sees it: location, message, rule, value, fix."""
        head = f"{self.location}: {self.message}" if self.location else self.message
        lines = [head]
        if self.rule:
            lines.append(f"  rule: {self.rule}")
        if self.value is not None:
            lines.append(f"  found: {self.value!r}")
        if self.fix:
            lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


class InputError(TierctlError):
    """Unusable input or usage: a file that cannot be read, a bad option, a bad value."""

    exit_code = 2


class SpecError(InputError):
    """A tier spec that is malformed or breaks one of the spec's rules."""


class SpecErrors(InputError):
    """Several spec problems found in one pass; each is reported."""

    def __init__(self, errors: list[SpecError]) -> None:
        super().__init__(errors[0].message if errors else "invalid spec")
        self.errors = errors

    def format(self) -> str:
        """Every problem, one block each, then a count."""
        blocks = [e.format() for e in self.errors]
        if len(self.errors) > 1:
            blocks.append(f"{len(self.errors)} problems in the spec")
        return "\n".join(blocks)


class ComposeInputError(InputError):
    """A compose file that cannot be parsed or interpolated."""


class ContractViolation(TierctlError):
    """A deployment contract does not hold."""


class RuntimeFailure(TierctlError):
    """A server, a driver or a subprocess failed while tierctl was working."""


class GateFailed(RuntimeFailure):
    """A rollout gate did not pass."""
