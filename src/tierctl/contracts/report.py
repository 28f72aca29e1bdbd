"""What validation reports: the contracts (rule ids), violations and the report."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from tierctl.errors import ExitCode, Location, label_params

#: Rule id -> short name. Each rule is described in docs/contracts.md.
RULES: dict[str, str] = {
    "TC001": "argv-pinning",
    "TC002": "variant-truthfulness",
    "TC003": "shared-runtime",
    "TC004": "engine-flag-catalog",
    "TC005": "pairing-rule",
    "TC006": "hygiene",
    "TC007": "schema",  # the compose-spec schema, or the Kubernetes API schemas
}


def _where(location: Location | None) -> str:
    if location and location.line:
        return f"{location.file}:{location.line}: "
    return f"{location.file}: " if location and location.file else ""


@dataclass(frozen=True)
class Violation:
    """One broken contract on one service (or on the file, when ``service`` is None)."""

    rule: str
    service: str | None
    message: str
    location: Location | None = None
    expected: str | None = None
    found: str | None = None
    fix: str | None = None
    #: Where in the tier spec the fix belongs (a flag's line in tier.yaml), when known.
    spec_location: Location | None = None

    @property
    def rule_name(self) -> str:
        """The rule's short name (argv-pinning...)."""
        return RULES[self.rule]

    def line(self) -> str:
        """One line for the terminal: where, service, rule, what."""
        primary = self.spec_location or self.location
        where = _where(primary)
        who = f"{self.service}: " if self.service else ""
        head = f"{where}{who}{self.rule} {self.rule_name}: {self.message}"
        if self.spec_location and self.spec_location.path:
            head += f" [{self.spec_location.path}]"
        if self.spec_location and self.location and self.location.file:
            head += f"\n  in the file: {_where(self.location).rstrip(': ')}"
        return f"{head}\n  fix: {self.fix}" if self.fix else head

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "rule": self.rule,
            "rule_name": self.rule_name,
            "service": self.service,
            "message": self.message,
            "expected": self.expected,
            "found": self.found,
            "fix": self.fix,
            "file": self.location.file if self.location else None,
            "line": self.location.line if self.location else None,
            "path": self.location.path if self.location else None,
            "spec_file": self.spec_location.file if self.spec_location else None,
            "spec_line": self.spec_location.line if self.spec_location else None,
            "spec_path": self.spec_location.path if self.spec_location else None,
        }


@dataclass(frozen=True)
class Report:
    """The result of validating compose files against a spec."""

    spec: str
    files: tuple[str, ...]
    catalog: str | None
    services_checked: int
    replicas_checked: int
    violations: tuple[Violation, ...] = field(default=())
    #: Findings that do not fail validation (shown, counted, exit 0).
    warnings: tuple[Violation, ...] = field(default=())
    #: What could not be checked, and why (validation without a spec names these).
    unchecked: tuple[str, ...] = field(default=())
    #: Library parameters the ``unchecked`` lines name in backticks (see ``TierctlError``).
    params: tuple[str, ...] = field(default=())
    #: Which compose reader read the files: tierctl's own, cross-checked with the real
    #: binary or not (empty when not said).
    reader: str = ""
    #: Which compose profiles the checks that compare services looked at (empty: not said).
    profiles: str = ""

    @property
    def ok(self) -> bool:
        """Whether every contract holds."""
        return not self.violations

    @property
    def exit_code(self) -> ExitCode:
        """``OK`` when clean, ``FAILURE`` with violations."""
        return ExitCode.OK if self.ok else ExitCode.FAILURE

    def summary(self) -> str:
        """One line: clean, or how many violations of which rules."""
        scope = (
            f"{self.replicas_checked} replicas, {self.services_checked} services in "
            f"{', '.join(self.files)}"
        )
        if self.ok and self.unchecked:
            return f"ok: every check that could run holds ({scope})"
        if self.ok:
            return f"ok: all {len(RULES)} contracts hold ({scope})"
        counts = Counter(v.rule for v in self.violations)
        by_rule = ", ".join(f"{r} {RULES[r]} x{n}" for r, n in sorted(counts.items()))
        n = len(self.violations)
        return f"{n} violation{'s' if n != 1 else ''} ({by_rule}) in {scope}"

    def text(self, labels: Mapping[str, str] | None = None) -> str:
        """Every violation on its own line, then the summary.

        Args:
            labels: the caller's names for :attr:`params` (the CLI's options).
        """
        named = labels or {}
        lines = [label_params(v.line(), self.params, named) for v in self.violations]
        lines += [f"warning: {label_params(w.line(), self.params, named)}" for w in self.warnings]
        lines += [
            f"not checked: {label_params(u, self.params, labels or {})}" for u in self.unchecked
        ]
        # The summary stays the first line of a clean report; what was read follows it.
        notes = [note for note in (self.profiles, self.reader) if note]
        return "\n".join([*lines, self.summary(), *notes])

    def to_json(self) -> str:
        """Machine-readable report."""
        return json.dumps(
            {
                "ok": self.ok,
                "spec": self.spec,
                "files": list(self.files),
                "catalog": self.catalog,
                "services_checked": self.services_checked,
                "replicas_checked": self.replicas_checked,
                "violations": [v.as_dict() for v in self.violations],
                "warnings": [w.as_dict() for w in self.warnings],
                "unchecked": list(self.unchecked),
                "profiles": self.profiles or None,
                "compose_reader": self.reader or None,
                "summary": self.summary(),
            },
            indent=2,
        )
