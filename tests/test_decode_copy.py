"""train.decode_dtype: which agents decode from a bf16 copy, and that the copy (prepacked on CPU) is the masters in bf16.

Facts, not timing: the dtype rule, logits compared with a plain bf16 cast of the masters, the
copy following an optimizer step, and the bytes the memory estimate counts.
"""

from __future__ import annotations

import pytest
import torch

from ratiotune.core.study import validate_study
from ratiotune.training import packed_linear
from ratiotune.training.generation import BF16_COPY_MIN_PARAMETERS, Decoding, copy_dtype, cpu_has_bf16
from ratiotune.training.memory import study_estimate
from ratiotune.training.models import load_agents
from ratiotune.training.trainable import Trial


def test_auto_keeps_a_bf16_copy_only_where_it_was_measured_to_pay():
    big, small = BF16_COPY_MIN_PARAMETERS, BF16_COPY_MIN_PARAMETERS - 1
    native = torch.bfloat16 if cpu_has_bf16() else None
    assert copy_dtype("auto", "eager", "cpu", None, big) == native
    assert copy_dtype("auto", "static", "cpu", None, big) == native
    assert copy_dtype("auto", "eager", "cpu", None, small) is None  # builtin:tiny decodes slower in bf16
    assert copy_dtype("auto", "eager", "cuda:0", torch.bfloat16, big) is None  # GPU eager: autocast, as before
    assert copy_dtype("auto", "compiled", "cuda:0", torch.bfloat16, small) == torch.bfloat16
    assert copy_dtype("float32", "compiled", "cuda:0", torch.bfloat16, big) is None
    assert copy_dtype("bfloat16", "eager", "cpu", None, small) == torch.bfloat16
    with pytest.raises(ValueError, match="float16.*allowed: auto, float32, bfloat16"):
        copy_dtype("float16", "eager", "cpu", None, big)


def reference_logits(model, ids) -> torch.Tensor:
    """The masters cast to bf16 with plain F.linear: what the packed copy must compute."""
    import copy

    plain = copy.deepcopy(model).eval()
    for param in plain.parameters():
        param.data = param.data.to(torch.bfloat16)
    with torch.inference_mode():
        return plain(ids).logits.float()


@pytest.mark.skipif(not packed_linear.available(), reason="this torch has no oneDNN prepacked linear")
def test_the_packed_bf16_copy_computes_the_masters_in_bf16_and_follows_each_step():
    (model, _), tokenizer = load_agents("builtin:tiny")
    model.eval()
    ids = tokenizer(["Tell a joke about dinosaurs:"], return_tensors="pt").input_ids
    decoding = Decoding("eager", model, "cpu", decode_dtype="bfloat16")
    assert decoding.packs
    copy_ = decoding.decoder()
    linears = [m for m in copy_.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(hasattr(m, "_packed_weight") for m in linears)
    # Each weight is held once: untied linears keep only the packed one; a tied head keeps its shared weight.
    head = copy_.get_output_embeddings()
    tied = head.weight is not None and head.weight is copy_.get_input_embeddings().weight
    assert all(m.weight is None for m in linears if m is not head) and tied == bool(model.config.tie_word_embeddings)
    with torch.inference_mode():
        got = copy_(ids).logits.float()
    assert torch.allclose(got, reference_logits(model, ids), atol=1e-2, rtol=1e-2)
    # An optimizer step on the masters: the copy repacks from them (version counters), and matches again.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-1)
    model.train()
    model(ids, labels=ids).loss.backward()
    optimizer.step()
    model.eval()
    before = got
    with torch.inference_mode():
        got = decoding.decoder()(ids).logits.float()
    assert not torch.allclose(got, before, atol=1e-2)  # the control: the step moved the logits
    assert torch.allclose(got, reference_logits(model, ids), atol=1e-2, rtol=1e-2)
    params = sum(p.numel() for p in model.parameters())
    assert decoding.copy_bytes() == 2 * params + (2 * head.weight.numel() if tied else 0)


def test_the_memory_estimate_counts_the_decode_copies_a_trial_holds(tiny_study):
    study = validate_study({**tiny_study, "train": {**tiny_study["train"], "decode_dtype": "bfloat16"}})
    trial = Trial(study, {})
    assert trial.run_epoch()["infeasible"] == 0
    estimate = study_estimate(study)[0]
    assert estimate.decode_copies == sum(d.copy_bytes() for d in trial.trainer.decoding) > 0
    assert "from a bfloat16 copy" in study_estimate(study)[1]
    plain = validate_study({**tiny_study, "train": {**tiny_study["train"], "decode_dtype": "float32"}})
    assert study_estimate(plain)[0].decode_copies == 0


def test_the_epoch_bench_runs_both_paths_and_ends_with_its_figures_line(tiny_study, write_study):
    """bench/generation_speed.py --study at a tiny size: both paths, the window table and the KL, then the line."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    study = write_study({**tiny_study, "name": "tinybench"})
    done = subprocess.run(
        [sys.executable, "bench/generation_speed.py", "--study", str(study), "--repeats", "1", "--windows", "1,2",
         "--kl-sequences", "4"],
        capture_output=True, text=True, timeout=600, cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert re.fullmatch(
        r"tinybench epoch: [\d.]+ s per-prompt float32, [\d.]+ s shipped \([\d.]+ x\); rollouts \d+ tokens/s vs "
        r"\d+ tokens/s \([\d.]+ x\); decode \d+ ms a step, floor \d+ ms",
        lines[-1],
    ), lines[-1]
    assert any(line.startswith("| per-prompt |") for line in lines) and any(line.startswith("| shipped |") for line in lines)
    assert [line.split("|")[1].strip() for line in lines if re.match(r"\| \d+ \| \d+ \|", line)] == ["1", "2"]
    assert any("builtin:tiny: mean KL" in line for line in lines)
