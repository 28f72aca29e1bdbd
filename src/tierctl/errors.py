"""The error hierarchy of tierctl, and the exit codes of the ``tierctl`` command.

Every error an operator can see derives from :class:`TierctlError` and carries the
:class:`ExitCode` the CLI returns for it::

    TierctlError                      exit 1  (runtime failures, contract violations)
    ├── InputError                    exit 2  (unusable input: bad file, bad flag, bad usage)
    │   ├── SpecError                 exit 2  (a tier spec that breaks a rule; located)
    │   └── ComposeInputError         exit 2  (a compose file that cannot be read)
    ├── ContractViolation             exit 1  (a rollout would break a deployment contract)
    └── RuntimeFailure                exit 1  (a server, a driver or a gate failed)
        ├── GateFailed                exit 1  (a rollout gate did not pass)
        └── CannotJudge               exit 3  (the evidence cannot be read: a server to
                                               judge from is unreachable or failing)

Exit 1 means "judged, and it failed"; a CI gate must be able to tell that from "could not
judge". So a readout whose Prometheus is down, times out or answers 5xx is
:class:`CannotJudge` (exit 3, like an inconclusive verdict: nothing was decided, retry when
the server is back), and a URL that answers but is not a Prometheus HTTP API (a 404, an HTML
page, another service's JSON) is an :class:`InputError` (exit 2: the operator gave the wrong
URL, and retrying will not help).

A message states where (file, line, field path), the rule, the value seen and the fix, so the
CLI can print it without a traceback. Library messages name the library's own terms (a
parameter, a file, a field); the command line's option names are the CLI's to add.

Outcomes that are not errors (violations found by ``validate``, a readout verdict, a stale
rendered file, an interrupted load test) are returned by the command as an :class:`ExitCode`;
:func:`tierctl.cli.main.main` is the one place that turns either into the process's status.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

#: The most characters of an offending value an error prints (the rest is counted).
FOUND_MAX_CHARS = 400


def shortened(shown: str, limit: int = FOUND_MAX_CHARS) -> str:
    """``shown`` cut to its first ``limit`` characters, the cut counted (a value printed in a
    message is named, not printed whole)."""
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}... ({len(shown):,} characters)"


class ExitCode(enum.IntEnum):
    """Every status the ``tierctl`` command exits with."""

    #: Everything held: contracts, gates, the readout verdict.
    OK = 0
    #: A contract was violated, a gate or the readout verdict failed (the canary was judged
    #: and failed), a runtime step failed, or a checked file is stale.
    FAILURE = 1
    #: Unusable input or usage: a bad file, option or value, a missing extra, or a URL that
    #: is not the server it should be (``readout --prometheus`` answering 404 or not as a
    #: Prometheus HTTP API).
    USAGE = 2
    #: Could not judge: ``tierctl readout``'s evidence is not enough to pass or fail the
    #: canary, or cannot be read at all (Prometheus unreachable, timing out, answering 5xx:
    #: :class:`CannotJudge`). Never the code of a failed canary.
    INCONCLUSIVE = 3
    #: A fleet rollout stopped before a wave that waits for a manual approval
    #: (``tierctl rollout --fleet F --resume --approve-wave N`` continues it): not a failure,
    #: and not done.
    AWAITING_APPROVAL = 4
    #: Stopped by Ctrl-C (128 + SIGINT, as shells report it); partial results were kept.
    INTERRUPTED = 130


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


def label_params(text: str, params: tuple[str, ...], labels: Mapping[str, str]) -> str:
    """``text`` with each of ``params`` written in backticks (```repetitions```) replaced by
    the caller's name for it (``labels["repetitions"]``: ``--repeat``); other names stay.

    The one way library wording reaches the operator in the command line's words: errors
    (:meth:`TierctlError.format`) and reports (``contracts.Report.text``) use it.
    """
    for name in params:
        if name in labels:
            text = text.replace(f"`{name}`", labels[name])
    return text


class TierctlError(Exception):
    """Root of every error tierctl reports; ``exit_code`` is what the CLI exits with.

    ``params`` lists the library parameters the message, rule and fix name, each written in
    backticks (```repetitions```). The library shows them so; a caller with its own names for
    them (the CLI's options) passes ``labels`` to :meth:`format`, which puts its names in.
    """

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(
        self,
        message: str,
        *,
        location: Location | None = None,
        rule: str | None = None,
        value: object = None,
        fix: str | None = None,
        params: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.rule = rule
        self.value = value
        self.fix = fix
        self.params = params

    def _words(self, text: str, labels: Mapping[str, str]) -> str:
        return label_params(text, self.params, labels)

    def format(self, labels: Mapping[str, str] | None = None) -> str:
        """Render the error as the operator sees it: location, message, rule, value, fix.

        Args:
            labels: the caller's name for a parameter in :attr:`params` (the CLI passes its
                option names, ``{"repetitions": "--repeat"}``); others stay in backticks.
        """
        labels = labels or {}
        message = self._words(self.message, labels)
        head = f"{self.location}: {message}" if self.location else message
        lines = [head]
        if self.rule:
            lines.append(f"  rule: {self._words(self.rule, labels)}")
        if self.value is not None:
            # A 5,000-digit number or a 100 KB string is named, not printed whole.
            lines.append(f"  found: {shortened(repr(self.value))}")
        if self.fix:
            lines.append(f"  fix: {self._words(self.fix, labels)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


class InputError(TierctlError):
    """Unusable input or usage: a file that cannot be read, a bad option, a bad value."""

    exit_code = ExitCode.USAGE


class SpecError(InputError):
    """A tier spec that is malformed or breaks one of the spec's rules."""


class SpecErrors(InputError):
    """Several spec problems found in one pass; each is reported."""

    def __init__(self, errors: list[SpecError]) -> None:
        super().__init__(errors[0].message if errors else "invalid spec")
        self.errors = errors

    def format(self, labels: Mapping[str, str] | None = None) -> str:
        """Every problem, one block each, then a count."""
        blocks = [e.format(labels) for e in self.errors]
        if len(self.errors) > 1:
            blocks.append(f"{len(self.errors)} problems in the spec")
        return "\n".join(blocks)


class ComposeInputError(InputError):
    """A compose file that cannot be parsed or interpolated."""


class ContractViolation(TierctlError):
    """A rollout would break a deployment contract, so it is refused before anything changes.

    Raised by the rollout planner (a protected service would change) and executor (a dry run
    plans more than the step's service). ``validate`` does not raise it: it collects every
    violation into a :class:`~tierctl.contracts.report.Report`, whose ``exit_code`` is
    :attr:`ExitCode.FAILURE` when any is found.
    """


class RuntimeFailure(TierctlError):
    """A server, a driver or a subprocess failed while tierctl was working."""


class GateFailed(RuntimeFailure):
    """A rollout gate did not pass."""


class CannotJudge(RuntimeFailure):
    """The evidence cannot be read, so nothing was judged: the server to judge from (a
    Prometheus) is unreachable, timing out or failing. Exit 3, never 1: a failed canary and
    a missing Prometheus must not look alike to a CI gate."""

    exit_code = ExitCode.INCONCLUSIVE
