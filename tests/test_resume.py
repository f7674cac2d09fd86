"""Nothing lost: killed drivers, interrupted searches, crashed and diverged trials, bounded disk.

Faults are real: the driver runs in its own process group (start_new_session=True) and
gets real signals (os.killpg SIGKILL, SIGINT); a crashed trial is its Ray worker process
killed with SIGKILL. Nothing in ratiotune knows it is being tested.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from ratiotune.core.experiment import load_experiment
from ratiotune.core.study import validate_study

EPOCHS = 4

# Always a private Ray instance: a plain ray.init() joins any cluster already running on
# this machine (/tmp/ray/ray_current_cluster), e.g. another test session's.
LOCAL_RAY = {"RAY_ADDRESS": "local"}


def start_cli(*args: str, log: Path) -> subprocess.Popen:
    """`ratiotune ARGS...` as the leader of its own process group (so killpg reaches Ray too)."""
    return subprocess.Popen(
        [sys.executable, "-m", "ratiotune", *args],
        cwd=REPO,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **LOCAL_RAY},
        start_new_session=True,
    )


def trial_epochs(experiment_dir: Path) -> dict[str, list[int]]:
    """Epoch column of every trial's result.json, as logged (repeats and all)."""
    epochs = {}
    for result in experiment_dir.glob("trial_*/result.json"):
        rows = []
        for line in result.read_text().splitlines():
            try:
                rows.append(int(json.loads(line)["epoch"]))
            except (ValueError, KeyError):
                pass
        epochs[result.parent.name] = rows
    return epochs


def latest_row_pid(trial_dir: Path) -> int | None:
    """The pid Ray recorded in the trial's last complete result.json row."""
    pid = None
    result = trial_dir / "result.json"
    for line in result.read_text().splitlines() if result.is_file() else []:
        try:
            pid = int(json.loads(line)["pid"])
        except (ValueError, KeyError):
            pass  # a row still being written
    return pid


def saved_state(experiment_dir: Path) -> dict[str, tuple[str, int]]:
    """Trial folder -> (Ray status, epoch of the checkpoint a resume continues from; 0: none),
    from the newest experiment_state file, i.e. what `resume` will see. Decoded with Ray's own
    loader (it unpickles: fine for the folder this test made)."""
    from ray.tune.trainable.metadata import _TrainingRunMetadata

    state = json.loads(sorted(experiment_dir.glob("experiment_state-*.json"))[-1].read_text())
    saved = {}
    for trial_json, metadata_json in state["trial_data"]:
        trial = json.loads(trial_json)
        manager = _TrainingRunMetadata.from_json_state(metadata_json).checkpoint_manager
        latest = manager.latest_checkpoint_result if manager else None
        saved[str(trial.get("relative_logdir") or trial.get("trial_id"))] = (
            trial["status"],
            int(latest.metrics["epoch"]) if latest else 0,
        )
    return saved


def trial_pids(trial_dir: Path) -> set[int]:
    """Every pid Ray recorded in the trial's result.json rows."""
    pids = set()
    result = trial_dir / "result.json"
    for line in result.read_text().splitlines() if result.is_file() else []:
        try:
            pids.add(int(json.loads(line)["pid"]))
        except (ValueError, KeyError):
            pass
    return pids


def checkpoints(trial_dir: Path) -> list[Path]:
    return sorted(p for p in trial_dir.glob("checkpoint_*") if (p / "meta.json").is_file())


def wait_for(condition, process: subprocess.Popen, log: Path, timeout: float = 900, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"driver exited ({process.returncode}) before {what}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"timed out waiting for {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def descendants(pid: int) -> list[int]:
    """PIDs below `pid` in the process tree (read from /proc; Linux only)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def trial_workers(driver_pid: int) -> list[int]:
    """The Ray worker processes under our driver that are running a trial."""
    workers = []
    for pid in descendants(driver_pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "ImplicitFunc" in cmdline:
            workers.append(pid)
    return workers


def optuna_trials(experiment_dir: Path):
    """The trials of the experiment's Optuna study, from the storage optuna.json names."""
    import optuna

    from ratiotune.search.optuna_study import open_storage, read_record

    location, name = read_record(experiment_dir)
    return optuna.load_study(study_name=name, storage=open_storage(location)).get_trials()


def kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=60)


# --------------------------------------------------------------------------- tests


def test_sigkill_driver_then_resume_loses_nothing(tiny_study, write_study, tmp_path):
    study = {
        **tiny_study,
        "name": "killed",
        "train": {**tiny_study["train"], "epochs": EPOCHS},
        "search": {**tiny_study["search"], "num_samples": 3, "max_concurrent_trials": 2},
        "checkpoint": {"num_to_keep": 1, "keep_best_trials": 1},
    }
    storage = tmp_path / "results"
    log = tmp_path / "search.log"
    driver = start_cli("search", str(write_study(study)), "--storage", str(storage), log=log)
    experiment_dir = storage / "killed"

    def one_finished_one_midway() -> bool:
        """Ray's saved state (what `resume` will read) has a finished trial and an unfinished one
        with a checkpoint. Rows alone would not tell: a row is logged before its checkpoint is
        registered and before the state naming it is saved."""
        if not one_row_each_of_two_trials():
            return False  # cheap check first: the state is only read once it can be true
        try:
            saved = saved_state(experiment_dir).values()
        except (IndexError, ValueError):
            return False  # not written yet, or being written
        return any(s == "TERMINATED" for s, _ in saved) and any(s != "TERMINATED" and 0 < e < EPOCHS for s, e in saved)

    def one_row_each_of_two_trials() -> bool:
        return sum(bool(e) for e in trial_epochs(experiment_dir).values()) >= 2

    try:
        wait_for(one_finished_one_midway, driver, log, what="one finished trial and one with a checkpoint")
        os.killpg(driver.pid, signal.SIGKILL)  # the driver, its Ray head and its trial workers
        driver.wait(timeout=60)
    finally:
        kill_group(driver)
    assert driver.returncode == -signal.SIGKILL

    before = trial_epochs(experiment_dir)
    saved = saved_state(experiment_dir)
    # Finished as far as `resume` knows: Ray's saved state says TERMINATED. A trial whose last
    # row was logged just before the kill may not be: Ray delivers results at least once (the
    # row is logged before its checkpoint is registered and the state saved), so it may train
    # its last epochs again. Which way that falls is the kill's timing; the facts below hold both ways.
    finished = {t for t, (status, _) in saved.items() if status == "TERMINATED"}
    finished_bytes = {t: (experiment_dir / t / "result.json").read_bytes() for t in finished}
    provenance = json.loads((experiment_dir / "provenance.json").read_text())
    assert provenance["search"]["command"][1] == "search"
    assert {"torch", "transformers", "ray", "optuna", "comlrl", "ratiotune"} <= set(provenance["search"]["versions"])
    validate_study(__import__("yaml").safe_load((experiment_dir / "study.yaml").read_text()))

    resumed = run_cli("resume", str(experiment_dir), env=LOCAL_RAY)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    after = trial_epochs(experiment_dir)
    assert len(after) == 3
    by_name = {t.name: t for t in load_experiment(experiment_dir).trials}
    for name, epochs in after.items():  # each epoch once, after load_trial keeps the later of repeats
        assert [row["epoch"] for row in by_name[name].rows] == list(range(1, EPOCHS + 1)), (name, epochs)
        assert epochs[: len(before.get(name, []))] == before.get(name, []), (name, before, after)  # nothing lost
    assert finished, (saved, before)  # the saved state only moves on: what the wait saw still holds
    for name in finished:  # not rerun: not a byte changed
        assert (experiment_dir / name / "result.json").read_bytes() == finished_bytes[name]
    for name, (status, epoch) in saved.items():
        if status != "TERMINATED" and len(after[name]) > len(before.get(name, [])):
            # Continued from the checkpoint the saved state named, not from scratch.
            assert after[name][len(before.get(name, []))] == epoch + 1, (name, saved[name], before, after)
    assert len(json.loads((experiment_dir / "provenance.json").read_text())["resumes"]) == 1

    # keep_best_trials: 1 -> only the best trial still holds checkpoints.
    experiment = load_experiment(experiment_dir)
    best = experiment.ranked()[0].name
    holding = {t.name for t in experiment.trials if list(t.directory.glob("checkpoint_*"))}
    assert holding == {best}
    assert "infeasible (diverged) trials: 0   errored trials: 0" in resumed.stdout

    # The Optuna study (optuna.journal) was continued, not duplicated: one Optuna trial per Ray
    # trial, none left RUNNING by the killed driver, each epoch's objective recorded once.
    stored = optuna_trials(experiment_dir)
    assert len(stored) == 3, [(t.number, t.state, t.user_attrs) for t in stored]
    assert {t.user_attrs["ray_trial_id"] for t in stored} == {name.removeprefix("trial_") for name in after}
    for trial in stored:
        assert trial.state.name == "COMPLETE" and sorted(trial.intermediate_values) == list(range(1, EPOCHS + 1))

    again = run_cli("resume", str(experiment_dir), env=LOCAL_RAY)
    assert again.returncode == 0 and "has finished" in again.stdout, again.stdout + again.stderr


def test_sigint_then_resume_and_a_diverged_trial(tiny_study, write_study, tmp_path):
    """Ctrl-C exits non-zero with the resume hint; the diverged trial ends infeasible, the others finish."""
    study = {
        **tiny_study,
        "name": "interrupted",
        "train": {**tiny_study["train"], "epochs": EPOCHS},
        "search": {
            **tiny_study["search"],
            "num_samples": 3,
            "max_concurrent_trials": 1,
            "sampler": "random",
            # 1e9 blows the weights up within one update; seed 0 draws it for trials 1 and 3.
            "space": {"learning_rate": {"type": "choice", "values": [1e-3, 1e9]}},
        },
    }
    storage = tmp_path / "results"
    log = tmp_path / "search.log"
    driver = start_cli("search", str(write_study(study)), "--storage", str(storage), log=log)
    experiment_dir = storage / "interrupted"
    try:
        wait_for(lambda: any(checkpoints(d) for d in experiment_dir.glob("trial_*")), driver, log, what="a checkpoint")
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=180)
    finally:
        kill_group(driver)
    output = log.read_text()
    assert driver.returncode not in (0, None), output[-3000:]
    assert f"ratiotune resume {experiment_dir}" in output.splitlines()[-1] or f"ratiotune resume {experiment_dir}" in output

    resumed = run_cli("resume", str(experiment_dir), env=LOCAL_RAY)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    experiment = load_experiment(experiment_dir)
    assert len(experiment.trials) == 3
    statuses = sorted(t.status(EPOCHS) for t in experiment.trials)
    assert "infeasible" in statuses and "finished" in statuses, statuses
    for trial in experiment.trials:
        if trial.status(EPOCHS) == "finished":
            assert trial.epochs == EPOCHS
        else:
            assert trial.config["learning_rate"] == 1e9
            assert "non-finite" in trial.infeasible_reason
            assert trial.epochs < EPOCHS  # stopped instead of training on
    infeasible = statuses.count("infeasible")
    assert f"infeasible (diverged) trials: {infeasible}" in resumed.stdout
    stored = sorted(t.state.name for t in optuna_trials(experiment_dir))
    assert stored == sorted("FAIL" if s == "infeasible" else "COMPLETE" for s in statuses), stored


def test_crashed_trial_is_retried_then_errored(tiny_study, write_study, tmp_path):
    """A trial process killed once restarts from its checkpoint; one killed on every try is errored."""
    # 8 epochs: each trial is killed when its second row is seen, so it still has 6 (~6 s or
    # more) to train: the poll would have to stall that long for the trial to finish first.
    epochs = 8
    study = {
        **tiny_study,
        "name": "crashes",
        "train": {**tiny_study["train"], "epochs": epochs},
        "search": {**tiny_study["search"], "num_samples": 2, "max_concurrent_trials": 1, "max_failures": 1},
    }
    storage = tmp_path / "results"
    log = tmp_path / "search.log"
    driver = start_cli("search", str(write_study(study)), "--storage", str(storage), log=log)
    experiment_dir = storage / "crashes"
    killed: list[int] = []
    started: list[Path] = []

    def kill_running_trial_after_a_checkpoint(trial_index: int) -> bool:
        """Once trial number `trial_index` (by start order) has logged two rows, SIGKILL its worker.

        Two rows, not a checkpoint folder: the folder is written before the row, and the
        checkpoint is registered (what a restart continues from) only after the row is logged;
        the second epoch runs only once the first's checkpoint is registered. The worker is the
        process that wrote the trial's latest row (Ray stamps each row with its pid): killing
        every worker under the driver could also hit the previous trial's, still exiting.
        """
        # Start order = the order their folders first appeared (one trial runs at a time). Not
        # params.json's mtime: Ray rewrites it when a trial restarts, which reorders them.
        new = [p.parent for p in sorted(experiment_dir.glob("trial_*/params.json"), key=lambda p: p.stat().st_mtime)]
        started.extend(t for t in new if t not in started)
        trials = started
        if len(trials) <= trial_index or len(trial_epochs(experiment_dir).get(trials[trial_index].name, [])) < 2:
            return False
        pid = latest_row_pid(trials[trial_index])
        if pid is None or pid in killed or pid not in trial_workers(driver.pid):
            return False  # no row yet from a live worker of this try
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        return True

    def kill_restarted_trial() -> bool:
        """SIGKILL trial 2's next worker as soon as it exists, before it can train at all.

        One trial runs at a time, so a live trial worker that is neither one we killed nor one
        that reported for trial 1 is trial 2's restart. Not waiting for its first row means it
        cannot finish its remaining epochs before we get to it, however fast it trains.
        """
        done = {int(row_pid) for row_pid in trial_pids(started[0])} | set(killed)
        fresh = [pid for pid in trial_workers(driver.pid) if pid not in done]
        if not fresh:
            return False
        os.kill(fresh[0], signal.SIGKILL)
        killed.append(fresh[0])
        return True

    try:
        # First trial: killed once, retried from its checkpoint (max_failures: 1).
        wait_for(lambda: kill_running_trial_after_a_checkpoint(0), driver, log, what="trial 1 checkpoint")
        # Second trial: killed, then killed again after its restart -> errored.
        wait_for(lambda: kill_running_trial_after_a_checkpoint(1), driver, log, what="trial 2 checkpoint")
        wait_for(kill_restarted_trial, driver, log, what="trial 2 restart")
        driver.wait(timeout=240)
    finally:
        kill_group(driver)
    output = log.read_text()
    assert driver.returncode == 0, output[-3000:]

    experiment = load_experiment(experiment_dir)
    by_name = {t.name: t for t in experiment.trials}
    first, second = (by_name[t.name] for t in started)
    assert first.status(epochs) == "finished" and first.epochs == epochs
    assert trial_epochs(experiment_dir)[first.name].count(1) == 1  # resumed, not restarted
    assert second.status(epochs) == "errored" and second.error
    assert "errored trials: 1" in output


# --------------------------------------------------------------------------- in-process checks (no Ray)


def test_a_trial_ray_gave_up_on_is_errored_even_if_ray_still_lists_it_running(tmp_path):
    """Ray's last experiment_state can list a trial that failed its final try as RUNNING (seen
    in test_crashed_trial_is_retried_then_errored); error.txt's failure count decides."""
    from ratiotune.core.experiment import ERRORED, FINISHED, UNFINISHED, TrialResult

    def failures(n: int) -> str:
        return "".join(f"Failure # {i} (occurred at 2026-12-02_21-43-4{i})\nRayActorError\n\n" for i in range(1, n + 1))

    def trial(error: str | None) -> TrialResult:
        rows = [{"epoch": 1}, {"epoch": 2}]
        return TrialResult("t", tmp_path, {}, rows, error=error, ray_status="RUNNING", max_failures=1)

    assert trial(failures(2)).status(8) == ERRORED  # 1 retry allowed, 2 failures: Ray gave up
    assert trial(failures(1)).status(8) == UNFINISHED  # retried once and running again
    assert trial(None).status(8) == UNFINISHED
    assert trial(failures(2)).status(2) == FINISHED  # reached its epochs, whatever came before


def test_diverged_trial_stops_with_a_reason_and_writes_no_checkpoint(tiny_study):
    from ratiotune.training.trainable import Trial

    diverging = validate_study({**tiny_study, "train": {**tiny_study["train"], "learning_rate": 1e9}})
    trial = Trial(diverging, {})
    metrics = trial.run_epoch()
    assert metrics["infeasible"] == 1 and "non-finite" in metrics["infeasible_reason"]
    assert metrics["eval/in_range_fraction"] != metrics["eval/in_range_fraction"]  # NaN: never a score

    healthy = Trial(validate_study(tiny_study), {}).run_epoch()
    assert healthy["infeasible"] == 0 and 0.0 <= healthy["eval/in_range_fraction"] <= 1.0


def test_a_checkpoint_cut_short_is_not_used(tiny_study, tmp_path):
    from ratiotune.core.experiment import checkpoint_is_complete
    from ratiotune.training.trainable import Trial

    trial = Trial(validate_study(tiny_study), {})
    for epoch in range(2):  # the second save once failed to load: save_model mutated the config
        trial.run_epoch()
        checkpoint = tmp_path / f"checkpoint_00000{epoch}"
        trial.save(checkpoint, {"eval/in_range_fraction": 0.5})
    assert checkpoint_is_complete(checkpoint)
    fresh = Trial(validate_study(tiny_study), {})
    fresh.restore(checkpoint)
    assert fresh.epoch == 2
    weights = next(checkpoint.glob("agent_0/*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])  # what a kill during Ray's copy leaves
    assert not checkpoint_is_complete(checkpoint)
    with pytest.raises(RuntimeError, match="incomplete"):
        Trial(validate_study(tiny_study), {}).restore(checkpoint)


def test_resume_refuses_a_folder_that_is_not_an_experiment(tmp_path, capsys):
    from ratiotune.cli import main

    assert main(["resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "nothing to resume here" in err and "study.yaml" in err and "retrain.json" in err and "Traceback" not in err
    assert main(["resume", str(tmp_path / "absent")]) == 2
    assert "no such experiment folder" in capsys.readouterr().err


def test_resume_of_another_layouts_experiment_is_one_line(tmp_path, monkeypatch):
    """Ray's pickles name ratiotune's modules: a folder written before the layout by layer names
    ones this ratiotune lacks. The answer is a StudyError (one line, exit 2), not a traceback."""
    from ray import tune

    from ratiotune.core.study import StudyError
    from ratiotune.search import resume

    def restore(path, **kwargs):
        raise ModuleNotFoundError("No module named 'ratiotune.optuna_study'", name="ratiotune.optuna_study")

    monkeypatch.setattr(tune.Tuner, "can_restore", staticmethod(lambda path: True))
    monkeypatch.setattr(tune.Tuner, "restore", staticmethod(restore))
    study = validate_study({"name": "old", "train": {"epochs": 1}})
    with pytest.raises(StudyError, match=r"names ratiotune\.optuna_study, which this ratiotune lacks"):
        resume.restore_tuner(study, tmp_path, retry_errored=True)

    # Any other missing module is not ours to explain: it propagates as it is.
    def restore_other(path, **kwargs):
        raise ModuleNotFoundError("No module named 'my_task'", name="my_task")

    monkeypatch.setattr(tune.Tuner, "restore", staticmethod(restore_other))
    with pytest.raises(ModuleNotFoundError):
        resume.restore_tuner(study, tmp_path, retry_errored=True)


def test_a_trial_killed_for_memory_ends_in_one_line_with_the_resume_hint(tmp_path):
    """Ray's memory monitor killing a trial's process as it starts makes Tune's fit() raise a RuntimeError
    (seen on a 24 GB machine running two SmolLM2 trials beside other work); the user gets one line."""
    from ratiotune.search import resume as resuming
    from ratiotune.search.study_run import RunStopped, out_of_memory

    ray_message = (
        "1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 192.0.2.2, ID: 8f) "
        "was 22.43GB used / 23.54GB limit (0.952759)"
    )

    def fit():
        try:
            raise MemoryError(ray_message)  # stands for ray.exceptions.OutOfMemoryError, the cause Tune wraps
        except MemoryError as cause:
            raise RuntimeError(f"Caught unexpected exception: {ray_message}") from cause

    with pytest.raises(resuming.OutOfMemory) as caught:
        with resuming.memory_kills_named():
            fit()
    assert caught.value.reason == "Ray stopped a trial's process: this machine ran low on memory (22.43GB used of 23.54GB)"
    stopped = out_of_memory(caught.value, tmp_path / "exp")
    assert isinstance(stopped, RunStopped) and stopped.exit_code == 1
    assert stopped.line.startswith("ratiotune: error: Ray stopped a trial's process")
    assert stopped.line.endswith(f"then continue it with: ratiotune resume {tmp_path / 'exp'}")
    # Any other error of fit() is not hidden.
    with pytest.raises(RuntimeError, match="something else"):
        with resuming.memory_kills_named():
            raise RuntimeError("something else")
