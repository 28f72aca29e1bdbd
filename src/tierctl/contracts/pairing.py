"""TC005 pairing-rule: the spec's rules hold on each replica's actual argv and env."""

from __future__ import annotations

from collections.abc import Iterator

from tierctl.contracts.context import Context
from tierctl.contracts.report import Violation
from tierctl.spec.rules import check_rules


def check(ctx: Context) -> Iterator[Violation]:
    """Every ``rules:`` entry whose condition holds on a replica but whose requirement does not."""
    spec = ctx.tier.spec
    for view in ctx.replicas.values():
        if view.service is None:
            continue
        for failure in check_rules(spec, view.flags, view.env):
            yield Violation(
                rule="TC005",
                service=view.expected.service,
                message=f"rule {failure.name}: requires {'; '.join(failure.missing)} "
                f"- {failure.rule.because}",
                location=ctx.compose.location("services", view.expected.service),
                expected="; ".join(failure.missing),
            )
