"""Population-based training: restoring another trial's checkpoint under a mutated config,
and a real PBT study (Ray Tune PopulationBasedTraining + comlrl on builtin:tiny)."""

import csv

import pytest
import torch
import yaml

from conftest import run_cli, tiny_study_dict
from ratiotune.core.experiment import load_trial
from ratiotune.core.study import StudyError, validate_study
from ratiotune.training.trainable import Trial


def pbt_study(prompt_dir, **scheduler) -> dict:
    return tiny_study_dict(
        prompt_dir,
        train={"epochs": 6},
        search={
            "num_samples": 4,
            "max_concurrent_trials": 2,
            "sampler": "tpe",  # set explicitly: PBT does not use it and says so
            "scheduler": {
                "type": "pbt",
                "perturbation_interval": 2,
                "quantile_fraction": 0.5,
                "resample_probability": 0.5,
                **scheduler,
            },
        },
        checkpoint={"num_to_keep": 1},
    )


def test_restore_from_another_trials_checkpoint_applies_this_trials_config(tiny_study, tmp_path):
    """What a PBT exploit does inside the trainable: the donor's state, this trial's config."""
    study = validate_study({**tiny_study, "train": {**tiny_study["train"], "epochs": 4}})
    donor = Trial(study, {"learning_rate": 1e-3})
    # Saved every epoch, as in a search; exploits copy a trial's latest, not its first, checkpoint.
    for epoch in (1, 2):
        donor.save(tmp_path / f"donor-{epoch}", donor.run_epoch())
    donor_weights = [p.detach().clone() for agent in donor.trainer.agents for p in agent.parameters()]
    donor_moments = [s["exp_avg"].clone() for o in donor.trainer.optimizers for s in o.state.values()]

    # comlrl alone refuses this: "Checkpoint configuration does not match: agent_learning_rate, ...".
    exploiter = Trial(study, {"learning_rate": 3e-4, "num_generations": 4, "max_new_tokens": 6})
    exploiter.restore(tmp_path / "donor-2")

    assert exploiter.epoch == 2
    weights = [p for agent in exploiter.trainer.agents for p in agent.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(donor_weights, weights))
    moments = [s["exp_avg"] for o in exploiter.trainer.optimizers for s in o.state.values()]
    assert donor_moments and all(torch.equal(a, b) for a, b in zip(donor_moments, moments))
    assert len(exploiter.trainer.optimizers) == 2
    for optimizer in exploiter.trainer.optimizers:
        assert [group["lr"] for group in optimizer.param_groups] == [3e-4] * len(optimizer.param_groups)
    args = exploiter.trainer.args
    assert (args.agent_learning_rate, args.num_generations, args.max_new_tokens) == (3e-4, 4, 6)

    continued = exploiter.run_epoch()
    assert continued["epoch"] == 3
    assert continued["system/optimizer_lr"] == 3e-4
    # And the continued trial's own checkpoint restores into a trainer with its config.
    exploiter.save(tmp_path / "exploiter", continued)
    again = Trial(study, {"learning_rate": 3e-4, "num_generations": 4, "max_new_tokens": 6})
    again.restore(tmp_path / "exploiter")
    assert again.epoch == 3


@pytest.mark.parametrize(
    "change, message",
    [
        ({"search": {"space": {"num_generations": {"type": "choice", "values": [2, 4]}}}}, "continuous"),
        ({"search": {"num_samples": 1}}, "population"),
        ({"train": {"epochs": 2}}, "perturbation_interval (2) must be < train.epochs (2)"),
        ({"search": {"scheduler": {"type": "pbt", "quantile_fraction": 0.75}}}, "quantile_fraction"),
    ],
)
def test_pbt_study_validation(tmp_path, change, message):
    raw = pbt_study(tmp_path / "prompts")
    for section, values in change.items():
        raw[section] = {**raw[section], **values}
    with pytest.raises(StudyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_study(raw)


@pytest.fixture(scope="module")
def pbt_experiment(tmp_path_factory):
    """4 trials x 6 epochs, perturbation every 2 epochs, bottom half exploits the top half."""
    root = tmp_path_factory.mktemp("pbt")
    (root / "study.yaml").write_text(yaml.safe_dump(pbt_study(root / "prompts")))
    result = run_cli("search", str(root / "study.yaml"), "--storage", str(root / "results"), "--name", "pbt")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = sorted(d for d in (root / "results" / "pbt").iterdir() if (d / "params.json").is_file())
    # As `report` and `best` read them (one row per epoch).
    rows = {t.name: load_trial(t).rows for t in trials}
    return {"dir": root / "results" / "pbt", "rows": rows, "stderr": result.stderr}


def test_pbt_mutates_the_learning_rate_mid_run(pbt_experiment):
    rows = pbt_experiment["rows"]
    assert len(rows) == 4
    mutated = [name for name, trial in rows.items() if len({row["config"]["learning_rate"] for row in trial}) > 1]
    # Synchronous PBT: at epochs 2 and 4 the bottom 2 of 4 always exploit (and resample or scale lr).
    assert mutated, {name: [r["config"]["learning_rate"] for r in trial] for name, trial in rows.items()}
    for trial in rows.values():
        for row in trial:
            assert 1e-4 <= row["config"]["learning_rate"] <= 1e-2  # perturbations stay in the space
    policy = (pbt_experiment["dir"] / "pbt_global.txt").read_text().splitlines()
    assert len(policy) >= 2  # two exploits per sync point


def test_epochs_continue_after_an_exploit(pbt_experiment):
    # Both of Ray's per-trial files: Ray's own loggers lost the rows before an exploit when its
    # sync was behind (result.json of trial 0 held epochs 5-6 only, in CI); trial_logs.py fixes it.
    for name, rows in pbt_experiment["rows"].items():
        assert [row["epoch"] for row in rows] == [1, 2, 3, 4, 5, 6], name
    for trial in sorted(d for d in pbt_experiment["dir"].iterdir() if (d / "progress.csv").is_file()):
        rows = list(csv.DictReader((trial / "progress.csv").open()))
        assert [int(float(r["epoch"])) for r in rows] == [1, 2, 3, 4, 5, 6], trial.name
        assert [int(r["training_iteration"]) for r in rows] == [1, 2, 3, 4, 5, 6], trial.name


def test_optimizer_lr_follows_the_mutated_config(pbt_experiment):
    for name, trial in pbt_experiment["rows"].items():
        for row in trial:
            assert row["system/optimizer_lr"] == pytest.approx(row["config"]["learning_rate"], rel=1e-12), (
                name,
                row["epoch"],
            )


def test_pbt_says_the_sampler_is_not_used(pbt_experiment):
    assert "search.sampler (tpe) is not used with scheduler.type pbt" in pbt_experiment["stderr"]
