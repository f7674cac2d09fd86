"""The fault matrix: a study killed inside every stage that trains resumes to the verdict it would have had.

Each case is a real SIGKILL of the driver's whole process group (os.killpg; Ray's head and workers
die with it) at a point read from the files Ray and ratiotune write, never from a clock. The
reference is the same tiny study run once without a kill; every run is seeded, so a resumed stage
must give the same figures, and the runs that had finished must not change by a byte. docs/nothing-lost.md
shows the matrix; tests/test_resume.py holds the search's own cases (a kill during the search,
Ctrl-C, crashed and diverged trials).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import yaml

from conftest import SMALL_RACE, run_cli, tiny_study_dict
from test_resume import LOCAL_RAY, kill_group, saved_state, start_cli, wait_for

RETRAIN_EPOCHS = 3  # a run's checkpoint after epoch 1 or 2 leaves it unfinished: the kill's window


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """A search (3 trials x 2 epochs) and its race: round-0 (the baseline and 2 challengers on seeds
    1-2: 6 runs), then confirm (2 configs on seeds 3-4: 4 runs)."""
    root = tmp_path_factory.mktemp("faults")
    study = tiny_study_dict(
        root / "prompts",
        search={"num_samples": 3, "max_concurrent_trials": 2, "objective_window": 2},
        race=SMALL_RACE,
    )
    (root / "study.yaml").write_text(yaml.safe_dump(study))
    done = run_cli("search", str(root / "study.yaml"), "--storage", str(root / "results"), "--name", "exp", env=LOCAL_RAY)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "results" / "exp"


def verdict(summary_file: Path, experiment: Path) -> dict:
    """What the race decided and every figure it decided on (its compute times aside), the paths of
    its agents relative to the experiment (the killed study is a copy of the reference)."""
    summary = json.loads(summary_file.read_text().replace(str(experiment), "EXPERIMENT"))
    return {key: value for key, value in summary.items() if key != "compute"}


def ended_runs(stage: Path) -> dict[str, bytes]:
    """The stage's runs that Ray's saved state calls finished, with their result.json bytes."""
    return {
        name: (stage / name / "result.json").read_bytes()
        for name, (status, _) in saved_state(stage).items()
        if status == "TERMINATED"
    }


def some_ended_some_not(stage: Path, with_checkpoint: bool = False):
    """Ray's saved state for the stage (what `resume` will read) has a finished run and an unfinished
    one (with a checkpoint, if asked): the kill point 'inside the stage, some runs finished'."""

    def condition() -> bool:
        if (stage / "round.json").is_file():
            pytest.fail(f"{stage.name} ended before the kill point was seen")
        try:
            saved = list(saved_state(stage).values())
        except (IndexError, ValueError, FileNotFoundError):
            return False  # not written yet, or being written
        unfinished = [e for s, e in saved if s != "TERMINATED" and (e > 0 or not with_checkpoint)]
        return any(s == "TERMINATED" for s, _ in saved) and bool(unfinished)

    return condition


def kill_inside(args: list[str], stage: Path, log: Path, with_checkpoint: bool = False) -> dict[str, bytes]:
    """Run `ratiotune ARGS`, SIGKILL its process group inside `stage`; the runs that had ended."""
    driver = start_cli(*args, log=log)
    try:
        wait_for(some_ended_some_not(stage, with_checkpoint), driver, log, what=f"a run of {stage.name} ended, one not")
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=60)
    finally:
        kill_group(driver)
    assert driver.returncode == -signal.SIGKILL
    assert not (stage / "round.json").is_file()  # killed inside the stage, not after it
    return ended_runs(stage)


def assert_clean(result) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]


def test_a_race_killed_inside_each_stage_resumes_to_the_verdict_of_the_race_run_without_a_kill(reference, tmp_path):
    # After the search, before the race: the search has ended (finished.json), no stage has started.
    killed = tmp_path / "exp"
    shutil.copytree(reference, killed, ignore=shutil.ignore_patterns("race"))
    race = killed / "race"

    round0 = kill_inside(["resume", str(killed)], race / "round-0", tmp_path / "resume-1.log")
    confirm = kill_inside(["resume", str(killed)], race / "confirm", tmp_path / "resume-2.log")
    assert (race / "round-0" / "round.json").is_file()  # round-0 ended before the second kill
    resumed = run_cli("resume", str(killed), env=LOCAL_RAY)
    assert_clean(resumed)

    # The runs that had ended were read back, not trained again.
    for stage, ended in (("round-0", round0), ("confirm", confirm)):
        assert ended, stage
        for name, data in ended.items():
            assert (race / stage / name / "result.json").read_bytes() == data, (stage, name)
    # Every run trained with the values planned for it (the bug: Ray's placeholders), and the verdict
    # and every per-seed figure are those of the race that ran without a kill.
    for params in race.glob("*/c*_seed*/params.json"):
        config = json.loads(params.read_text())
        assert all(not isinstance(v, list) for v in config.values()), (params, config)
    expected = verdict(reference / "race" / "summary.json", reference)
    assert verdict(race / "summary.json", killed) == expected
    assert f"race details: {race / 'summary.md'}" in resumed.stdout

    # Killed after the last run ended, before the stage was marked and the summary written (the
    # files a kill there leaves: a window too short to aim a signal at). No run trains again.
    confirm_bytes = {p: p.read_bytes() for p in (race / "confirm").glob("*/result.json")}
    for name in ("summary.json", "summary.md", "confirm/round.json"):
        (race / name).unlink()
    again = run_cli("resume", str(killed), env=LOCAL_RAY)
    assert_clean(again)
    assert verdict(race / "summary.json", killed) == expected
    assert {p: p.read_bytes() for p in (race / "confirm").glob("*/result.json")} == confirm_bytes

    # A finished study: one line, nothing changed.
    before = {p: p.stat().st_mtime_ns for p in killed.rglob("*") if p.is_file()}
    finished = run_cli("resume", str(killed), env=LOCAL_RAY, timeout=120)
    assert_clean(finished)
    assert finished.stdout.strip().splitlines() == [
        f"{killed}: the study has finished (3 trials), and so has its race; nothing to resume"
    ]
    assert {p: p.stat().st_mtime_ns for p in killed.rglob("*") if p.is_file()} == before


def test_a_retrain_killed_with_a_checkpoint_cut_short_resumes_to_the_figures_of_one_run_without_a_kill(reference, tmp_path):
    flags = ["--seeds", "3", "--epochs", str(RETRAIN_EPOCHS)]
    plain = run_cli("retrain", str(reference), *flags, "--output", str(tmp_path / "plain"), env=LOCAL_RAY)
    assert_clean(plain)

    output = tmp_path / "killed"
    args = ["retrain", str(reference), *flags, "--output", str(output)]
    runs = output / "runs"
    ended = kill_inside(args, runs, tmp_path / "retrain.log", with_checkpoint=True)
    # The newest checkpoint of an unfinished run, half-written: what a kill during its copy leaves.
    unfinished = [n for n, (status, epoch) in saved_state(runs).items() if status != "TERMINATED" and epoch > 0]
    newest = sorted((runs / unfinished[0]).glob("checkpoint_*"))[-1]
    weights = next(newest.glob("agent_0/*.safetensors"))
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])

    # The same command again does not start over: it says how to continue.
    again = run_cli(*args, env=LOCAL_RAY, timeout=120)
    assert again.returncode == 2 and f"continue it with: ratiotune resume {output}" in again.stderr

    resumed = run_cli("resume", str(output), env=LOCAL_RAY)
    assert_clean(resumed)
    assert f"{output}: continuing the retrain" in resumed.stdout
    for name, data in ended.items():
        assert (runs / name / "result.json").read_bytes() == data, name
    # The run whose checkpoint was cut short trained again from its start: each epoch logged again.
    rows = [json.loads(line)["epoch"] for line in (runs / unfinished[0] / "result.json").read_text().splitlines()]
    assert rows[-RETRAIN_EPOCHS:] == list(range(1, RETRAIN_EPOCHS + 1)), rows
    expected = json.loads((tmp_path / "plain" / "summary.json").read_text())
    got = json.loads((output / "summary.json").read_text())
    assert got["configs"] == expected["configs"] and got["report_seeds"] == expected["report_seeds"]
    assert (output / "final" / "agent_0").is_dir()

    done = run_cli("resume", str(output), env=LOCAL_RAY, timeout=120)
    assert_clean(done)
    assert done.stdout.strip() == f"{output}: the retrain has finished; nothing to resume"


def test_a_trial_folder_cut_short_while_ray_wrote_its_params_is_read_from_its_rows_or_left_out(tmp_path):
    """A kill can land while Ray writes a new trial's params.json (an empty file was seen on a
    fresh-clone run): the resumed stage reads the config from the rows Ray logged, and a folder
    with neither is a trial that never reported, left for the resumed run to train."""
    from ratiotune.core.experiment import load_trial

    reported = tmp_path / "trial_a"
    reported.mkdir()
    (reported / "params.json").write_text("")
    config = {"learning_rate": 1e-3, "contender": 2, "seed": 7}
    (reported / "result.json").write_text(json.dumps({"epoch": 1, "config": config}) + "\n")
    trial = load_trial(reported)
    assert trial is not None and trial.config == config and [r["epoch"] for r in trial.rows] == [1]
    silent = tmp_path / "trial_b"
    silent.mkdir()
    (silent / "params.json").write_text('{"learning_rate": 0.0')  # cut mid-write
    assert load_trial(silent) is None
