"""``tierctl readout``: judge the canary against the live control from Prometheus."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import click
from rich.console import Console

from tierctl.cli.options import fleet_option, format_option, prometheus_option
from tierctl.engines import all_metric_prefixes, profile_for
from tierctl.errors import ExitCode, InputError
from tierctl.spec import load_spec, resolve_tier

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}

#: The readout verdict -> the command's exit status.
VERDICT_EXIT = {
    "pass": ExitCode.OK,
    "fail": ExitCode.FAILURE,
    "inconclusive": ExitCode.INCONCLUSIVE,
}


def parse_duration(text: str, option: str) -> float:
    """``90s``, ``5m``, ``24h``, ``2d`` -> seconds (more than zero)."""
    match = _DURATION.match(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise InputError(
            f"{option}: {text!r} is not a duration" if not match else f"{option} must be positive",
            rule="duration" if not match else "a readout window and step are longer than zero",
            value=text,
            fix="write a number and a unit: 90s, 5m, 24h, 2d",
        )
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@click.command()
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Tier spec: the arms (its control and canary replicas) and the engine.",
)
@prometheus_option(
    help="Prometheus base URL, e.g. http://127.0.0.1:9090 (with --fleet: for the hosts that "
    "name none of their own).",
)
@fleet_option(
    help="Read out across this fleet file's hosts: canary hosts vs control hosts, host as a "
    "blocking factor (docs/fleet.md).",
)
@click.option(
    "--design",
    type=click.Choice(["between-hosts", "within-host"]),
    default="between-hosts",
    show_default=True,
    help="With --fleet: canary hosts vs control hosts, each against its own baseline; or the "
    "spec's canary vs control replica inside every host.",
)
@click.option(
    "--journal",
    "journal_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --fleet: the fleet journal that dates the canary wave [FLEET.journal.jsonl].",
)
@click.option(
    "--since",
    "since_s",
    type=float,
    help="With --fleet: when the canary hosts changed, Unix seconds [the journal's wave 1].",
)
@click.option(
    "--baseline",
    help="With --fleet: the baseline window before the change [as long as --window].",
)
@click.option(
    "--canary-hosts",
    help="With --fleet: the canary hosts, comma-separated [the fleet's first wave].",
)
@click.option("--control", help="Control replica (default: the one with role control).")
@click.option("--canary", help="Canary replica (default: the one with role canary).")
@click.option("--window", default="24h", show_default=True, help="How far back from --end.")
@click.option("--end", "end_s", type=float, help="End of the window, Unix seconds (default now).")
@click.option("--step", default="5m", show_default=True, help="Step and rate window (one pair).")
@click.option(
    "--label",
    default="container_name",
    show_default=True,
    help="Scrape label that names each replica's service.",
)
@click.option(
    "--match", "extra", help='Extra PromQL matchers for both arms, e.g. host_machine="gpu02".'
)
@click.option(
    "--prefix",
    type=click.Choice(all_metric_prefixes()),
    help="Metric prefix, one of the spec's engine's (default: detect).",
)
@click.option(
    "--tolerance", default=0.05, show_default=True, help="Relative change treated as none."
)
@click.option(
    "--min-requests", default=3.0, show_default=True, help="Per arm per step to compare it."
)
@format_option(("table", "json", "markdown"))
def readout(
    spec_path: Path | None,
    prometheus: str | None,
    fleet_path: Path | None,
    design: str,
    journal_path: Path | None,
    since_s: float | None,
    baseline: str | None,
    canary_hosts: str | None,
    control: str | None,
    canary: str | None,
    window: str,
    end_s: float | None,
    step: str,
    label: str,
    extra: str | None,
    prefix: str | None,
    tolerance: float,
    min_requests: float,
    fmt: str,
) -> ExitCode:
    """Compare canary and control over a window; exit 0 pass, 1 fail, 3 inconclusive.

    With --fleet FLEET: canary hosts vs control hosts, per host and pooled.
    """
    ctx = click.get_current_context()
    if fleet_path is not None:
        from tierctl.cli.readout_fleet import FleetAsk, fleet_readout

        p = ctx.params
        ask = FleetAsk(**{k: p[k] for k in FleetAsk.__dataclass_fields__})
        return fleet_readout(ask)
    _one_tier(ctx)
    assert spec_path is not None
    assert prometheus is not None
    from tierctl.readout import PrometheusClient, arms_from_tier, run_readout
    from tierctl.readout.analysis import Arm
    from tierctl.readout.report import print_readout, readout_markdown

    tier = resolve_tier(load_spec(spec_path))
    arm_c, arm_k = arms_from_tier(tier, control, canary, label)
    if extra:
        arm_c = Arm(arm_c.replica, f"{arm_c.matchers},{extra}", arm_c.expected_variant)
        arm_k = Arm(arm_k.replica, f"{arm_k.matchers},{extra}", arm_k.expected_variant)
    end = end_s if end_s is not None else time.time()
    with PrometheusClient(prometheus) as client:
        result = run_readout(
            client,
            arm_c,
            arm_k,
            start_s=end - parse_duration(window, "--window"),
            end_s=end,
            step_s=parse_duration(step, "--step"),
            prefix=prefix,
            engine=profile_for(tier.spec.engine.kind),
            variant_label=tier.spec.telemetry.label,
            min_requests_per_step=min_requests,
            tolerance=tolerance,
        )
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    elif fmt == "markdown":
        click.echo(readout_markdown(result), nl=False)
    else:
        console = Console()
        print_readout(result, Console(width=None if console.is_terminal else 150))
    return VERDICT_EXIT[result.verdict]


def _one_tier(ctx: click.Context) -> None:
    """A one-host readout: --spec and --prometheus, no fleet-only option."""
    fleet_only = ("design", "journal_path", "since_s", "baseline", "canary_hosts")
    given = [
        "--" + n.replace("_path", "").replace("_s", "").replace("_", "-")
        for n in fleet_only
        if ctx.get_parameter_source(n) is click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(f"{', '.join(given)}: only with --fleet FLEET", ctx=ctx)
    if ctx.params["spec_path"] is None or ctx.params["prometheus"] is None:
        raise click.UsageError("give --spec and --prometheus (one tier), or --fleet FLEET", ctx=ctx)
