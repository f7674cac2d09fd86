"""The race's words: its lines while it runs, its verdict and headline, race/summary.md.

Pure text from the contenders and the summary (core/race_summary.py). It lives in search/ because
search/race.py prints the lines and writes summary.md; `best`, `report` and the CLI print the same words.
"""

from __future__ import annotations

from typing import Any

from ratiotune.core.hyperparameters import config_text
from ratiotune.core.race_protocol import Race, Stage
from ratiotune.core.race_summary import BASELINE, Contender
from ratiotune.core.stats import format_interval, format_prediction, format_share


def label(name: str, contenders: list[Contender]) -> str:
    """How a log line names a contender: the baseline, or a challenger by its values."""
    if name == BASELINE:
        return "the baseline"
    config = next(c.config for c in contenders if c.name == name)
    return f"challenger {config_text(config)}"


def stage_line(stage: Stage, protocol: Race, contenders: list[Contender]) -> str:
    seeds = sorted({r.seed for r in stage.requests})
    who = sorted({r.contender for r in stage.requests}, key=[c.name for c in contenders].index)
    what = {
        "confirm": "confirmation on the test prompts",
        "confirm-2": "second look: the first fell short, the winner leads on the mean",
    }.get(
        stage.name,
        "fallback: the refused winner collapsed too often; the search's next config"
        if stage.name.startswith("fallback")
        else "selection",
    )
    return (
        f"race {stage.name} ({what}): {'; '.join(label(n, contenders) for n in who)} x seeds "
        f"{', '.join(map(str, seeds))} = {len(stage.requests)} runs"
    )


def decision_text(gate_: dict[str, Any]) -> str:
    """The figure the gate decided on, named with its level: 'one-sided 97.5% lower bound of the paired
    margin 0.012 on 6 seeds (look 1 of up to 4: the whole race errs at most 10%)'."""
    low = gate_.get("margin_lower", gate_.get("margin_lower95"))  # margin_lower95: races before the 90% gate
    if gate_.get("margin") is None:
        return "no baseline to compare with"
    level = f"{gate_.get('confidence', 0.95):.1%}".replace(".0%", "%")
    text = (
        f"one-sided {level} lower bound of the paired margin over the baseline "
        + ("n/a" if low is None else f"{low:.3f}")
        + f" on {gate_['margin']['n']} seeds"
    )
    if "race_confidence" in gate_:
        text += (
            f" (look {gate_['look']} of up to {gate_['max_looks']}: the whole race confirms a config no better "
            f"than the baseline at most {1 - gate_['race_confidence']:.0%} of the time)"
        )
    return text


def verdict(summary: dict[str, Any]) -> str:
    """One line: what the study recommends, and the figure the decision used."""
    g = summary["gate"]
    if g["recommend"]:
        return f"confirmed: {config_text(summary['winner']['config'])}: {decision_text(g)} > 0"
    if summary["recommended"]["which"] == "baseline":
        return f"not confirmed: the baseline stands ({g['reason']})"
    return f"not confirmed: {g['reason']} (the study has no baseline to fall back on)"


def headline(summary: dict[str, Any]) -> list[str]:
    """The lines every command prints: the verdict, then each config's figures named for what they are."""
    w = summary["winner"]
    protocol = summary["protocol"]
    metric = summary["honest_metric"]
    where = (
        f"final epoch {protocol['epoch']}, {protocol['prompts']}, {protocol['samples_per_prompt']} pairs/prompt, "
        f"seeds {', '.join(map(str, summary['seeds']['confirmation']))}"
    )
    lines = [verdict(summary), f"{metric} on fresh seeds ({where}); diverged runs score the worst value and count in n:"]
    for number, passed in enumerate(summary.get("fallbacks", []), start=1):
        # A winner refused for its collapses; the search's next config took its place on the same seeds.
        collapse = passed["collapse"]
        lines.append(
            f"passed over ({number}): {config_text(passed['config'])}: mean {passed['stats']['mean']:.3f}, "
            f"{format_share(collapse['collapsed'], collapse['n'])}; the search's next config raced in its place"
        )

    def config_lines(label: str, entry: dict[str, Any]) -> list[str]:
        values = ", ".join("diverged" if s["value"] is None else f"{s['value']:.3f}" for s in entry["per_seed"])
        collapse = entry["collapse"]
        return [
            f"{label} ({config_text(entry['config'])}): {format_interval(entry['stats'])}",
            f"  per seed: {values}; {format_share(collapse['collapsed'], collapse['n'])}",
        ]

    lines += config_lines("winner" if not summary.get("race_kept_baseline") else "best challenger", w)
    if "baseline" in summary:
        lines += config_lines("baseline", summary["baseline"])
    recommended = summary.get("recommended", {}).get("which")
    if recommended and summary[recommended].get("prediction"):
        lines.append(f"re-run the {recommended} once: {format_prediction(summary[recommended]['prediction'])}")
    if summary.get("margin"):
        margin = summary["margin"]
        lines.append(
            f"margin over the baseline (paired by seed): mean {margin['mean']:.3f} (n={margin['n']})"
            + ("" if summary["gate"]["recommend"] else f"; {decision_text(summary['gate'])}")
        )
    if w["search_score"] is not None:
        lines.append(
            f"selection figure (optimistic: the value it was picked on): search {summary['metric']} objective "
            f"{w['search_score']:.3f}" + (f", race mean {w['race_score']:.3f}" if w.get("race_score") is not None else "")
        )
    if summary["plan"].get("fitted"):
        lines.append(summary["plan"]["fitted"])
    return lines


def summary_markdown(summary: dict[str, Any]) -> str:
    w = summary["winner"]
    selection = summary["selection"]
    lines = [
        "# Race",
        "",
        f"**{verdict(summary)}**",
        "",
        "Race winner: "
        + (
            "the baseline (no challenger beat it)"
            if summary.get("race_kept_baseline")
            else f"{config_text(w['config'])} (search trial {w['search_trial']})"
        )
        + ".",
        "",
        *[f"  - {line.strip()}" if line.startswith("  ") else f"- {line}" for line in headline(summary)[1:]],
        "",
        f"Gate: {summary['gate']['rule']}.",
        "",
        "## Selection (paired fresh seeds; cut = a paired sign test against the incumbent)",
        "",
        f"{selection['runs']} runs of a budget of {selection['budget']}; stopped: {selection['stop_reason']}.",
    ]
    if selection["rounds"]:
        lines += [
            "",
            "| round | config | search trial | status | seeds | mean | per seed | vs incumbent (wins/losses/ties, p) |",
            "|---|---|---|---|---|---|---|---|",
        ]
    contenders = selection["contenders"]
    for entry in selection["rounds"]:
        for row in entry["standings"]:
            name = row["contender"]
            mean = "n/a" if row["mean"] is None else f"{row['mean']:.3f}"
            per_seed = ", ".join(f"{v:.3f}" + ("*" if s in row["diverged"] else "") for s, v in zip(row["seeds"], row["values"]))
            status = "cut" if name in entry["cut"] else row["status"]
            vs = row.get("vs_incumbent")
            test = f"{vs['wins']}/{vs['losses']}/{vs['ties']}, p {vs['p_worse']:.3f}" if vs else ""
            lines.append(
                f"| {entry['round']} | {config_text(contenders[name]['config'])} | {name} | {status} | "
                f"{', '.join(map(str, row['seeds']))} | {mean} | {per_seed} | {test} |"
            )
    if selection["rounds"]:
        lines += ["", "(* diverged or errored: scored as the worst value)"]
    agents = summary["recommended"]["agents"]
    if agents:
        lines += ["", f"## Agents ({summary['recommended']['which']}: its confirmation runs' final agents)", ""]
        lines += [f"- `{path}`" for path in agents]
    c = summary.get("compute")
    if c:
        lines += [
            "",
            f"Compute: search {c['search_trial_epochs']} trial-epochs, race {c['race_trial_epochs']} "
            f"trial-epochs in {c['race_runs']} runs.",
        ]
    return "\n".join(lines) + "\n"
