"""The search's Optuna study in a real Optuna storage, and `ratiotune dashboard` over HTTP.

Real Ray, real Optuna, real optuna-dashboard on builtin:tiny; the dashboard is a `ratiotune
dashboard` process on a free loopback port, read through its JSON API as the browser does.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from conftest import REPO, run_cli, tiny_study_dict
from ratiotune.cli import main
from ratiotune.search.optuna_study import JOURNAL_FILE, OPTUNA_FILE, StoredOptunaSearch, open_storage, read_record

EPOCHS = 3
SAMPLES = 4


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """4 trials x 3 epochs, one at a time, under ASHA (grace 1): a learning rate of 1e9 diverges
    (infeasible: FAIL), ASHA may stop a weak trial after an epoch (PRUNED), the rest finish."""
    root = tmp_path_factory.mktemp("optuna")
    study = tiny_study_dict(
        root / "prompts",
        train={"epochs": EPOCHS},
        search={
            "num_samples": SAMPLES,
            "max_concurrent_trials": 1,
            "sampler": "random",
            "objective_window": 2,
            "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
            "space": {"learning_rate": {"type": "choice", "values": [1e-4, 1e-3, 1e9]}},
        },
    )
    (root / "study.yaml").write_text(yaml.safe_dump(study))
    result = run_cli("search", str(root / "study.yaml"), "--storage", str(root / "results"), "--name", "watched")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "results" / "watched"


def ray_rows(trial_dir: Path) -> list[dict]:
    """result.json rows, the later of a repeated epoch kept (as core/experiment.py reads them)."""
    by_epoch = {}
    for line in (trial_dir / "result.json").read_text().splitlines():
        row = json.loads(line)
        by_epoch[row["training_iteration"]] = row
    return [by_epoch[k] for k in sorted(by_epoch)]


def stored_trials(experiment_dir: Path):
    location, name = read_record(experiment_dir)
    return optuna.load_study(study_name=name, storage=open_storage(location)).get_trials()


def test_every_search_writes_its_study_to_a_journal_in_the_folder(experiment):
    assert json.loads((experiment / OPTUNA_FILE).read_text()) == {"storage": JOURNAL_FILE, "study_name": "watched"}
    assert (experiment / JOURNAL_FILE).is_file()
    trials = stored_trials(experiment)
    assert len(trials) == SAMPLES
    assert {t.user_attrs["ray_trial_id"] for t in trials} == {d.name.removeprefix("trial_") for d in experiment.glob("trial_*")}


def test_states_values_and_intermediate_values_match_what_the_trials_reported(experiment):
    states = set()
    for trial in stored_trials(experiment):
        trial_dir = Path(trial.user_attrs["trial_dir"])
        assert trial_dir.parent == experiment and trial_dir.is_dir()
        rows = ray_rows(trial_dir)
        objectives = {row["training_iteration"]: row["search/objective"] for row in rows}
        # Every epoch's objective, the value the searcher gets, NaN (diverged) included.
        assert trial.intermediate_values.keys() == objectives.keys()
        for step, value in objectives.items():
            assert (math.isnan(value) and math.isnan(trial.intermediate_values[step])) or trial.intermediate_values[step] == value
        last = rows[-1]["search/objective"]
        if not math.isfinite(last):
            assert trial.state == TrialState.FAIL and trial.params["learning_rate"] == 1e9
            assert "non-finite" in trial.user_attrs["failure"]
        elif len(rows) < EPOCHS:
            assert trial.state == TrialState.PRUNED and trial.value == last  # ASHA stopped it
        else:
            assert trial.state == TrialState.COMPLETE and trial.value == last
        assert trial.user_attrs["epochs"] == len(rows)
        states.add(trial.state)
    assert TrialState.COMPLETE in states
    first = min(stored_trials(experiment), key=lambda t: t.number)
    assert first.params == {"learning_rate": 1e-3}  # the baseline (train.learning_rate), enqueued once


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def start_dashboard(experiment_dir: Path) -> tuple[subprocess.Popen, int]:
    """`ratiotune dashboard` on a free loopback port, once its API answers."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ratiotune", "dashboard", str(experiment_dir), "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120  # only a guard against a hang
    while True:
        try:
            get_json(f"http://127.0.0.1:{port}/api/studies")
            return server, port
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop(server)
                pytest.fail(f"dashboard did not start: {server.communicate()}")
            time.sleep(0.2)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


def served_study(port: int, name: str) -> tuple[int, dict]:
    [summary] = [s for s in get_json(f"http://127.0.0.1:{port}/api/studies")["study_summaries"] if s["study_name"] == name]
    return summary["study_id"], get_json(f"http://127.0.0.1:{port}/api/studies/{summary['study_id']}?after=0")


def test_dashboard_serves_the_study_over_http_and_stops_on_ctrl_c(experiment):
    server, port = start_dashboard(experiment)
    try:
        study_id, detail = served_study(port, "watched")
        served = {t["number"]: t for t in detail["trials"]}
        stored = {t.number: t for t in stored_trials(experiment)}
        assert served.keys() == stored.keys() and len(served) == SAMPLES
        for number, trial in stored.items():
            assert served[number]["state"] == trial.state.name.capitalize()
            steps = [v["step"] for v in served[number]["intermediate_values"]]
            assert steps == sorted(trial.intermediate_values)
        server.send_signal(signal.SIGINT)
        stdout, stderr = server.communicate(timeout=60)
    finally:
        stop(server)
    assert server.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert f"http://127.0.0.1:{port}/dashboard/studies/{study_id}" in stdout


def test_a_search_on_a_sqlite_url_is_watched_live_and_its_name_is_taken(tiny_study, write_study, tmp_path):
    """--optuna-storage puts the study in that database (not the journal), the dashboard shows it while
    the search runs, and the name is then taken in that database. One search for the three facts."""
    # 400 epochs: still running when the dashboard has started (the test kills it then).
    study = {
        **tiny_study,
        "train": {**tiny_study["train"], "epochs": 400},
        "search": {**tiny_study["search"], "num_samples": 1, "max_concurrent_trials": 1},
    }
    path = write_study(study)
    database = f"sqlite:///{tmp_path / 'studies.db'}"
    experiment = tmp_path / "results" / "live"
    log = tmp_path / "search.log"
    search = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ratiotune",
            "search",
            str(path),
            "--storage",
            str(tmp_path / "results"),
            "--name",
            "live",
            "--optuna-storage",
            database,
        ],
        cwd=REPO,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "RAY_ADDRESS": "local"},
        start_new_session=True,
    )
    server = None
    try:
        deadline = time.monotonic() + 300  # only a guard against a hang

        def reported() -> bool:
            try:
                return any(t.intermediate_values for t in stored_trials(experiment))
            except (TypeError, KeyError):  # no optuna.json (read_record: None) or no study yet
                return False

        while not reported():
            assert search.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        assert json.loads((experiment / OPTUNA_FILE).read_text())["storage"] == database
        assert not (experiment / JOURNAL_FILE).exists()
        [stored] = optuna.load_study(study_name="live", storage=database).get_trials()
        assert stored.state == TrialState.RUNNING and 1 in stored.intermediate_values
        server, port = start_dashboard(experiment)
        _, detail = served_study(port, "live")
        [trial] = detail["trials"]
        assert trial["state"] == "Running" and trial["intermediate_values"], (trial, log.read_text()[-2000:])
    finally:
        stop(search)
        if server is not None:
            stop(server)

    # The same name in the same database: refused before anything runs.
    again = run_cli("search", str(path), "--storage", str(tmp_path / "other"), "--name", "live", "--optuna-storage", database)
    assert again.returncode == 2 and "already holds a study named 'live'" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr and not (tmp_path / "other").exists()
    bad = run_cli("search", str(path), "--optuna-storage", "studies.db")
    assert bad.returncode == 2 and "optuna_storage: 'studies.db' is not an Optuna database URL" in bad.stderr, bad.stderr
    unreachable = run_cli(
        "search", str(path), "--storage", str(tmp_path / "none"), "--optuna-storage", "sqlite:////no-such-dir/x.db"
    )
    assert unreachable.returncode == 2 and "search.optuna_storage: " in unreachable.stderr, unreachable.stderr
    assert "cannot open it" in unreachable.stderr and "Traceback" not in unreachable.stderr
    assert not (tmp_path / "none").exists()


def test_a_folder_made_before_optuna_storage_still_reads_and_dashboard_says_so(experiment, tmp_path, capsys):
    old = tmp_path / "old"
    shutil.copytree(experiment, old)
    (old / OPTUNA_FILE).unlink()
    (old / JOURNAL_FILE).unlink()
    assert main(["best", str(old)]) == 0
    assert main(["report", str(old)]) == 0
    capsys.readouterr()
    assert main(["dashboard", str(old)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Optuna storage" in err and "Traceback" not in err


# --------------------------------------------------------------------------- resume, in process


def searcher(tmp_path: Path) -> StoredOptunaSearch:
    """The searcher as search/launch.py builds it, on a journal in tmp_path."""
    from ray.tune.search.sample import loguniform

    search = StoredOptunaSearch(
        location=str(tmp_path / JOURNAL_FILE),
        study_name="s",
        baseline={"learning_rate": 1e-3},
        epochs=2,
        experiment_dir=str(tmp_path),
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    search.set_search_properties("search/objective", "max", {"learning_rate": loguniform(1e-4, 1e-2)})
    return search


def test_a_resumed_searcher_neither_duplicates_the_baseline_nor_orphans_a_trial(tmp_path):
    """A driver killed after asking Optuna for trial c but before saving Ray's state: the resumed
    searcher (built afresh from tuner.pkl, then restored) hands c's Optuna trial to the next trial."""
    first = searcher(tmp_path)
    assert first.suggest("a") == {"learning_rate": 1e-3}  # the baseline
    first.suggest("b")
    first.on_trial_result("a", {"search/objective": 0.5, "training_iteration": 1})
    first.save(str(tmp_path / "searcher.pkl"))  # Ray's saved state knows a and b
    orphan = first.suggest("c")  # ... then the driver is killed

    resumed = searcher(tmp_path)  # set_search_properties runs before the state is restored
    resumed.restore(str(tmp_path / "searcher.pkl"))
    assert resumed.suggest("d") == orphan
    resumed.on_trial_result("a", {"search/objective": 0.25, "training_iteration": 1})  # re-reported after resume: the later wins
    for trial_id in "abd":
        resumed.on_trial_result(trial_id, {"search/objective": 0.5, "training_iteration": 2})
        resumed.on_trial_complete(trial_id, {"search/objective": 0.5, "training_iteration": 2})
    trials = optuna.load_study(study_name="s", storage=open_storage(str(tmp_path / JOURNAL_FILE))).get_trials()
    assert len(trials) == 3 and [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert trials[0].intermediate_values == {1: 0.25, 2: 0.5}
    assert trials[2].user_attrs["ray_trial_id"] == "d"


def test_early_stopped_errored_and_diverged_trials_get_the_state_that_says_so(tmp_path):
    search = searcher(tmp_path)  # epochs=2
    for trial_id in ("stopped", "errored", "diverged"):
        search.suggest(trial_id)
    search.on_trial_result("stopped", {"search/objective": 0.4, "training_iteration": 1})
    search.on_trial_complete("stopped", {"search/objective": 0.3, "training_iteration": 1})  # ASHA's STOP comes here
    search.on_trial_result("errored", {"search/objective": 0.1, "training_iteration": 1})
    search.on_trial_complete("errored", error=True)
    search.on_trial_complete(
        "diverged", {"search/objective": float("nan"), "training_iteration": 1, "infeasible_reason": "non-finite loss"}
    )
    stopped, errored, diverged = optuna.load_study(
        study_name="s", storage=open_storage(str(tmp_path / JOURNAL_FILE))
    ).get_trials()
    assert stopped.state == TrialState.PRUNED and stopped.value == 0.3 and stopped.intermediate_values == {1: 0.3}
    assert errored.state == TrialState.FAIL and "error.txt" in errored.user_attrs["failure"]
    assert errored.user_attrs["epochs"] == 1 and errored.intermediate_values == {1: 0.1}
    assert diverged.state == TrialState.FAIL and diverged.user_attrs["failure"] == "non-finite loss"


# --------------------------------------------------------------------------- TensorBoard


def scalars(event_file: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} of a TensorBoard event file (TFRecord framing, tensorboardX's protobuf)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    data, found, offset = event_file.read_bytes(), {}, 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        event = Event.FromString(data[offset + 12 : offset + 12 + length])  # 8 length + 4 its crc
        offset += 12 + length + 4  # + the data's crc
        for value in event.summary.value:
            found.setdefault(value.tag, {})[event.step] = value.simple_value
    return found


def test_ray_writes_tensorboard_events_per_trial_with_split_name_keys(experiment):
    """What docs/dashboard.md promises of `tensorboard --logdir results/<experiment>`."""
    for trial_dir in experiment.glob("trial_*"):
        [event_file] = trial_dir.glob("events.out.tfevents.*")
        tags = scalars(event_file)
        epochs = [row["training_iteration"] for row in ray_rows(trial_dir)]
        for name in ("eval/in_range_fraction", "train/mean_reward", "search/objective"):
            steps = tags.get(f"ray/tune/{name}", {})
            # NaN (a diverged epoch) is not written: TensorBoard shows the finite epochs.
            finite = [row["training_iteration"] for row in ray_rows(trial_dir) if math.isfinite(row[name])]
            assert sorted(steps) == finite and set(finite) <= set(epochs), (trial_dir.name, name, steps)
