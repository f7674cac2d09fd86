"""The next GPU window (issue 33): Ray, packing, both agents, a whole search, checkpoints, the profile.

    python bench/gpu_window.py --deadline 450 --out $OUT/gpu_window.jsonl   # a GPU node: <= 8 min on one H200
    python bench/gpu_window.py --dry-run --out /tmp/window.jsonl            # anywhere: tiny shapes on CPU

Same machinery as bench/gpu_suite.py (bench/gpu_common.py's flags, environment and deadline; the
suite's child and Partial): each section in its own subprocess under what is left of `--deadline`,
skipped when it will not fit, killed at its deadline with what it had measured; one JSON line per
section appended to `--out` (flushed and fsynced) and one table row printed as each finishes.
Needs the wheels of bench/gpu_wheels.sh (Ray, optuna, comlrl, ...) on PYTHONPATH, with
bench/stand_ins (wandb) after them.

Sections, in the issue's order (builtin:qwen2.5-0.5b-shape: the real Qwen2.5-0.5B dimensions with
random weights; float32 masters, bf16 autocast; 8 generations x 128 tokens unless said):
  env           versions, GPU, which packages are real; Ray importable and without its jars
  two_agents    two agents from different seeds, each with its own compiled decoding, called
                alternately: each agent's compiled logits match an eager forward of its own bf16
                copy and differ from the other's; CUDA-graph recordings and Dynamo compiles after
                warm-up (0 = the graphs are shared or kept per agent without re-recording)
  packing       bench/gpu_packing.py --packings 1,4 through Ray: trials at once, no out-of-memory,
                trials per GPU-hour vs 1 per GPU, per-process memory as the driver sees it (NVML or
                nvidia-smi; the device-wide figure where it cannot tell) vs the estimate
  search        a real `ratiotune search studies/gpu-window.yaml` (4 trials x 2 epochs at
                resources.gpu 0.25, builtin:tiny, the race) and `ratiotune best`
  checkpoint    Trial.save after one epoch, then restore into a fresh Trial: every weight and AdamW
                moment equal to the bit, compiled greedy decoding of the restored trial gives the
                original's tokens; save and restore seconds, GB on disk
  profile       torch.profiler over 32 compiled decode steps: GPU-busy ms per step (kernel time)
                vs wall ms per step, the host's top operators; the trace (gzip) beside --out
  decode_loop   bench/decode_loop.py (forward + sampling in one compiled step, preallocated buffers,
                EOS checked every 8 steps) vs generate() compiled, both on the bf16 copy, 8 x 128
                steps: ms per step (interleaved medians), greedy tokens equal or the first differing
                step, CUDA-graph recordings after warm-up; the target is <= 1.5 ms per step on an H200
  logprob_gap   the same sampled tokens scored by the sampler (compiled, bf16 copy) and the trainer
                (float32 masters under bf16 autocast; and pure float32): mean and max |log-prob
                gap|, the sequence importance ratio; the bf16-vs-fp32 gradient cosine of the loss;
                and the gap of two eager decode copies (all bf16; float32 embeddings and norms) to
                the trainer: does keeping those in float32 close it?
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH)]

import gpu_common  # noqa: E402  (bench/: the parent's flags, environment and deadline, shared with gpu_suite.py)
import gpu_suite  # noqa: E402  (bench/: the suite's section-process machinery and probes)
from gpu_suite import Partial, compile_counters, counting_cudagraph_records, f, sync  # noqa: E402

FULL = {"model": "builtin:qwen2.5-0.5b-shape", "generations": 8, "tokens": 128, "epoch_prompts": 1,
        "eval_samples": 1, "backend": "inductor", "alternations": 3, "packings": "1,4", "pack_tokens": 32,
        "pack_epochs": 2, "profile_steps": 32, "search_gpu": 0.25}  # fmt: skip
DRY = {"model": "builtin:tiny", "generations": 2, "tokens": 16, "epoch_prompts": 1,
       "eval_samples": 1, "backend": "aot_eager", "alternations": 2, "packings": "1", "pack_tokens": 8,
       "pack_epochs": 1, "profile_steps": 8, "search_gpu": 0}  # fmt: skip
# Seconds a section needs at most (on the GPU, in the dry run): skipped when less is left.
NEED = {"env": (30, 60), "two_agents": (90, 90), "packing": (200, 150), "search": (120, 300),
        "checkpoint": (90, 90), "profile": (60, 60), "decode_loop": (90, 60), "logprob_gap": (60, 60)}  # fmt: skip
ORDER = list(NEED)


def agent_pair(sizes: dict, device: str):
    """Two agents of the model's shape initialised from different seeds, and the tokenizer.

    load_agents gives two equal agents, and builtin models always start from the same weights
    (models.BUILTIN_WEIGHTS_SEED): the second agent is the same architecture drawn with another seed.
    """
    import torch

    from ratiotune.training.models import load_agents

    (first, _), tokenizer = load_agents(sizes["model"])
    torch.manual_seed(2)
    second = type(first)(first.config).to(torch.float32)
    return [first.to(device), second.to(device)], tokenizer


def section_env(sizes: dict, device: str, partial: Partial) -> dict:
    figures = gpu_suite.section_env(sizes, device, partial)
    import ray

    figures["ray_jars"] = (Path(ray.__file__).parent / "jars").exists()  # False: the trimmed wheel
    figures["optuna"] = _version("optuna")
    return figures


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "missing"


def section_two_agents(sizes: dict, device: str, partial: Partial) -> dict:
    """Two compiled agents in one process, alternating: does each decode with its own weights?"""
    import torch

    from ratiotune.training.generation import Decoding, compile_config

    (first, second), tokenizer = agent_pair(sizes, device)
    assert not torch.equal(first.model.embed_tokens.weight, second.model.embed_tokens.weight), "the seeds gave equal agents"
    dtype = torch.bfloat16
    decodings = [Decoding("compiled", m, device, dtype=dtype) for m in (first, second)]
    for d in decodings:
        d.compile_config = compile_config(device, sizes["backend"])
    prompt = tokenizer(gpu_suite.bucket_prompts(tokenizer, 1), return_tensors="pt").to(device)
    rows, steps, n = sizes["generations"], sizes["tokens"], prompt.input_ids.shape[1]
    greedy = {k: v.expand(rows, -1) for k, v in prompt.items()}

    def decode(index: int):
        decoding = decodings[index]
        kwargs = decoding.generate_kwargs("rollout", rows, n, steps)
        with torch.inference_mode(), torch.autocast(torch.device(device).type, dtype=dtype):
            return decoding.decoder().generate(
                **greedy, do_sample=False, max_new_tokens=steps, min_new_tokens=steps, pad_token_id=tokenizer.pad_token_id,
                return_dict_in_generate=True, output_logits=True, **kwargs,
            )  # fmt: skip

    with counting_cudagraph_records() as records:
        warm_s = []
        for index in (0, 1):  # warm-up: each agent's first call compiles or records what it needs
            sync(device)
            start = time.perf_counter()
            decode(index)
            sync(device)
            warm_s.append(time.perf_counter() - start)
        before, recorded = compile_counters(), (records[0] if records is not None else None)
        partial.update(warmup_s=warm_s, warmup_counters=before, cudagraph_records_warmup=recorded)
        outputs, seconds = {0: [], 1: []}, []
        for _ in range(sizes["alternations"]):
            for index in (0, 1):
                sync(device)
                start = time.perf_counter()
                outputs[index].append(decode(index))
                sync(device)
                seconds.append(time.perf_counter() - start)
        after = compile_counters()
        records_after = None if records is None else records[0] - recorded

    def eager_logits(index: int, sequences):
        with torch.no_grad(), torch.autocast(torch.device(device).type, dtype=dtype):
            return decodings[index].decoder()(input_ids=sequences.clone()).logits[:, n:-1].float()

    figures = {}
    own_max, other_min = 0.0, float("inf")
    for index in (0, 1):
        last = outputs[index][-1]
        compiled = torch.stack(last.logits, dim=1)[:, 1:].float()  # step 0 is the uncompiled prefill
        own = float((compiled - eager_logits(index, last.sequences)).abs().max())
        other = float((compiled - eager_logits(1 - index, last.sequences)).abs().max())
        same_tokens = all(torch.equal(o.sequences, last.sequences) for o in outputs[index])
        figures[f"agent{index}"] = {"max_logit_diff_vs_own_eager": own, "max_logit_diff_vs_other_agent": other,
                                    "tokens_equal_across_calls": same_tokens}  # fmt: skip
        own_max, other_min = max(own_max, own), min(other_min, other)
    agents_differ = not torch.equal(outputs[0][-1].sequences, outputs[1][-1].sequences)
    # The logits decide (random weights give near-flat logits: two agents may still pick the same greedy tokens).
    verdict = "each agent decodes its own weights" if 2 * own_max < other_min else "WRONG WEIGHTS OR INCONCLUSIVE"
    return {**figures, "verdict": verdict, "agents_tokens_differ": agents_differ, "warmup_s": warm_s,
            "ms_per_step": 1000 * statistics.median(seconds) / steps, "alternations": sizes["alternations"],
            "cudagraph_records_warmup": recorded, "cudagraph_records_after_warmup": records_after,
            "dynamo_compiles_after_warmup": after["dynamo_compiles"] - before["dynamo_compiles"],
            "cudagraph_skips": after["cudagraph_skips"], "rows": rows, "steps": steps}  # fmt: skip


def section_packing(sizes: dict, device: str, partial: Partial) -> dict:
    import gpu_packing

    dry = not device.startswith("cuda")
    args = argparse.Namespace(model=sizes["model"], epochs=sizes["pack_epochs"], prompts=1, num_generations=sizes["generations"],
                              max_new_tokens=sizes["pack_tokens"], dry_run=dry)  # fmt: skip
    import ray

    if dry:
        ray.init(address="local", num_cpus=os.cpu_count() or 2, num_gpus=1, include_dashboard=False, logging_level="WARNING")
    else:
        ray.init(address="local", include_dashboard=False, logging_level="WARNING")
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in [int(p) for p in sizes["packings"].split(",")]:
                try:
                    rows.append(gpu_packing.run_packing(args, n, Path(tmp)))
                except (Exception, SystemExit) as exc:  # noqa: BLE001  (an out-of-memory is a result too)
                    rows.append(
                        {"packing": n, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
                    )
                partial.update(rows=rows)
    finally:
        ray.shutdown()
    base = rows[0].get("trials_per_gpu_hour") if rows else None
    for row in rows:
        if base and row.get("trials_per_gpu_hour"):
            row["vs_one_per_gpu"] = row["trials_per_gpu_hour"] / base
        if row.get("device_used_gib") and row.get("at_once"):
            row["device_used_per_trial_gib"] = row["device_used_gib"] / row["at_once"]
    return {"rows": rows, "tokens": sizes["pack_tokens"], "epochs": sizes["pack_epochs"]}


def section_search(sizes: dict, device: str, partial: Partial) -> dict:
    """`ratiotune search studies/gpu-window.yaml` and `ratiotune best`, as a user runs them, in subprocesses."""
    from ratiotune.core.experiment import load_experiment

    env = {**os.environ, "RAY_ADDRESS": "local", "WANDB_MODE": "disabled"}
    stand_ins = str(BENCH / "stand_ins")
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO / "src"), stand_ins])  # the wheels first, the stand-in last
    with tempfile.TemporaryDirectory(prefix="gpu-window-search-") as tmp:
        command = [sys.executable, "-m", "ratiotune", "search", str(REPO / "studies" / "gpu-window.yaml"), "--storage", tmp,
                   "--name", "window", "--set", f"resources.gpu={sizes['search_gpu']:g}"]  # fmt: skip
        start = time.perf_counter()
        search = subprocess.run(command, env=env, capture_output=True, text=True)
        search_s = time.perf_counter() - start
        partial.update(
            search_exit=search.returncode, search_s=search_s, search_tail=search.stdout[-1500:] + search.stderr[-1500:]
        )
        best = subprocess.run([sys.executable, "-m", "ratiotune", "best", str(Path(tmp) / "window")], env=env,
                              capture_output=True, text=True)  # fmt: skip
        experiment = load_experiment(Path(tmp) / "window")
        trials = experiment.trials
        errors = [t.error for t in trials if t.error]
        headline = next((line.strip() for line in best.stdout.splitlines() if line.strip()), "")
        launch = [line for line in search.stdout.splitlines() if line.startswith(("packing:", "memory estimate"))]
        return {"search_exit": search.returncode, "best_exit": best.returncode, "search_s": search_s,
                "trials": len(trials), "trials_errored": len(errors), "first_error": errors[0][:300] if errors else None,
                "epochs": [t.epochs for t in trials], "race_summary": (Path(tmp) / "window" / "race" / "summary.md").exists(),
                "best_headline": headline[:200], "best_has_train_block": "\ntrain:" in best.stdout,
                "launch_lines": launch, "resources_gpu": sizes["search_gpu"],
                "output_lines": len(search.stdout.splitlines())}  # fmt: skip


def section_checkpoint(sizes: dict, device: str, partial: Partial) -> dict:
    """Trial.save after an epoch, restore into a fresh Trial: weights and AdamW moments to the bit, decoding follows."""
    import torch

    from ratiotune.training.generation import compile_config
    from ratiotune.training.trainable import Trial

    with tempfile.TemporaryDirectory(prefix="gpu-window-ckpt-", dir=os.environ.get("GPU_WINDOW_DISK")) as tmp:
        study, _ = gpu_suite.suite_study({**sizes, "epoch_prompts": 1}, "compiled", device, Path(tmp))

        def trial_with_backend(seed: int) -> Trial:
            trial = Trial(study, {}, seed=seed, devices=[device, device])
            for decoding in trial.trainer.decoding:
                decoding.compile_config = compile_config(device, sizes["backend"])
            return trial

        original = trial_with_backend(0)
        original.run_epoch()
        partial.update(epoch_done=True)
        folder = Path(tmp) / "checkpoint"
        sync(device)
        start = time.perf_counter()
        original.save(folder)
        sync(device)
        save_s = time.perf_counter() - start
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        partial.update(save_s=save_s, checkpoint_gb=size / 1e9)
        restored = trial_with_backend(1)  # untrained: its weights differ from the trained ones until the restore
        differed = not torch.equal(next(restored.trainer.agents[0].parameters()), next(original.trainer.agents[0].parameters()))
        sync(device)
        start = time.perf_counter()
        restored.restore(folder)
        sync(device)
        restore_s = time.perf_counter() - start

    def mismatches(a: torch.nn.Module, b: torch.nn.Module) -> list[str]:
        sb = dict(b.named_parameters())
        return [name for name, p in a.named_parameters() if not torch.equal(p, sb[name])]

    weights = [m for i in (0, 1) for m in mismatches(original.trainer.agents[i], restored.trainer.agents[i])]
    moments, checked = [], 0
    for i in (0, 1):
        saved, loaded = original.trainer.optimizers[i].state_dict()["state"], restored.trainer.optimizers[i].state_dict()["state"]
        for key, state in saved.items():
            for name in ("exp_avg", "exp_avg_sq", "step"):
                checked += 1
                if not torch.equal(state[name].to(device), loaded[key][name].to(device)):
                    moments.append(f"agent {i} param {key} {name}")
    # Compiled greedy decoding: the restored trial's bf16 copy follows its restored masters (version
    # counters), and its compiled graph then gives the original's tokens.
    copies_equal = all(torch.equal(a, b) for a, b in zip(original.trainer.decoding[0].decoder().parameters(),
                                                         restored.trainer.decoding[0].decoder().parameters()))  # fmt: skip

    def greedy(trial) -> torch.Tensor:
        trainer, tokenizer = trial.trainer, trial.trainer.tokenizers[0]
        batch = tokenizer(["Describe a village on the back of a whale:"], return_tensors="pt").to(device)
        decoding = trainer.decoding[0]
        kwargs = decoding.generate_kwargs("greedy", 1, batch.input_ids.shape[1], sizes["tokens"])
        with torch.inference_mode(), trainer.autocast(device):
            return decoding.decoder().generate(**batch, do_sample=False, max_new_tokens=sizes["tokens"],
                                               min_new_tokens=sizes["tokens"], pad_token_id=tokenizer.pad_token_id,
                                               **kwargs)  # fmt: skip

    greedy_equal = bool(torch.equal(greedy(original), greedy(restored)))
    return {"weights_differed_before_restore": differed, "weight_tensors_unequal": len(weights),
            "first_unequal_weight": weights[0] if weights else None, "adamw_tensors_checked": checked,
            "adamw_tensors_unequal": len(moments), "first_unequal_moment": moments[0] if moments else None,
            "decode_copies_equal": copies_equal, "epoch_restored": restored.epoch,
            "save_s": save_s, "restore_s": restore_s, "checkpoint_gb": size / 1e9,
            "compiled_greedy_equal": greedy_equal,
            "verdict": "bit-equal" if not weights and not moments and copies_equal and greedy_equal else "MISMATCH"}  # fmt: skip


def section_profile(sizes: dict, device: str, partial: Partial) -> dict:
    """torch.profiler over one compiled generate() of `profile_steps` steps: GPU-busy vs wall time per step."""
    from torch.profiler import ProfilerActivity, profile

    probe = gpu_suite.Probe({**sizes, "tokens": sizes["profile_steps"]}, device)
    for _ in range(2):  # compile, then record the CUDA graphs
        probe.generate("compiled")
    sync(device)
    on_cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    steps = sizes["profile_steps"]
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        probe.generate("compiled")
        sync(device)
        wall = time.perf_counter() - start
    from torch.autograd import DeviceType

    events = prof.key_averages()
    # Kernel records only (CPU operators also carry the device time of what they launched: no double count).
    kernels = [e for e in events if e.device_type == DeviceType.CUDA]
    gpu_us = (
        sum(getattr(e, "self_device_time_total", 0) or getattr(e, "self_cuda_time_total", 0) for e in kernels)
        if on_cuda
        else None
    )
    host = sorted((e for e in events if e.device_type == DeviceType.CPU), key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
    trace = Path(os.environ.get("GPU_SUITE_OUT", "gpu_window.jsonl")).with_name("gpu_window_profile.json")
    try:
        prof.export_chrome_trace(str(trace))
        subprocess.run(["gzip", "-f", str(trace)], check=False)
        trace_file = str(trace) + ".gz"
    except Exception as exc:  # noqa: BLE001
        trace_file = f"not written: {exc}"
    wall_ms = 1000 * wall / steps
    return {"steps": steps, "rows": sizes["generations"], "wall_ms_per_step": wall_ms,
            "gpu_busy_ms_per_step": None if gpu_us is None else gpu_us / 1000 / steps,
            "gpu_busy_share": None if gpu_us is None else gpu_us / 1000 / steps / wall_ms,
            "host_top": [(e.key[:80], round(e.self_cpu_time_total / 1000 / steps, 4), e.count) for e in host],
            "trace": trace_file}  # fmt: skip


def section_decode_loop(sizes: dict, device: str, partial: Partial) -> dict:
    """Our decode loop vs generate(), compiled, on the same bf16 copy: ms per step and greedy tokens."""
    import torch

    from decode_loop import DecodeLoop

    probe = gpu_suite.Probe(sizes, device)
    copy_ = probe.decodings["compiled"].decoder()
    mode = "reduce-overhead" if device.startswith("cuda") and sizes["backend"] == "inductor" else None
    loop = DecodeLoop(copy_, compile_step=lambda fn: torch.compile(fn, backend=sizes["backend"], mode=mode, dynamic=False))
    rows, steps = sizes["generations"], sizes["tokens"]
    prompt = probe.prompt

    def ours(greedy: bool = False):
        with probe.autocast():
            return loop.generate(
                prompt.input_ids.expand(rows, -1) if greedy else prompt.input_ids,
                prompt.attention_mask.expand(rows, -1) if greedy else prompt.attention_mask,
                max_new_tokens=steps, pad_token_id=probe.tokenizer.pad_token_id, eos_token_id=-1,  # never stops: all steps
                num_return_sequences=1 if greedy else rows, do_sample=not greedy, temperature=0.6, top_p=0.6,
            )  # fmt: skip

    seconds: dict[str, list[float]] = {"generate": [], "loop": []}
    with counting_cudagraph_records() as records:
        warm = {}
        for name, call in (("generate", lambda: probe.generate("compiled")), ("loop", ours)):
            for i in range(2):
                sync(device)
                start = time.perf_counter()
                call()
                sync(device)
                warm[f"{name}_call{i + 1}_s"] = time.perf_counter() - start
        recorded = records[0] if records is not None else None
        partial.update(**warm)
        for _ in range(max(3, sizes.get("repeats", 3))):
            for name, call in (("generate", lambda: probe.generate("compiled")), ("loop", ours)):
                sync(device)
                start = time.perf_counter()
                call()
                sync(device)
                seconds[name].append(time.perf_counter() - start)
            partial.update(seconds=seconds)
        after = None if records is None else records[0] - recorded
    skips = compile_counters()["cudagraph_skips"]  # a graph compiled but not run as a CUDA graph would show here
    n = prompt.input_ids.shape[1]
    reference = probe.generate("compiled", greedy=True)[0, n:]
    mine = ours(greedy=True)[0, n:]
    different = (reference != mine[: reference.numel()]).nonzero()
    ms = {name: 1000 * statistics.median(s) / steps for name, s in seconds.items()}
    return {**warm, "generate_ms_per_step": ms["generate"], "loop_ms_per_step": ms["loop"],
            "speedup": ms["generate"] / ms["loop"], "rows": rows, "steps": steps,
            "greedy_equal": not len(different), "greedy_first_diff": int(different[0]) if len(different) else None,
            "cudagraph_records_after_warmup": after, "cudagraph_skips": skips}  # fmt: skip


def section_logprob_gap(sizes: dict, device: str, partial: Partial) -> dict:
    """The same sampled tokens scored by the sampler and by the trainer; the bf16-vs-fp32 gradient cosine."""
    import torch

    probe = gpu_suite.Probe(sizes, device)
    out = probe.generate("compiled", return_dict_in_generate=True, output_logits=True)
    n = probe.prompt.input_ids.shape[1]
    sequences = out.sequences.clone()
    completion = sequences[:, n:]
    # The sampler's log-probs of its own tokens (raw logits at temperature 1, as the loss scores them).
    sampler = torch.stack(out.logits, dim=1).float().log_softmax(-1).gather(-1, completion[..., None])[..., 0]
    model = probe.model

    def trainer_logprobs(autocast: bool) -> torch.Tensor:
        import contextlib

        context = probe.autocast() if autocast else contextlib.nullcontext()
        with context:
            logits = model(input_ids=sequences).logits[:, n - 1 : -1]
        return logits.float().log_softmax(-1).gather(-1, completion[..., None])[..., 0]

    model.train()
    with torch.no_grad():
        mixed, full = trainer_logprobs(True), trainer_logprobs(False)
    gap = sampler - mixed

    # Would a decode copy with float32 embeddings and norms (the residual stream then stays float32
    # under autocast, as the trainer's does) close the gap? Both copies scored eagerly on the same tokens.
    import copy as copying

    def copy_logprobs(keep_float32: bool) -> torch.Tensor:
        variant = copying.deepcopy(model).eval().requires_grad_(False)
        for name, param in variant.named_parameters():
            if not (keep_float32 and ("embed_tokens" in name or "norm" in name)):
                param.data = param.data.to(torch.bfloat16)
        with torch.no_grad(), probe.autocast():
            logits = variant(input_ids=sequences).logits[:, n - 1 : -1]
        del variant
        return logits.float().log_softmax(-1).gather(-1, completion[..., None])[..., 0]

    copy_bf16, copy_mixed = copy_logprobs(False), copy_logprobs(True)
    ratio = (mixed - sampler).sum(-1).exp()  # the sequence importance ratio trainer / sampler
    # Gradient cosine: the same policy-gradient loss (fixed advantages) under bf16 autocast vs float32.
    advantages = torch.linspace(-1, 1, sequences.shape[0], device=sequences.device)

    def gradient(autocast: bool) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        loss = -(advantages[:, None] * trainer_logprobs(autocast)).mean()
        loss.backward()
        return torch.cat([p.grad.flatten().float() for p in model.parameters() if p.grad is not None])

    g_mixed, g_full = gradient(True), gradient(False)
    cosine = float(torch.nn.functional.cosine_similarity(g_mixed, g_full, dim=0))
    return {"tokens": int(completion.numel()), "mean_abs_gap_sampler_vs_trainer": float(gap.abs().mean()),
            "max_abs_gap_sampler_vs_trainer": float(gap.abs().max()), "mean_gap": float(gap.mean()),
            "mean_abs_gap_autocast_vs_fp32": float((mixed - full).abs().mean()),
            "sequence_ratio_min": float(ratio.min()), "sequence_ratio_max": float(ratio.max()),
            "grad_cosine_bf16_vs_fp32": cosine, "grad_norm_ratio": float(g_mixed.norm() / g_full.norm()),
            "mean_abs_gap_bf16_copy_eager_vs_trainer": float((copy_bf16 - mixed).abs().mean()),
            "mean_abs_gap_fp32_embed_norm_copy_vs_trainer": float((copy_mixed - mixed).abs().mean())}  # fmt: skip


SECTIONS = {"env": section_env, "two_agents": section_two_agents, "packing": section_packing, "search": section_search,
            "checkpoint": section_checkpoint, "profile": section_profile, "decode_loop": section_decode_loop,
            "logprob_gap": section_logprob_gap}  # fmt: skip


def describe(row: dict) -> str:
    """One markdown table row for a section's JSON line (gpu_common.table_row, with this window's words)."""
    return gpu_common.table_row(row, section_text)


def section_text(name: str, row: dict) -> str | None:
    """The window's words for each section's figures (None: a section it does not know)."""
    if name == "env":
        return gpu_suite.section_text("env", row) + f"; ray jars {row['ray_jars']}, optuna {row['optuna']}"
    elif name == "two_agents":
        a, b = row["agent0"], row["agent1"]
        return (f"{row['verdict']}: max |logit diff| vs own eager {f(a['max_logit_diff_vs_own_eager'], '.3g')} / "
                f"{f(b['max_logit_diff_vs_own_eager'], '.3g')}, vs the other agent "
                f"{f(a['max_logit_diff_vs_other_agent'], '.3g')} / "
                f"{f(b['max_logit_diff_vs_other_agent'], '.3g')}; {row['alternations']} alternations: CUDA-graph recordings "
                f"after warm-up {row['cudagraph_records_after_warmup']}, Dynamo compiles {row['dynamo_compiles_after_warmup']}, "
                f"cudagraph_skips {row['cudagraph_skips']}; {f(row['ms_per_step'])} ms/step")  # fmt: skip
    elif name == "packing":
        parts = []
        for r in row["rows"]:
            if "error" in r:
                parts.append(f"{r['packing']}/GPU: {r['error']}")
                continue
            memory = (
                f(r.get("process_gib")) if r.get("process_gib") else f"{f(r.get('device_used_per_trial_gib'))} (device/at once)"
            )
            parts.append(f"{r['packing']}/GPU: {r['at_once']} at once, {f(r['trials_per_gpu_hour'], '.0f')} trials/GPU-h "
                         f"({f(r.get('vs_one_per_gpu'))}x), epoch {f(r['epoch_s'], '.1f')} s, driver {memory} GiB/trial, "
                         f"reserved {f(r['reserved_gib'])} vs estimate {f(r['estimate_gib'])} GiB")  # fmt: skip
        return "; ".join(parts)
    elif name == "search":
        return (f"search exit {row['search_exit']} in {f(row['search_s'], '.0f')} s, {row['trials']} trials "
                f"({row['trials_errored']} errored), race summary {row['race_summary']}; best exit {row['best_exit']}: "
                f"{row['best_headline']}")  # fmt: skip
    elif name == "checkpoint":
        return (f"{row['verdict']}: {row['weight_tensors_unequal']} weight and {row['adamw_tensors_unequal']} of "
                f"{row['adamw_tensors_checked']} AdamW tensors unequal, decode copies equal {row['decode_copies_equal']}, "
                f"compiled greedy tokens equal {row['compiled_greedy_equal']}; "
                f"save {f(row['save_s'], '.1f')} s, restore {f(row['restore_s'], '.1f')} s, "
                f"{f(row['checkpoint_gb'], '.3g')} GB")  # fmt: skip
    elif name == "profile":
        return (f"{row['steps']} compiled steps x {row['rows']} rows: wall {f(row['wall_ms_per_step'])} ms/step, GPU busy "
                f"{f(row['gpu_busy_ms_per_step'])} ms/step "
                f"({f(row['gpu_busy_share'], '.0%') if row['gpu_busy_share'] is not None else 'n/a'}); "
                f"top host op {row['host_top'][0][0] if row['host_top'] else 'n/a'}")  # fmt: skip
    elif name == "decode_loop":
        return (f"our loop {f(row['loop_ms_per_step'])} ms/step vs generate() compiled {f(row['generate_ms_per_step'])} "
                f"({f(row['speedup'])}x; {row['rows']} rows x {row['steps']} steps); greedy "
                f"{'equal' if row['greedy_equal'] else 'first differs at step ' + str(row['greedy_first_diff'])}; "
                f"CUDA-graph recordings after warm-up {row['cudagraph_records_after_warmup']}, "
                f"cudagraph_skips {row.get('cudagraph_skips')}")  # fmt: skip
    elif name == "logprob_gap":
        return (f"sampler vs trainer |log-prob gap| mean {f(row['mean_abs_gap_sampler_vs_trainer'], '.3g')}, max "
                f"{f(row['max_abs_gap_sampler_vs_trainer'], '.3g')} over {row['tokens']} tokens; autocast vs fp32 "
                f"{f(row['mean_abs_gap_autocast_vs_fp32'], '.3g')}; sequence ratio [{f(row['sequence_ratio_min'], '.3g')}, "
                f"{f(row['sequence_ratio_max'], '.3g')}]; grad cosine bf16 vs fp32 {f(row['grad_cosine_bf16_vs_fp32'], '.4f')}; "
                f"eager copies vs trainer: all-bf16 {f(row.get('mean_abs_gap_bf16_copy_eager_vs_trainer'), '.3g')}, "
                f"fp32 embeddings+norms {f(row.get('mean_abs_gap_fp32_embed_norm_copy_vs_trainer'), '.3g')}")  # fmt: skip
    return None


def main() -> None:
    args = gpu_common.parse_args(
        __doc__.splitlines()[0], ORDER, deadline=450, out="gpu_window.jsonl", dry_run="tiny shapes on CPU"
    )
    if args.section:
        sys.exit(gpu_suite.child(args.section, json.loads(args.sizes), args.device, Path(args.partial), SECTIONS))

    began = time.monotonic()
    import torch  # the parent touches no CUDA: each section's process owns its context

    sizes = DRY if args.dry_run else FULL
    if not args.dry_run and not torch.cuda.is_available():
        sys.exit("gpu_window: no CUDA device here; run with --dry-run to check the window on CPU")
    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("optuna") is None:
        sys.exit(
            "gpu_window: Ray and optuna must be importable (bench/gpu_wheels.sh builds them; "
            "install them into a --target folder on PYTHONPATH)"
        )
    device = "cpu" if args.dry_run else "cuda:0"
    # Ray's trial processes and `ratiotune search` import ratiotune, and wandb's stand-in, from PYTHONPATH.
    env = gpu_common.section_env(
        Path(args.out), args.dry_run, "gpu-window", pythonpath=(str(REPO / "src"), str(BENCH / "stand_ins"))
    )
    gpu_common.run_sections(Path(__file__).resolve(), "window", args, NEED, sizes, device, env, describe, began)


if __name__ == "__main__":
    main()
