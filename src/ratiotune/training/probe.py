"""The pre-flight probe: the task's reward and measure on real answers, before any trial starts.

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

# One batch: the first records of the training set, each answered up to PROBE_SAMPLES times
# (num_generations when fewer). 16 pairs: ~1.5 s on builtin:tiny at 32 tokens, on 2 busy cores.
PROBE_RECORDS = 4
PROBE_SAMPLES = 4


def probe_answers(study: Study) -> tuple[int, float]:
    """Score one batch of real answers with the task; returns (answer pairs, seconds); 0 pairs when the
    agents could not answer at all (a model problem, not the task's: the trials report it, as errors).

    Raises StudyError (one line, naming the function, the answer pair and the record) on a task error.
    Call it after ray.init: a driver that had imported comlrl (and with it wandb) before Ray started
    left W&B's offline runs empty (tests/test_search.py); after it, as the trainable's own import does,
    they are whole. A fresh process instead would cost ~10 s of imports on 2 busy cores.
    """
    start = time.perf_counter()
    problem, pairs = _probe(study)
    if problem is not None:
        raise StudyError(f"pre-flight (answers sampled from the untrained agents): {problem}; fix the task (nothing was started)")
    return pairs, time.perf_counter() - start


def _probe(study: Study) -> tuple[str | None, int]:
    """(the task error's message or None, answer pairs scored)."""
    import torch

    from ratiotune.training.placement import PlacementError, local_devices
    from ratiotune.training.trainable import Trial

    try:  # where a trial of this study would train, when this machine has it; else CPU
        devices = local_devices(study.resources.gpu)
    except PlacementError:
        devices = ["cpu", "cpu"]
    # The baseline config when there is one (else the study's train values): its max_new_tokens.
    trial = None
    try:
        trial = Trial(study, study.baseline() or {}, devices=devices)
        records = study.prompts("train")[:PROBE_RECORDS]
        samples = min(int(trial.hyperparameters["num_generations"]), PROBE_SAMPLES)
        trial.evaluate(samples, records)
    except TaskError as exc:
        return str(exc), 0
    except Exception:  # noqa: BLE001  the model, not the task (e.g. a folder without a tokenizer): the trials say it
        return None, 0
    finally:
        del trial
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the trials need the memory back
    return None, len(records) * samples
