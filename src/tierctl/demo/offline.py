"""The demo's offline stages: render, validate (and catch a hand edit), simulate the change."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from tierctl.demo.context import DemoContext
from tierctl.readers import load_yaml
from tierctl.render import output_path, render_compose
from tierctl.render.files import check_rendered
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec, resolve_tier
from tierctl.spec.summary import summarise


def stage_render(ctx: DemoContext) -> bool:
    """Declare and render: load the spec, render it, compare with the file it writes."""
    spec = load_spec(ctx.spec_path)
    text = render_compose(spec, spec_path=ctx.spec_path)
    target = output_path(spec, ctx.spec_path)
    if target.exists():
        fresh = check_rendered(text, target).fresh
        state = "up to date" if fresh else "STALE (differs from what the spec renders)"
    else:
        state = "not written yet (`tierctl render --write` writes it)"
    ctx.rendered = ctx.workdir / target.name
    ctx.rendered.write_text(text)
    ctx.console.print(
        f"rendered {len(text.splitlines())} lines of compose for {len(spec.replicas)} replicas; "
        f"{target} is {state}"
    )
    summary = summarise(resolve_tier(spec))
    for r in summary.replicas:
        ctx.console.print(f"  {r.name:3} {r.role:8} GPUs {r.gpus:5} port {r.port}  {r.variant}")
    for d in summary.differences:
        ctx.console.print(f"  differs: {d.setting:28} " + "  ".join(d.values))
    for note in summary.notes:
        ctx.console.print(f"  note: {note}")
    return True


def _drift(compose_text: str, ctx: DemoContext) -> tuple[str, str]:
    """The rendered file with one replica's flag changed by hand, and what was changed."""
    demo = ctx.demo
    tier = resolve_tier(load_spec(ctx.spec_path))
    doc: dict[str, Any] = load_yaml(compose_text, "<rendered compose>").data
    if demo.change and demo.control and demo.canary:
        c = demo.change[0]
        victim = tier.replicas[demo.control].service
        flag, value = c.flag, c.canary
        what = f"{demo.control} takes the canary's --{flag} by hand"
    else:
        first = next(iter(tier.replicas.values()))
        victim = first.service
        flag, value = "max-running-requests", "7"
        what = f"{first.name} gains --{flag} 7 by hand"
    command = list(doc["services"][victim]["command"])
    token = f"--{flag}"
    if token in command:
        i = command.index(token)
        has_value = i + 1 < len(command) and not str(command[i + 1]).startswith("--")
        if value is None:
            del command[i : i + (2 if has_value else 1)]
        elif has_value:
            command[i + 1] = value
        elif value != "on":
            command.insert(i + 1, value)
    elif value is not None:
        command += [token] if value == "on" else [token, value]
    doc["services"][victim]["command"] = command
    return dump_yaml(doc), what


def stage_validate(ctx: DemoContext) -> bool:
    """Validate the rendered file, then show the drift a hand edit would introduce."""
    from tierctl.contracts import load_compose, validate

    spec = load_spec(ctx.spec_path)
    assert ctx.rendered is not None
    text = ctx.rendered.read_text()
    report = validate(spec, [load_compose(text, source=ctx.rendered.name)])
    ctx.console.print(f"{ctx.rendered.name}: {len(report.violations)} violations")
    for v in report.violations[:4]:
        ctx.console.print(f"  {v.rule} {v.service}: {v.message}", overflow="ellipsis", no_wrap=True)
    drifted, what = _drift(text, ctx)
    bad = validate(spec, [load_compose(drifted, source="hand-edited.yaml")])
    ctx.console.print(f"after a hand edit ({what}): {len(bad.violations)} violation(s)")
    for v in bad.violations[:4]:
        ctx.console.print(f"  {v.rule} {v.service}: {v.message}", overflow="ellipsis", no_wrap=True)
    if report.violations:
        ctx.console.print("[red]the freshly rendered file breaks a contract: a tierctl bug[/]")
    if not bad.violations:
        ctx.console.print("[red]the hand edit was not caught[/]")
    return not report.violations and bool(bad.violations)


def stage_simulate(ctx: DemoContext) -> bool:
    """What-if offline: the field report's burst on the control's and the canary's argv."""
    import random

    from tierctl.sim.config import EngineConfig
    from tierctl.sim.cost import DEFAULT_PRESET, CostModel
    from tierctl.sim.costfile import read_cost_model
    from tierctl.sim.result import ratio_table
    from tierctl.sim.simulate import compare
    from tierctl.sim.workload import field_burst

    demo = ctx.demo
    tier = resolve_tier(load_spec(ctx.spec_path))
    names = list(tier.replicas)
    a, b = (demo.control, demo.canary) if demo.canary else (names[0], names[-1])
    assert a is not None
    assert b is not None
    control = EngineConfig.from_argv(tier.replicas[a].argv, engine=demo.engine)
    candidate = EngineConfig.from_argv(tier.replicas[b].argv, engine=demo.engine)
    workload = field_burst(random.Random(0))
    size = "~720K-token"
    limits = [c.max_prompt_tokens for c in (control, candidate) if c.max_prompt_tokens]
    if limits and max(r.input_tokens + r.output_tokens for r in workload.requests) > min(limits):
        # The field report's prompts do not fit this tier's context: the engine would refuse
        # every one. The burst keeps its shape at the longest prompt the tier accepts.
        fit = min(limits)
        workload = field_burst(random.Random(0), max_total_tokens=fit)
        size = f"~{fit // 1000}K-token (the tier's context limit)"
        ctx.console.print(
            f"the field report's 720K-token prompts exceed this tier's context ({fit} tokens): "
            "the burst is sized to fit it"
        )
    cost: CostModel | str = DEFAULT_PRESET
    if ctx.cost_model is not None:
        cost, _ = read_cost_model(ctx.cost_model)
    result = compare(control, candidate, workload, cost)
    name = cost if isinstance(cost, str) else cost.name
    table = Table(
        title=f"8 x {size} burst while 3 sequences decode (modelled with the {name} step "
        "costs; `tierctl sim fit` makes a cost model for another model)"
    )
    roles = ("control", "canary") if demo.canary else ("first replica", "last replica")
    for col in ("requests", "metric", f"{a} ({roles[0]})", f"{b} ({roles[1]})", f"{b}/{a}"):
        table.add_column(col)
    for group, prefix, wanted in (
        ("burst", "burst", ("TTFT p50", "TTFT p95", "completion")),
        ("decoders", "dec", ("TPOT p50", "TPOT p90")),
    ):
        rows = ratio_table(result.control.subset(prefix), result.candidate.subset(prefix))
        for row in rows:
            if row.metric in wanted:
                table.add_row(
                    group,
                    row.metric,
                    _fmt(row.control),
                    _fmt(row.candidate),
                    "-" if row.ratio is None else f"{row.ratio:.2f}",
                )
    ctx.console.print(table)
    ctx.console.print("(seconds; TPOT excludes the first token)")
    if not demo.change:
        ctx.console.print(f"({a} and {b} run the same flags: the ratios are 1 by construction)")
    return True


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
