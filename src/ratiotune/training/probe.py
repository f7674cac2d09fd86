"""The pre-flight probe: the task's reward and measure on real answers, before Ray starts.

The load-time probe (tasks.probe_reward) calls the reward on placeholder answers; a reward that
only fails on what a model really writes (a NaN on an empty answer, a ZeroDivisionError on a
one-word one) would pass it and then stop the study inside its first trial. So a search first
samples one batch of answers from the untrained agents, as a trial's first rollouts would, and
scores them with the task's reward and measure (builtin:tiny: about a second).
"""

from __future__ import annotations

import gc
import time

from ratiotune.core.study import Study, StudyError
from ratiotune.tasks import TaskError

# Records of the training set the probe samples on: one batch, answered num_generations times each.
PROBE_RECORDS = 4


def probe_answers(study: Study) -> tuple[int, float]:
    """Score one batch of real answers with the task; returns (answer pairs, seconds).

    Raises StudyError (one line, naming the function, the answer pair and the record) on a task error.
    """
    from ratiotune.training.trainable import Trial

    start = time.perf_counter()
    # The baseline config when there is one (else the study's train values): its num_generations
    # and max_new_tokens, on CPU (a GPU study's driver may have none).
    trial = Trial(study, study.baseline() or {}, devices=["cpu", "cpu"])
    records = study.prompts("train")[:PROBE_RECORDS]
    samples = int(trial.hyperparameters["num_generations"])
    try:
        trial.evaluate(samples, records)
    except TaskError as exc:
        raise StudyError(f"pre-flight (answers sampled from the untrained agents): {exc}; fix the task (nothing was started)") from None
    finally:
        del trial
        gc.collect()
    return len(records) * samples, time.perf_counter() - start
