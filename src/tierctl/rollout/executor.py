"""Execute a plan: per step a dry run that must plan exactly that service, the action, the
gates, and on a failed gate a rollback of that one service to OLD; all of it journaled.

Nothing else is touched on failure: the rollout stops with every other service as it was.
``resume`` skips the steps the journal records as done; ``dry_run`` walks every step's dry run
without applying anything or writing the journal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx

from tierctl.credentials import mask, mask_tree
from tierctl.errors import ContractViolation, GateFailed, InputError, Location, TierctlError
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.base import Driver, HostUnreachable
from tierctl.rollout.gates import (
    SERVING_GATES,
    GateContext,
    GateSettings,
    run_gates,
    step_profile,
)
from tierctl.rollout.journal import Journal
from tierctl.rollout.normalise import load_merged_services, load_services
from tierctl.rollout.plan_schema import Plan, SourceRef, Step, plan_digest
from tierctl.rollout.progress import NoProgress, RolloutProgress
from tierctl.rollout.proxy_drain import Drained, find_admin
from tierctl.rollout.proxy_drain import drain as drain_replica
from tierctl.rollout.proxy_drain import restore as restore_replica
from tierctl.rollout.source import LoadedSource, read_source

Status = Literal["done", "skipped", "checked", "rolled-back"]


@dataclass(frozen=True)
class RolloutOptions:
    """How to run a plan.

    Attributes:
        journal_path: The journal file.
        resume: Continue a journal, skipping finished steps.
        dry_run: Only run each step's dry run.
        gates: Gate settings.
        proxy_drain: Take each engine replica out of the plan's proxy before its step stops
            it, and put it back after its gates (:mod:`tierctl.rollout.proxy_drain`).
    """

    journal_path: Path
    resume: bool = False
    dry_run: bool = False
    gates: GateSettings = field(default_factory=GateSettings)
    proxy_drain: bool = True


@dataclass(frozen=True)
class StepOutcome:
    """What happened to one step."""

    step: str
    status: Status
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RolloutResult:
    """The outcome of a rollout run (a failure raises instead)."""

    outcomes: tuple[StepOutcome, ...]
    journal: Path | None
    already_completed: bool = False  # the journal said the plan had finished; nothing was run


def load_sides(plan: Plan, repo: Path | None = None) -> tuple[Deployment, Deployment]:
    """Read every file of a plan again (each side's first file and its override files) and
    check they are the files that were planned; each side's services are its files merged as
    ``docker compose -f A -f B`` merges them.

    Raises:
        InputError: A file changed since the plan was made.
    """
    sides: list[Deployment] = []
    for side, refs in (
        ("old", (plan.source, *plan.source_overrides)),
        ("new", (plan.target, *plan.target_overrides)),
    ):
        loaded = [_read_planned(ref, repo) for ref in refs]
        if len(loaded) == 1:
            services = load_services(loaded[0].text, refs[0].spec, base_dir=loaded[0].folder)
        else:
            services = load_merged_services(
                [(f.text, ref.spec, f.folder) for f, ref in zip(loaded, refs, strict=True)]
            )
        sides.append(
            Deployment(
                "old" if side == "old" else "new",
                loaded[0].ref,
                loaded[0].text,
                services.services,
                tuple((f.ref, f.text) for f in loaded[1:]),
            )
        )
    return sides[0], sides[1]


def _read_planned(ref: SourceRef, repo: Path | None) -> LoadedSource:
    """One planned file read again, refused if it changed since the plan."""
    loaded = read_source(ref.spec, repo)
    if loaded.ref.sha256 != ref.sha256:
        raise InputError(
            f"{ref.spec} changed since the plan was made",
            location=Location(file=ref.spec),
            rule="a rollout applies the files its plan was made from",
            value=loaded.ref.sha256[:12],
            fix="make the plan again with tierctl plan",
        )
    return loaded


def run_rollout(
    plan: Plan,
    driver: Driver,
    old: Deployment,
    new: Deployment,
    options: RolloutOptions,
    *,
    client: httpx.Client | None = None,
    log: Callable[[str], None] = lambda _m: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    progress: RolloutProgress | None = None,
) -> RolloutResult:
    """Run a plan with a driver.

    Args:
        plan: The plan.
        driver: Applies the steps.
        old: The OLD side, for rollbacks and scoped downs.
        new: The NEW side.
        options: Journal, resume, dry run and gate settings.
        client: HTTP client for the gates (injected in tests).
        log: Receives one line per event; secrets are masked first.
        sleep: Injected sleep for the gates.
        clock: Injected monotonic clock for the gates.
        progress: Receives every poll of the gates' waits (an engine restarting, a scrape,
            the soak) with its elapsed time and budget.

    Returns:
        One outcome per step.

    Raises:
        GateFailed: A gate failed; that step's service was rolled back to OLD.
        ContractViolation: A dry run planned more or other than the step's service.
        RuntimeFailure: The driver failed.
        InputError: A journal exists without ``resume``, or belongs to another plan.
    """
    secrets = driver.secrets()
    try:
        return _run_rollout(
            plan,
            driver,
            old,
            new,
            options,
            secrets,
            client,
            log,
            sleep,
            clock,
            progress or NoProgress(),
        )
    except TierctlError as exc:
        # Whatever a driver, a gate or an engine put in the error, the operator sees it (and
        # --debug's traceback shows its causes) with the secrets masked.
        mask_error(exc, secrets)
        raise


def mask_error(exc: BaseException, secrets: tuple[str, ...]) -> None:
    """Mask ``secrets`` in a TierctlError and in every TierctlError it was raised from."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen and secrets:
        seen.add(id(node))
        if isinstance(node, TierctlError):
            node.message = mask(node.message, secrets)
            node.rule = None if node.rule is None else mask(node.rule, secrets)
            node.fix = None if node.fix is None else mask(node.fix, secrets)
            node.value = mask_tree(node.value, secrets)
            node.args = (node.message,)
        node = node.__cause__ or node.__context__


def _run_rollout(
    plan: Plan,
    driver: Driver,
    old: Deployment,
    new: Deployment,
    options: RolloutOptions,
    secrets: tuple[str, ...],
    client: httpx.Client | None,
    log: Callable[[str], None],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    progress: RolloutProgress,
) -> RolloutResult:
    def say(message: str) -> None:
        log(mask(message, secrets))

    journal = (
        None
        if options.dry_run
        else Journal(options.journal_path, plan_digest(plan), secrets=secrets)
    )
    done: frozenset[str] = frozenset()
    if journal is not None:
        if journal.exists() and journal.read().completed:
            # A finished plan has nothing left to do: say so instead of advising --resume.
            say(
                f"{journal.path}: this plan already completed; nothing to do (to change the "
                "tier again, make a new plan from the running files)"
            )
            return RolloutResult(
                tuple(StepOutcome(s.id, "skipped") for s in plan.steps), journal.path, True
            )
        done = _open_journal(journal, options.resume)
    out_of_proxy = dict(journal.read().out_of_proxy) if journal is not None else {}
    own_client = client is None
    http = client or httpx.Client()
    outcomes: list[StepOutcome] = []
    try:
        if done and journal is not None:
            # One line for the whole resume; each skipped step is listed once, in the result.
            say(
                f"resuming {journal.path}: {len(done)} of {len(plan.steps)} step(s) done in an "
                "earlier run are skipped"
            )
        for index, step in enumerate(plan.steps):
            if step.id in done:
                outcomes.append(StepOutcome(step.id, "skipped"))
                continue
            ctx = GateContext(
                step=step,
                base_url=None,
                new=new,
                settings=options.gates,
                client=http,
                sleep=sleep,
                clock=clock,
                collector_pending=any(s.role == "collector" for s in plan.steps[index + 1 :]),
                recreated_engines={
                    s.container_name or s.service: s.variant
                    for s in plan.steps[:index]
                    if s.role == "engine" and s.action != "down"
                },
                variant_label=plan.variant_label,
                logs=_log_reader(driver, old if step.side == "old" else new, step.service),
                state=_state_reader(driver, old if step.side == "old" else new, step.service),
                launched=_launched(driver, old if step.side == "old" else new, step.service),
                engine_profiles={
                    s.container_name or s.service: step_profile(s.expected_argv)
                    for s in plan.steps[:index]
                    if s.role == "engine" and s.action != "down"
                },
                progress=progress,
            )
            proxy = (
                _ProxyStep(plan, options.gates.health_timeout_s, out_of_proxy.get(step.id))
                if options.proxy_drain and step.role == "engine" and step.service in old.services
                else None
            )
            outcomes.append(
                _run_step(step, driver, old, new, journal, ctx, options.dry_run, say, proxy)
            )
        if journal is not None:
            journal.write("completed")
    finally:
        if own_client:
            http.close()
    return RolloutResult(tuple(outcomes), None if journal is None else journal.path)


def _log_reader(driver: Driver, dep: Deployment, service: str) -> Callable[[], str | None] | None:
    """How the gates read an engine's log, where the driver can (``logs(dep, service)``)."""
    logs = getattr(driver, "logs", None)
    if logs is None:
        return None
    return lambda: logs(dep, service)


def _state_reader(
    driver: Driver, dep: Deployment, service: str
) -> Callable[[], tuple[str, int | None] | None] | None:
    """How the health gate asks whether the engine's container still runs, where the driver
    can say (``container_state(dep, service)``)."""
    state = getattr(driver, "container_state", None)
    if state is None:
        return None
    return lambda: state(dep, service)


def _launched(
    driver: Driver, dep: Deployment, service: str
) -> Callable[[], tuple[list[str], tuple[str, ...]]] | None:
    """What the driver launched in place of the rendered argv, where it says
    (``gate_argv(dep, service)``: the local driver binds a real engine to loopback)."""
    gate_argv = getattr(driver, "gate_argv", None)
    if gate_argv is None:
        return None
    return lambda: gate_argv(dep, service)


def _open_journal(journal: Journal, resume: bool) -> frozenset[str]:
    if not journal.exists():
        journal.write("start")
        return frozenset()
    if not resume:
        raise InputError(
            f"journal {journal.path} exists: this plan was started before",
            location=Location(file=str(journal.path)),
            rule="a rollout never repeats a finished step",
            fix="pass `resume` to continue it, or `journal_path` NEW_PATH for a fresh run",
            params=("resume", "journal_path"),
        )
    state = journal.read()
    if state.unfinished_rollback:
        raise InputError(
            f"step {state.unfinished_rollback} failed and its rollback to OLD did not finish "
            "(the rollback failed, or this rollout was stopped during it)",
            location=Location(file=str(journal.path)),
            rule="a rollout is never resumed over a service in an unknown state",
            fix="restore that step's service by hand from the OLD file (a scoped `docker compose "
            "up -d --no-deps --force-recreate SERVICE`), check it serves, then make a new plan "
            "from the running files and roll that out",
        )
    if state.rolled_back:
        cause = "a failed gate" if state.rolled_back_after == "gate-failed" else "a failed apply"
        raise InputError(
            f"the journal ends with step {state.rolled_back} rolled back after {cause}",
            location=Location(file=str(journal.path)),
            rule="a rollout whose step failed and was rolled back is not resumed: its premise "
            "did not hold",
            fix="fix the cause, then " + _AFTER_ROLLBACK,
            params=("journal_path",),
        )
    journal.write("resume", done=sorted(state.done))
    return state.done


@dataclass(frozen=True)
class _ProxyStep:
    """An engine step's proxy drain: the plan (its proxy service), the time-out, and the
    worker an interrupted run of this step took out (from the journal)."""

    plan: Plan
    timeout_s: float
    known: str | None


def _drain(
    step: Step,
    driver: Driver,
    old: Deployment,
    new: Deployment,
    journal: Journal,
    proxy: _ProxyStep | None,
    say: Callable[[str], None],
) -> tuple[Drained | None, list[str]]:
    """Take the step's replica out of the proxy (journaled), where there is one to steer."""
    if proxy is None:
        return None, []
    try:
        engine_url = driver.endpoint(old, step.service)
    except TierctlError:
        engine_url = "http://127.0.0.1"  # not running: the proxy is looked for on loopback
    admin = find_admin(proxy.plan, new, engine_url)
    if admin is None:
        return None, []
    drained, note = drain_replica(
        step, admin, old.engine_port(step.service), proxy.timeout_s, proxy.known
    )
    if drained is not None and drained.worker != proxy.known:
        journal.write("proxy-drained", step.id, worker=drained.worker, proxy=admin.url)
    say(f"{step.id}: {note}")
    return drained, [note]


def _restore(
    step: Step,
    drained: Drained | None,
    journal: Journal,
    timeout_s: float,
    say: Callable[[str], None],
) -> list[str]:
    if drained is None:
        return []
    note = restore_replica(drained, timeout_s)
    journal.write("proxy-restored", step.id, worker=drained.worker)
    say(f"{step.id}: {note}")
    return [note]


def _run_step(
    step: Step,
    driver: Driver,
    old: Deployment,
    new: Deployment,
    journal: Journal | None,
    ctx: GateContext,
    dry_run: bool,
    say: Callable[[str], None],
    proxy: _ProxyStep | None = None,
) -> StepOutcome:
    side = old if step.side == "old" else new
    if step.action == "down":
        if dry_run:
            say(f"{step.id}: would stop {step.service} with a scoped down of the OLD file")
            return StepOutcome(step.id, "checked")
        assert journal is not None
        journal.write("begin", step.id, action="down", service=step.service)
        # A removed replica leaves the proxy for good: nothing is put back.
        _, notes = _drain(step, driver, old, new, journal, proxy, say)
        driver.down(side, [step.service])
        journal.write("done", step.id, notes=notes)
        say(f"{step.id}: {step.service} stopped")
        return StepOutcome(step.id, "done", tuple(notes))
    if journal is not None:
        journal.write("begin", step.id, action=step.action, service=step.service)
    _check_dry_run(step, driver, side, journal)
    if dry_run:
        say(f"{step.id}: dry run plans exactly {step.service}")
        return StepOutcome(step.id, "checked", ("dry run ok",))
    assert journal is not None
    drained, drain_notes = _drain(step, driver, old, new, journal, proxy, say)
    timeout_s = proxy.timeout_s if proxy is not None else 0.0
    say(f"{step.id}: {step.action} {step.service} from NEW")
    notes = []
    serving = False  # back in the proxy: a failure from here on drains it again first
    try:
        driver.apply(side, [step.service])
        journal.write("applied", step.id)
        if step.gates:
            ctx.base_url = driver.endpoint(side, step.service) if step.role == "engine" else None
            notes = run_gates(ctx, serving=False)
            journal.write("gates-passed", step.id, notes=notes)
        for note in notes:
            say(f"{step.id}: {note}")
        # Put back only after these gates passed: the proxy never routes to an unproven
        # replica. The soak comes after, with the replica serving the proxy's traffic, so its
        # error rate judges real requests.
        notes = drain_notes + notes + _restore(step, drained, journal, timeout_s, say)
        serving = drained is not None
        if any(g in SERVING_GATES for g in step.gates):
            later = run_gates(ctx, serving=True)
            for note in later:
                say(f"{step.id}: {note}")
            if later:  # nothing to note: no soak asked for (`soak_s` 0)
                journal.write("soak-passed", step.id, notes=later)
            notes += later
    except TierctlError as exc:
        journal.write(
            "gate-failed" if isinstance(exc, GateFailed) else "failed", step.id, error=exc.message
        )
        if serving and proxy is not None and drained is not None:
            # The failed replica serves the proxy's traffic: out of it before it is stopped.
            drained, _ = _drain_again(step, drained, old, journal, proxy, say)
        say(f"{step.id}: {exc.message}; rolling {step.service} back to OLD")
        _rollback(step, driver, old, new, journal, say, cause=exc.message)
        message = (
            f"{step.id} failed: {exc.message}; {step.service} was rolled back to OLD and the "
            "rollout stopped, every other service as it was"
        )
        try:
            # OLD serves again: it goes back into the proxy too.
            _restore(step, drained, journal, timeout_s, say)
        except TierctlError as again:
            message += f"; but {again.message} (fix: {again.fix})"
        raise type(exc)(
            message,
            rule=exc.rule,
            value=exc.value,
            fix=_then(exc.fix, _AFTER_ROLLBACK),
            params=(*exc.params, "journal_path"),
        ) from exc
    journal.write("done", step.id, notes=notes)
    return StepOutcome(step.id, "done", tuple(notes))


def _check_dry_run(step: Step, driver: Driver, side: Deployment, journal: Journal | None) -> None:
    """The step's dry run plans exactly its service and removes nothing (journaled if not)."""
    try:
        planned = driver.dry_run(side, [step.service])
    except TierctlError as exc:
        # Nothing was touched yet: journaled as such (not "failed", which would mean a service
        # in an unknown state), so --resume retries this step from its dry run.
        if journal is not None:
            journal.write("dry-run-failed", step.id, error=exc.message)
        raise type(exc)(
            f"{step.id}: the dry run of {step.service} failed, nothing was changed: {exc.message}",
            location=exc.location,
            rule=exc.rule,
            value=exc.value,
            fix=_then(exc.fix, "retry the step with `resume` (nothing was changed)"),
            params=(*exc.params, "resume"),
        ) from exc
    if planned.changed != {step.service} or planned.removed:
        message = (
            f"{step.id}: the dry run plans {sorted(planned.changed) or 'nothing'}"
            + (f" and removes {sorted(planned.removed)}" if planned.removed else "")
            + f", the step plans exactly [{step.service!r}]"
        )
        if journal is not None:
            journal.write(
                "refused", step.id, changed=sorted(planned.changed), removed=sorted(planned.removed)
            )
        raise ContractViolation(
            message,
            rule="a step's dry run plans exactly that step's service and removes nothing",
            value={"changed": sorted(planned.changed), "removed": sorted(planned.removed)},
            fix="find why compose would touch the others (a dependency, an orphan) and re-plan",
        )


def _drain_again(
    step: Step,
    drained: Drained,
    old: Deployment,
    journal: Journal,
    proxy: _ProxyStep,
    say: Callable[[str], None],
) -> tuple[Drained | None, list[str]]:
    """Take a replica that was put back out of the proxy again (its soak failed)."""
    again, note = drain_replica(
        step, drained.proxy, old.engine_port(step.service), proxy.timeout_s, None
    )
    if again is not None:
        journal.write("proxy-drained", step.id, worker=again.worker, proxy=drained.proxy.url)
    say(f"{step.id}: {note}")
    return again, [note]


# A journal that ends in a rollback is not resumed (see _open_journal): what to do instead.
_AFTER_ROLLBACK = (
    "make a new plan from the running files and roll that out (with a new `journal_path`: "
    "this journal ends in a rollback and is not resumed)"
)


def _then(fix: str | None, step: str) -> str:
    """The cause's fix followed by the rollout's next step."""
    return f"{fix}; then {step}" if fix else step


def _unreachable(step: Step, journal: Journal, exc: HostUnreachable, cause: str) -> HostUnreachable:
    """The error for a step whose rollback got no answer from the host (its agent or the
    network to it is down; the step itself most likely failed for the same reason): journaled
    ``unreachable``, which the journal reads as begun, not as a failed rollback, so a resume
    re-runs the step from its dry run once the host answers (its calls are idempotent)."""
    journal.write("unreachable", step.id, error=exc.message)
    return HostUnreachable(
        f"{step.id}: {cause}; then the host stopped answering, so {step.service} could not be "
        f"rolled back and its state there is unknown: {exc.message}",
        rule=exc.rule,
        fix=_then(exc.fix, "resume re-runs this step from its dry run once the host answers"),
        params=(*exc.params, "resume"),
    )


def _rollback(
    step: Step,
    driver: Driver,
    old: Deployment,
    new: Deployment,
    journal: Journal,
    say: Callable[[str], None],
    cause: str = "",
) -> None:
    try:
        if step.service not in old.services:
            driver.down(new, [step.service])
        else:
            driver.apply(old, [step.service])
    except HostUnreachable as exc:
        # The host went away (the step's own failure was most likely the same cause: a call
        # or a gate that could not reach it): a resume re-runs the step once it answers.
        raise _unreachable(step, journal, exc, cause or "the step failed") from exc
    except TierctlError as exc:
        journal.write("rollback-failed", step.id, error=exc.message)
        raise type(exc)(
            f"{step.id}: rolling {step.service} back to OLD failed too: {exc.message}",
            rule=exc.rule,
            fix="restore the service by hand from the OLD file, then make a new plan",
        ) from exc
    journal.write("rolled-back", step.id)
    say(f"{step.id}: {step.service} rolled back to OLD")
