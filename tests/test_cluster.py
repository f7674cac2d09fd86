"""Scale-out on this machine: several Ray nodes (ray.cluster_utils.Cluster), logical GPUs, placement.

The studies run through `ratiotune search --address` in a subprocess (the driver joins
the test cluster; this process keeps its own Ray session for the other tests). A study
file's trial folders tell what happened: result.json rows carry Ray's timestamps,
time_this_iter_s and iterations_since_restore.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from ratiotune.placement import PlacementError, choose_devices
from ratiotune.results import max_overlap

# --------------------------------------------------------------------------- helpers


def new_cluster(nodes: int, **head_args):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, **head_args})
    workers = [cluster.add_node(num_cpus=1) for _ in range(nodes - 1)]
    cluster.wait_for_nodes()
    return cluster, workers


def trial_rows(experiment: Path) -> dict[str, list[dict]]:
    rows = {}
    for result in sorted(experiment.glob("trial_*/result.json")):
        rows[result.parent.name] = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
    return rows


def busy_intervals(rows: dict[str, list[dict]]) -> list[tuple[float, float]]:
    """(start, end) per trial, from the first report's timestamp minus its duration to the last report."""
    return [(r[0]["timestamp"] - r[0]["time_this_iter_s"], r[-1]["timestamp"]) for r in rows.values() if r]


# --------------------------------------------------------------------------- device choice (pure)


def test_choose_devices_follows_the_gpus_ray_assigned():
    assert choose_devices(0, cuda_available=False) == ["cpu", "cpu"]
    assert choose_devices(1, cuda_available=True) == ["cuda:0", "cuda:0"]  # a whole GPU or a share of one
    assert choose_devices(2, cuda_available=True) == ["cuda:0", "cuda:1"]  # one per agent -> comlrl "mp"
    with pytest.raises(PlacementError, match="no CUDA device"):
        choose_devices(1, cuda_available=False)


def test_two_gpus_use_comlrl_model_parallel(tiny_study):
    """Two distinct devices switch build_trainer to parallel_training="mp" with agent_devices (checked on CPU)."""
    from ratiotune.magrpo import build_trainer
    from ratiotune.models import load_agents
    from ratiotune.study import validate_study
    from ratiotune.task import load_prompts

    study = validate_study(tiny_study)
    agents, tokenizer = load_agents("builtin:tiny")
    kwargs = dict(hyperparameters=study.hyperparameters({}), train=study.train, task=study.task, epochs=1)
    prompts = load_prompts(study.task.train_prompts)
    shared = build_trainer(agents, tokenizer, prompts, **kwargs, devices=["cpu", "cpu"])
    assert shared.args.parallel_training == "none"
    # "cpu" and "cpu:0" are two names comlrl keeps apart, so this exercises its mp path without CUDA.
    split = build_trainer(agents, tokenizer, prompts, **kwargs, devices=["cpu", "cpu:0"])
    assert split.args.parallel_training == "mp"
    assert [str(d) for d in split.agent_devices] == ["cpu", "cpu:0"]


# --------------------------------------------------------------------------- several nodes


@pytest.fixture(scope="module")
def two_nodes():
    """Head and one worker, one CPU each; the head also has one logical GPU (no CUDA behind it)."""
    cluster, _ = new_cluster(2, num_gpus=1)
    yield cluster
    cluster.shutdown()


def test_study_runs_two_trials_at_once_across_two_nodes(two_nodes, tiny_study, write_study, tmp_path):
    tiny_study["search"].update(num_samples=4, max_concurrent_trials=2)
    result = run_cli(
        "search", str(write_study(tiny_study)), "--storage", str(tmp_path / "results"), "--address", two_nodes.address
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 node(s)" in result.stdout
    assert "memory estimate per trial (builtin:tiny, float32" in result.stdout
    rows = trial_rows(tmp_path / "results" / "tiny")
    assert len(rows) == 4 and all(r and r[-1]["epoch"] == 2 for r in rows.values()), rows
    # One CPU per node and one CPU per trial: two trials at once means both nodes trained.
    assert max_overlap(busy_intervals(rows)) == 2
    assert len({r[0]["pid"] for r in rows.values()}) >= 2


def test_trial_given_a_gpu_without_cuda_fails_at_once(two_nodes, tiny_study, write_study, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("the logical GPU would be a real one here (Ray sets CUDA_VISIBLE_DEVICES=0 for the trial)")
    tiny_study["search"].update(num_samples=1, max_failures=0)
    tiny_study["resources"] = {"cpu": 1, "gpu": 1}
    result = run_cli(
        "search", str(write_study(tiny_study)), "--storage", str(tmp_path / "results"), "--address", two_nodes.address
    )
    errors = list((tmp_path / "results" / "tiny").glob("trial_*/error.txt"))
    assert errors, result.stdout[-3000:] + result.stderr[-3000:]
    text = errors[0].read_text()
    assert "PlacementError" in text and "torch sees no CUDA device" in text
    assert "no CUDA device visible to this process: not compared" in result.stdout
    assert not trial_rows(tmp_path / "results" / "tiny").get(errors[0].parent.name)  # not a single epoch ran


def test_removed_node_trial_restarts_on_the_other_node_from_its_checkpoint(tiny_study, write_study, tmp_path):
    cluster, (worker,) = new_cluster(2)
    try:
        # Enough epochs that neither trial can finish in the moment between our poll and the
        # node's removal (a tiny epoch takes ~1 s on a quiet machine; 4 epochs raced).
        epochs = 10
        tiny_study["train"]["epochs"] = epochs
        tiny_study["search"].update(num_samples=2, max_concurrent_trials=2, max_failures=2)
        experiment = tmp_path / "results" / "tiny"
        process = subprocess.Popen(
            [sys.executable, "-m", "ratiotune", "search", str(write_study(tiny_study)),
             "--storage", str(tmp_path / "results"), "--address", cluster.address],
            cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        # Remove the worker once both trials have a checkpoint (>= 1 reported epoch) and are still running.
        deadline = time.time() + 300
        while time.time() < deadline:
            rows = trial_rows(experiment)
            if len(rows) == 2 and all(len(r) >= 1 for r in rows.values()):
                break
            assert process.poll() is None, process.stdout.read()[-3000:]
            time.sleep(0.2)
        else:
            pytest.fail("the two trials never both reported an epoch")
        assert all(len(r) < epochs for r in trial_rows(experiment).values()), "a trial finished before the node went"
        cluster.remove_node(worker, allow_graceful=False)
        # Ray notices the dead node after missed health checks (~30 s), then the trial restarts.
        output, _ = process.communicate(timeout=400)
        assert process.returncode == 0, output[-3000:]
    finally:
        cluster.shutdown()
    rows = trial_rows(experiment)
    seen = [[(x["epoch"], x["pid"], x["iterations_since_restore"]) for x in r] for r in rows.values()]
    assert all(r[-1]["epoch"] == epochs for r in rows.values()), seen
    # The worker's trial reported from two processes (it was restarted on the head) and its
    # epochs never repeat: it went on from its checkpoint instead of starting over.
    restarted = [r for r in rows.values() if len({row["pid"] for row in r}) > 1]
    assert len(restarted) == 1, (seen, output[-3000:])
    assert [row["epoch"] for row in restarted[0]] == list(range(1, epochs + 1)), seen


# --------------------------------------------------------------------------- fractional GPUs


def test_four_trials_at_a_quarter_gpu_share_one_logical_gpu():
    """Ray-level packing with a light trainable (this machine has no CUDA): runs in its own driver."""
    result = subprocess.run(
        [sys.executable, str(Path(__file__)), "pack"], capture_output=True, text=True, timeout=240, cwd=REPO
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(trials) == 4
    assert {t["gpu_ids"] for t in trials} == {"0"} and {t["cuda_visible"] for t in trials} == {"0"}
    assert max_overlap([(t["start"], t["end"]) for t in trials]) == 4


def _pack_driver() -> None:
    import ray
    from ray import tune

    def light(config):
        start = time.time()
        gpu_ids = ",".join(str(i) for i in ray.get_gpu_ids())
        time.sleep(8)  # long enough that four trials started one by one would not overlap by chance
        tune.report({"start": start, "end": time.time(), "gpu_ids": gpu_ids,
                     "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")})

    ray.init(address="local", num_cpus=4, num_gpus=1, include_dashboard=False, logging_level="WARNING")
    tuner = tune.Tuner(
        tune.with_resources(light, {"cpu": 0.5, "gpu": 0.25}),
        param_space={"i": tune.grid_search([0, 1, 2, 3])},
        run_config=tune.RunConfig(storage_path=os.path.join(os.environ.get("TMPDIR", "/tmp"), "ratiotune-pack"), verbose=0),
    )
    grid = tuner.fit()
    keys = ("start", "end", "gpu_ids", "cuda_visible")
    print(json.dumps([{k: r.metrics[k] for k in keys} for r in grid]))


if __name__ == "__main__" and sys.argv[1:] == ["pack"]:
    _pack_driver()
