"""The pre-flight probe: the task's reward and measure on real answers, before Ray starts.

The load-time probe (tasks.probe_reward) calls the reward on placeholder answers; a reward that
only fails on what a model really writes (a NaN on an empty answer, a ZeroDivisionError on a
one-word one) would pass it and then stop the study inside its first trial. So a search first
samples one batch of answers from the untrained agents, as a trial's first rollouts would, and
scores them with the task's reward and measure (builtin:tiny: about a second).
"""

from __future__ import annotations

import time

from ratiotune.core.study import Study, StudyError
from ratiotune.tasks import TaskError

# One batch: the first records of the training set, each answered up to PROBE_SAMPLES times
# (num_generations when fewer). 16 pairs: ~1.5 s on builtin:tiny at 32 tokens, on 2 busy cores.
PROBE_RECORDS = 4
PROBE_SAMPLES = 4


def probe_answers(study: Study) -> tuple[int, float]:
    """Score one batch of real answers with the task; returns (answer pairs, seconds).

    Raises StudyError (one line, naming the function, the answer pair and the record) on a task error.
    Runs in a fresh process: the models, torch's threads and what comlrl imports (wandb) never
    touch the driver, which then starts Ray (a driver that had imported them before ray.init left
    W&B's offline runs empty).
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    start = time.perf_counter()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        problem, pairs = pool.submit(_probe, study).result()
    if problem is not None:
        raise StudyError(f"pre-flight (answers sampled from the untrained agents): {problem}; fix the task (nothing was started)")
    return pairs, time.perf_counter() - start


def _probe(study: Study) -> tuple[str | None, int]:
    """In the probe's process: (the task error's message or None, answer pairs scored)."""
    from ratiotune.training.placement import PlacementError, local_devices
    from ratiotune.training.trainable import Trial

    try:  # where a trial of this study would train, when this machine has it; else CPU
        devices = local_devices(study.resources.gpu)
    except PlacementError:
        devices = ["cpu", "cpu"]
    # The baseline config when there is one (else the study's train values): its max_new_tokens.
    trial = Trial(study, study.baseline() or {}, devices=devices)
    records = study.prompts("train")[:PROBE_RECORDS]
    samples = min(int(trial.hyperparameters["num_generations"]), PROBE_SAMPLES)
    try:
        trial.evaluate(samples, records)
    except TaskError as exc:
        return str(exc), 0
    return None, len(records) * samples
