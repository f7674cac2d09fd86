"""`ratiotune train`: one config, trained once, in this process, without Ray Tune.

The check users run before a study (and the original tutorial as a command). It trains
through the same `Trial` as every search trial, so a config behaves here as it does there.
The study's searched hyperparameters get their value from `--set NAME=VALUE` or else from
the `default:` the study declares for them; the resolved study (those values fixed under
`train:`, removed from the space) is written next to the results, so
`ratiotune train DIR/config.yaml` repeats the run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ratiotune.core.wandb_settings import WandbSettings
from ratiotune.core.study import SEARCHABLE, Study, StudyError, apply_override, load_study, validate_study, write_study


def resolve_study(path: str | Path, sets: list[str] | tuple[str, ...] = ()) -> Study:
    """The study with every searched hyperparameter fixed to one value.

    `--set learning_rate=1e-3` (a bare searchable name) fixes that hyperparameter;
    dotted keys (`train.epochs=2`) override study keys exactly as in `search`.
    """
    fixed: dict[str, str] = {}
    overrides: list[str] = []
    for item in sets:
        key, sep, text = item.partition("=")
        if sep and key in SEARCHABLE:
            fixed[key] = text
        else:
            overrides.append(item)
    # Validate the file as written first, so a bad `default:` is reported even when --set covers it.
    study = load_study(path, overrides)
    raw = study.model_dump(mode="json", exclude_none=True)
    space = raw["search"]["space"]
    for name in SEARCHABLE:
        if name in fixed:
            apply_override(raw, f"train.{name}={fixed[name]}")
        elif name in space:
            default = study.search.space[name].default
            if default is None:
                raise StudyError(
                    f"search.space.{name} is searched and has no default: pass --set {name}=VALUE "
                    f"or add `default:` to search.space.{name} in {path}"
                )
            raw["train"][name] = default
        space.pop(name, None)
    raw["search"].pop("baseline", None)  # names searched values, and nothing is searched now
    return validate_study(raw, source=f"{path} (resolved for train)")


def default_output(study: Study) -> Path:
    return Path("results") / f"{study.name}-train-{time.strftime('%Y%m%d-%H%M%S')}"


def train(study: Study, output: Path, wandb: WandbSettings | None = None) -> list[dict[str, Any]]:
    """Train `study`'s one config; write config.yaml, metrics.jsonl, agent_0/ and agent_1/ under `output`."""
    if output.exists():
        raise StudyError(f"{output} already exists; pass another --output (runs are never overwritten)")
    # Import late: torch/transformers take seconds, and bad input should fail before that.
    from ratiotune.training.placement import PlacementError, local_devices
    from ratiotune.training.trainable import Trial

    try:
        # Placed as a search trial of this study would be (resources.gpu), before anything is written.
        devices = local_devices(study.resources.gpu)
    except PlacementError as exc:
        raise StudyError(str(exc)) from None
    output.mkdir(parents=True)
    write_study(output, study, "config.yaml")  # and its prompts under output/prompts/
    hyperparameters = study.hyperparameters({})
    print(f"training {study.name}: " + ", ".join(f"{k}={v:g}" for k, v in hyperparameters.items()) + f" -> {output}")

    run = None
    if wandb is not None:
        import wandb as wandb_lib

        run = wandb_lib.init(
            project=wandb.project,
            entity=wandb.entity,
            name=output.name,
            config=study.model_dump(mode="json", exclude_none=True),
        )

    trial = Trial(study, {}, devices=devices)
    # The numbers people follow, and search.metric: what a search would judge this config by.
    progress = study.metrics().progress  # ..., search/objective last
    shown = list(dict.fromkeys((*progress[:-1], study.search.metric, progress[-1])))
    print(f"agents on {devices[0]} and {devices[1]}")
    history = []
    with open(output / "metrics.jsonl", "w") as log:
        for _ in range(study.train.epochs):
            metrics = trial.run_epoch()
            history.append(metrics)
            log.write(json.dumps(metrics) + "\n")
            log.flush()  # readable while training runs (tail -f)
            if run is not None:
                run.log(metrics, step=metrics["epoch"])
            print(
                f"epoch {metrics['epoch']}/{study.train.epochs}  "
                + "  ".join(f"{name} {metrics[name]:.3f}" for name in shown)
                + f"  ({metrics['system/epoch_seconds']:.1f} s)",
                flush=True,
            )
    # Just the two agents (HF format + tokenizer): no optimizer state, which would triple the size.
    trial.trainer.save_model(str(output))
    if run is not None:
        run.finish()
    print(f"agents: {output / 'agent_0'}, {output / 'agent_1'}")
    return history
