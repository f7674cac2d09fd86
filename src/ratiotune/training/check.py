"""`ratiotune check`: does each searched hyperparameter change training at all?

Before a study spends its budget: for each searched hyperparameter, train one short
step (one epoch on the first two training prompts, which is one update) from the same
seeds at the two ends of its range, and compare the two sets of weights afterwards.
A hyperparameter whose two ends give the same weights cannot change anything the study
measures, so searching it wastes trials. The known case: reward_scale under advantage
normalization, where the scale cancels in the normalized advantage.

Training goes through `trainable.Trial`, the same code path as every search trial.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ratiotune.training.placement import PlacementError, local_devices
from ratiotune.core.study import ParamSpec, Study, StudyError
from ratiotune.training.trainable import Trial

PROBE_PROMPTS = 2
# A hyperparameter "changes training" when the two runs' weights differ by more than
# this fraction of the larger of the two updates. The floor is float32 rounding: the
# same config run twice gives 0 on CPU here, and a value that truly cancels (reward_scale
# under normalization) gives ~1e-6; anything that alters the update at all moves it by
# far more (learning_rate 1e-5 vs 1e-2: ~1). 1e-3 sits three orders above the floor
# and still catches a change of a thousandth of a step.
TOLERANCE = 1e-3


@dataclass
class Probe:
    name: str
    low: float
    high: float
    difference: float  # ||w_low - w_high|| / max(||update_low||, ||update_high||)
    update_norm: float  # the larger update's L2 norm, for scale

    @property
    def changes_training(self) -> bool:
        return self.difference > TOLERANCE


@dataclass
class CheckResult:
    probes: list[Probe]
    repeat_difference: float  # the reference config run twice: the measurement's floor
    reference: dict[str, Any]
    seconds: float
    prompts: int


def check_study(study: Study) -> CheckResult:
    start = time.perf_counter()
    try:
        # Placed as a search trial of this study would be (resources.gpu).
        devices = local_devices(study.resources.gpu)
    except PlacementError as exc:
        raise StudyError(str(exc)) from None
    # Train with the threads a trial gets (Ray sets OMP_NUM_THREADS to its CPUs): on a
    # tiny model, torch's default of one thread per core is ~10x slower on a busy machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, int(study.resources.cpu)))
    try:
        return _check(study, start, devices)
    finally:
        torch.set_num_threads(threads)


def _check(study: Study, start: float, devices: list[str]) -> CheckResult:
    names = study.searched()
    reference = {name: reference_value(name, study.search.space[name]) for name in names}
    with tempfile.TemporaryDirectory(prefix="ratiotune-check-") as tmp:
        probe_study = short_study(study, Path(tmp))
        prompts = len(probe_study.prompts("train"))
        initial, reference_weights = train_once(probe_study, reference, devices)
        _, repeat_weights = train_once(probe_study, reference, devices)
        repeat = relative_difference(initial, reference_weights, repeat_weights)
        del repeat_weights
        probes = []
        for name in names:
            low, high = study.search.space[name].bounds()
            if low == high:
                continue
            runs = []
            for value in (low, high):
                config = {**reference, name: value}
                runs.append(reference_weights if config == reference else train_once(probe_study, config, devices)[1])
            probes.append(Probe(name, low, high, relative_difference(initial, *runs), max(_norm(initial, w) for w in runs)))
    return CheckResult(probes, repeat, reference, time.perf_counter() - start, prompts)


def reference_value(name: str, spec: ParamSpec) -> float:
    """Where the other hyperparameters sit while one is probed.

    The low end of each range (the cheapest run for num_generations and max_new_tokens),
    except learning_rate at the geometric middle of its range: at a tiny learning rate one
    AdamW step (about lr per weight) is only ~1e4 float32 ulps of a 0.02-sized weight, so
    differences between probes would drown in rounding.
    """
    low, high = spec.bounds()
    if name == "learning_rate" and low > 0:
        middle = math.sqrt(low * high)
        if spec.type == "choice":  # the searched value nearest the middle, in log terms
            return min(spec.values, key=lambda v: abs(math.log(v / middle)))
        return middle
    return low


def short_study(study: Study, directory: Path) -> Study:
    """The same study, one epoch over its first PROBE_PROMPTS training prompts."""
    records = study.prompts("train")[:PROBE_PROMPTS]
    path = directory / "probe_prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return study.model_copy(
        update={
            "task": study.task.model_copy(update={"train_prompts": str(path)}),
            "train": study.train.model_copy(update={"epochs": 1}),
        }
    )


def train_once(
    study: Study, config: dict[str, Any], devices: list[str] | None = None
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Weights of both agents before and after one training epoch, from the study's seeds."""
    trial = Trial(study, config, devices=devices)
    before = _weights(trial)
    trial.trainer.run_epoch()  # no eval: only the update matters here
    return before, _weights(trial)


def relative_difference(initial: list[torch.Tensor], a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    scale = max(_norm(initial, a), _norm(initial, b))
    if scale == 0:
        return 0.0 if _norm(a, b) == 0 else math.inf
    return _norm(a, b) / scale


def _weights(trial: Trial) -> list[torch.Tensor]:
    return [p.detach().to("cpu", copy=True) for agent in trial.trainer.agents for p in agent.parameters()]


def _norm(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """L2 norm of a - b over all tensors, accumulated in float64."""
    return math.sqrt(sum(float(((x.double() - y.double()) ** 2).sum()) for x, y in zip(a, b)))


def explain(probe: Probe, study: Study) -> str:
    """The known reason a hyperparameter has no effect, for the flagged ones."""
    if probe.name == "reward_scale" and study.train.advantage_normalization:
        return (
            "advantage normalization divides each group's advantages by their std, so a constant reward "
            "scale cancels; `ratiotune search` holds it at its default (set train.advantage_normalization: false to search it)"
        )
    if probe.name == "reward_scale":
        return "AdamW divides each step by the gradients' running RMS, so a constant reward scale mostly cancels there too"
    return "the two ends of its range train identically from the same seeds; check the range"


def format_check(result: CheckResult, study: Study, source: str) -> str:
    lines = [
        f"ratiotune check {source}: model {study.model.name}, one epoch on {result.prompts} training prompts, "
        f"seed {study.train.seed}",
        "others held at: " + (", ".join(f"{k}={v:g}" for k, v in result.reference.items()) or "(nothing searched)"),
        "difference = ||weights(low) - weights(high)|| / larger update norm; "
        f"no effect below {TOLERANCE:g}; the same config twice: {result.repeat_difference:.1e}",
        "",
    ]
    header = ("hyperparameter", "low", "high", "difference", "verdict")
    rows = []
    for probe in result.probes:
        verdict = "changes training" if probe.changes_training else "NO EFFECT"
        rows.append((probe.name, f"{probe.low:g}", f"{probe.high:g}", f"{probe.difference:.1e}", verdict))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    flagged = [p for p in result.probes if not p.changes_training]
    lines.append("")
    for probe in flagged:
        lines.append(f"warning: {probe.name} has no effect: {explain(probe, study)}")
    if result.repeat_difference > TOLERANCE:
        lines.append(
            f"warning: the same config trained twice differs by {result.repeat_difference:.1e} (> {TOLERANCE:g}): "
            "training is not deterministic here, so the verdicts above are unreliable"
        )
    if not result.probes:
        lines.append("nothing to check: search.space is empty")
    elif not flagged:
        lines.append("every searched hyperparameter changes training")
    lines.append(f"took {result.seconds:.1f} s")
    return "\n".join(lines)
