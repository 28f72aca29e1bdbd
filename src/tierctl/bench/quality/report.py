"""Reports of the quality lane: JSON (every item), Markdown, a rich table, the agreement PNG.

Written next to the latency A/B (``quality.json``, ``quality.md``, ``quality_agreement.png``).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from tierctl.bench.quality.lane import LaneResult, QualityResult, TaskComparison, TextComparison


def _pct(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _p(x: float) -> str:
    return f"{x:.3g}" if x >= 1e-3 else f"{x:.1e}"


def lane_rows(lane: LaneResult) -> dict[str, str]:
    """The cells of one lane's row, by column name."""
    t = lane.test
    floor = f"{t.floor}/{t.items}"
    cells = {
        "lane": lane.lane,
        "items": str(lane.items),
        "A-B differ": f"{t.differ}/{t.items}",
        "A-A' differ": floor,
        "p (vs floor)": _p(t.p_value),
        "verdict": lane.verdict,
    }
    if lane.kind == "texts":
        ab = lane.token_agreement.get("A-B")
        fl = lane.token_agreement.get("A-A'")
        cells["detail"] = (
            (f"token agreement {_pct(ab[0])} ({_pct(ab[1])}-{_pct(ab[2])})" if ab else "no data")
            + (f", floor {_pct(fl[0])}" if fl else "")
            + _gap_text(lane)
        )
    else:
        acc = lane.accuracy
        parts = [f"{arm} {_pct(iv.rate)}" for arm, iv in acc.items()]
        m = lane.mcnemar
        cells["detail"] = (
            "accuracy "
            + ", ".join(parts)
            + (f"; McNemar A-only {m.a_only} B-only {m.b_only} p {_p(m.p_value)}" if m else "")
        )
    return cells


def _gap_text(lane: LaneResult) -> str:
    ab = lane.max_gap.get("A-B")
    fl = lane.max_gap.get("A-A'")
    if ab is None:
        return ""
    text = f"; largest |Δlogprob| {ab[0]:.3g} ({ab[1]} token {ab[2]})"
    if fl is not None:
        text += f", floor {fl[0]:.3g}"
    return text


_COLUMNS = ("lane", "items", "A-B differ", "A-A' differ", "p (vs floor)", "verdict", "detail")


def quality_table(result: QualityResult) -> Table:
    """The terminal table: one row per lane, and the verdict in the title."""
    floor = "A vs A' measured" if result.floor_measured else "no A' pass: floor taken as 0"
    # Text, not markup: lane names, engine names and tokens come from files and servers.
    table = Table(
        title=Text(
            f"quality: {result.verdict} ({floor}; engines A {result.engines.get('A')}, "
            f"B {result.engines.get('B')})"
        ),
        title_justify="left",
    )
    for c in _COLUMNS:
        table.add_column(c, justify="right" if c in ("items",) else "left")
    for lane in result.lanes:
        cells = lane_rows(lane)
        table.add_row(*(Text(cells[c]) for c in _COLUMNS))
    return table


_MD_TITLE = "# tierctl quality: A vs B against the noise floor"


def quality_markdown(result: QualityResult) -> str:
    """The Markdown report."""
    lines = [
        _MD_TITLE,
        "",
        f"- A: `{result.a_url}` ({result.engines.get('A')})",
        f"- B: `{result.b_url}` ({result.engines.get('B')})",
        f"- passes: {', '.join(result.passes)}"
        + ("" if result.floor_measured else " (no A' pass: the floor is taken as 0)"),
        f"- **verdict: {result.verdict}**",
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "|" + "---|" * len(_COLUMNS),
    ]
    for lane in result.lanes:
        cells = lane_rows(lane)
        lines.append("| " + " | ".join(cells[c].replace("|", "/") for c in _COLUMNS) + " |")
    differing: list[tuple[str, str]] = []
    for lane in result.lanes:
        differing += [(lane.lane, c.item) for c in lane.ab_texts if c.differs]
        differing += [(lane.lane, c.item) for c in lane.ab_tasks if c.differs]
    if differing:
        lines += ["", "## Items where A and B differ", ""]
        lines += [f"- {lane}: {item}" for lane, item in differing[:200]]
        if len(differing) > 200:
            lines.append(f"- ... and {len(differing) - 200} more (see quality.json)")
    if result.errors:
        lines += ["", "## Errors", "", *(f"- {e}" for e in result.errors[:100])]
    return "\n".join(lines) + "\n"


def quality_json(result: QualityResult) -> dict[str, Any]:
    """Everything, per item: the record of truth."""

    def lane_doc(lane: LaneResult) -> dict[str, Any]:
        return {
            "lane": lane.lane,
            "kind": lane.kind,
            "items": lane.items,
            "verdict": lane.verdict,
            "test": {**dataclasses.asdict(lane.test), "above": lane.test.above},
            "accuracy": {
                arm: {**dataclasses.asdict(iv), "rate": iv.rate}
                for arm, iv in lane.accuracy.items()
            },
            "mcnemar": dataclasses.asdict(lane.mcnemar) if lane.mcnemar else None,
            "token_agreement": {
                k: {"rate": v[0], "ci_low": v[1], "ci_high": v[2]}
                for k, v in lane.token_agreement.items()
            },
            "max_logprob_gap": {
                k: {"gap": v[0], "item": v[1], "position": v[2]} for k, v in lane.max_gap.items()
            },
            "mean_logprob_gap": lane.mean_gap,
            "a_vs_b": _rows(lane.ab_texts, lane.ab_tasks),
            "a_vs_a2": _rows(lane.floor_texts, lane.floor_tasks),
        }

    return {
        "kind": "quality",
        "a_url": result.a_url,
        "b_url": result.b_url,
        "engines": result.engines,
        "passes": list(result.passes),
        "floor_measured": result.floor_measured,
        "verdict": result.verdict,
        "above": bool(result.above),
        "lanes": [lane_doc(lane) for lane in result.lanes],
        "errors": list(result.errors),
    }


def _rows(
    texts: tuple[TextComparison, ...], tasks: tuple[TaskComparison, ...]
) -> list[dict[str, Any]]:
    rows = [{**dataclasses.asdict(c), "differs": c.differs} for c in texts]
    rows += [{**dataclasses.asdict(c), "differs": c.differs} for c in tasks]
    return rows


def plot_quality(result: QualityResult, out_dir: Path) -> list[Path]:
    """``quality_agreement.png``: per item, teacher-forced token agreement (A-B and A-A') and
    the largest log-prob gap; per task lane, which items' outputs differ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    texts = [lane for lane in result.lanes if lane.kind == "texts"]
    tasks = [lane for lane in result.lanes if lane.kind == "tasks"]
    rows = (2 if texts else 0) + (1 if tasks else 0)
    if rows == 0:
        return []
    fig, axes = plt.subplots(rows, 1, figsize=(12, 3.2 * rows), constrained_layout=True)
    axs = list(axes) if rows > 1 else [axes]
    k = 0
    if texts:
        lane = texts[0]
        ax = axs[k]
        for name, comps, colour in (
            ("A vs B", lane.ab_texts, "tab:orange"),
            ("A vs A'", lane.floor_texts, "tab:blue"),
        ):
            if comps:
                ys = [c.agree / c.positions if c.positions else 0.0 for c in comps]
                ax.plot(range(len(ys)), ys, "o-", ms=3, lw=0.8, label=name, color=colour)
        ax.set_ylabel("greedy-token agreement")
        ax.set_title(f"teacher-forced agreement per item ({lane.verdict})")
        ax.set_ylim(min(0.9, ax.get_ylim()[0]), 1.005)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax = axs[k + 1]
        for name, comps, colour in (
            ("A vs B", lane.ab_texts, "tab:orange"),
            ("A vs A'", lane.floor_texts, "tab:blue"),
        ):
            if comps:
                ax.plot(
                    range(len(comps)),
                    [c.max_gap for c in comps],
                    "o",
                    ms=3,
                    label=name,
                    color=colour,
                )
        ax.set_ylabel("largest |Δ logprob|")
        ax.set_xlabel("item")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        k += 2
    if tasks:
        ax = axs[k]
        for y, lane in enumerate(tasks):
            ab = [i for i, c in enumerate(lane.ab_tasks) if c.differs]
            fl = [i for i, c in enumerate(lane.floor_tasks) if c.differs]
            ax.scatter(range(lane.items), [y] * lane.items, s=6, color="lightgrey")
            ax.scatter(ab, [y + 0.12] * len(ab), s=14, color="tab:orange", marker="s")
            ax.scatter(fl, [y - 0.12] * len(fl), s=14, color="tab:blue", marker="s")
        ax.set_yticks(range(len(tasks)), [lane.lane for lane in tasks])
        ax.set_xlabel("item (orange: A and B outputs differ; blue: A and A' differ)")
        ax.set_title("task items whose greedy outputs differ")
        ax.grid(alpha=0.3, axis="x")
    path = out_dir / "quality_agreement.png"
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def write_quality(result: QualityResult, out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write ``quality.json``, ``quality.md`` and (with ``plots``) the PNG into ``out_dir``,
    replacing only a quality report tierctl wrote (``paths.write_owned``): both are checked
    before either is written."""
    import json

    from tierctl.paths import resolve_inside, write_owned

    planned = [
        (out_dir / "quality.json", json.dumps(quality_json(result), indent=1, default=str)),
        (out_dir / "quality.md", quality_markdown(result)),
    ]
    for check_only in (True, False):
        for path, text in planned:
            write_owned(
                resolve_inside(out_dir, path.name, field="quality output", inside="its folder"),
                text,
                ours=_is_quality_file,
                what=f"quality {path.suffix[1:]} report",
                force_param=None,
                elsewhere="or give `out_dir` another folder",
                params=("out_dir",),
                check_only=check_only,
            )
    files = [path for path, _ in planned]
    if plots:
        files += plot_quality(result, out_dir)
    return files


def _is_quality_file(text: str) -> bool:
    """Whether a quality.json or quality.md was written by :func:`write_quality`."""
    if text.startswith(_MD_TITLE):
        return True
    import json

    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("kind") == "quality"
