"""A retrain's words: its summary.md (what `retrain` writes beside summary.json)."""

from __future__ import annotations

from typing import Any

from ratiotune.core.hyperparameters import SHORT_NAMES
from ratiotune.core.stats import format_interval, format_share


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def summary_markdown(summary: dict[str, Any]) -> str:
    metric = summary["metric"]
    honest = summary["honest_metric"]
    protocol = summary["eval_protocol"]
    source = (
        "the race's recommendation, then its survivors"
        if summary["candidates_from"] == "race"
        else "the search's top configs (no finished race: its ranking is optimistic)"
    )
    select, report = summary["selection_seeds"], summary["report_seeds"]
    lines = [
        f"# Retrain of {summary['experiment']}",
        "",
        f"Candidates: {source}. "
        + (
            f"Selected on seeds {', '.join(map(str, select))} ({metric}, {protocol['prompts']}); "
            if select
            else "One candidate: nothing selected; "
        )
        + f"reported on seeds {', '.join(map(str, report))} ({honest}, {protocol['test_prompts']}), which selected nothing. "
        + (
            f"{summary['epochs']} more epochs from each trial's best checkpoint"
            if summary["from_checkpoint"]
            else f"{summary['epochs']} epochs from scratch"
        )
        + f"; final epoch only, {protocol['samples_per_prompt']} answer pairs per prompt (the search used "
        f"{protocol['search_samples_per_prompt']}). A diverged or errored run scores the worst value and counts in n.",
        "",
        "| rank | search trial | " + " | ".join(SHORT_NAMES.values()) + f" | search {metric} (optimistic) | "
        f"selection {metric} | report {honest} |",
        "|" + "---|" * (len(SHORT_NAMES) + 5),
    ]
    for c in summary["configs"]:
        hp = c["hyperparameters"]
        selection = format_interval(c["selection"]["stats"][metric]) if c.get("selection") else "-"
        cells = [
            str(c["rank"]),
            c["search_trial"] or "(baseline)",
            f"{hp['learning_rate']:.3g}",
            str(hp["num_generations"]),
            str(hp["max_new_tokens"]),
            f"{hp['reward_scale']:g}",
            _fmt(c["search"].get(metric)),
            selection,
            format_interval(c["stats"][honest]) if c["runs"] else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    w = summary["winner"]
    winner = next(c for c in summary["configs"] if c["rank"] == w["rank"])
    stats, figure = winner["stats"].get(honest), winner["search"].get(metric)
    failed = [r for c in summary["configs"] for r in [*c["runs"], *((c.get("selection") or {}).get("runs") or [])] if r["error"]]
    if failed:
        lines += [
            "",
            f"{len(failed)} run(s) failed and count as the worst value: "
            + "; ".join(f"{r['run']}: {r['error']}" for r in failed),
        ]
    collapse = w["collapse"]
    lines += [
        "",
        f"Winner: rank {w['rank']} ({w['search_trial'] or 'the baseline'}); final agents from report seed {w['seed']} "
        f"({w['run']}, the best of the report runs on {metric}).",
        f"Expect {honest}: {format_interval(stats)}; {format_share(collapse['collapsed'], collapse['n'])}.",
    ]
    if len(summary["configs"]) > 1:
        lines.append(
            "The first candidate holds up: it is still the best by mean over the selection seeds."
            if w["search_pick_holds"]
            else f"The first candidate does not hold up: rank {w['rank']} beats it by mean over the selection seeds."
        )
    if stats and stats.get("ci95") and figure is not None:
        low, high = stats["ci95"]
        where = "above" if figure > high else "below" if figure < low else "inside"
        lines.append(
            f"The winner's search figure {figure:.3f} is {where} the 95% CI of its report mean [{low:.3f}, {high:.3f}]"
            + (" (the search was optimistic)." if where == "above" else ".")
        )
    return "\n".join(lines) + "\n"
