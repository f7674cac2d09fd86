"""Stock comlrl update vs ratiotune's batched update (train.fast_update), side by side.

    python bench/step_speed.py [--quick]

Two configs: (a) the smoke study on builtin:tiny (10 tutorial prompts, 8 generations,
32 new tokens) and (b) builtin:qwen-vocab (Qwen's 151,936-token vocabulary on a 2-layer,
64-wide body) at the original tutorial's 128 new tokens. Every measurement runs in its
own child process (so peak RSS belongs to one mode only) from the same seed, the same
initial weights and the same prompts; stock and fast children alternate (stock, fast,
fast, stock, ...) and the figures are medians, so load from other processes on a shared
machine hits both modes alike. Ratios are what to read; absolute seconds move with load.

Per config it prints: update-step seconds (time in comlrl's `_update_from_samples`, per
call), whole-epoch seconds (`run_epoch`: sampling both agents + updates), peak RSS of the
child, whether both modes saw identical rollouts, and the max relative gradient error
of the fast loss against the stock one on a real sampled group. Torch uses one thread:
a search trial gets one CPU (resources.cpu: 1) and Ray sets OMP_NUM_THREADS=1 for it.
The last line is `epoch speedup X.XXx on qwen-vocab (grad rel err Y)`.

`--configs smollm2` runs the real model (builtin:smollm2, `make real-model`) at
studies/smollm2-cpu.yaml's sizes and adds what this CPU allows, measured in the same run: each
decode step against its floor (the weights' bytes over the read bandwidth, or its FLOPs over the
matmul rate, whichever is larger), the epoch's updates against 6 x parameters x tokens of
arithmetic, and the child's peak RSS against the study's memory estimate.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]
import one_thread  # noqa: E402  (bench/: children on one thread, medians, the floor; shared with epoch_speed.py)
from one_thread import median  # noqa: E402

REPO = one_thread.REPO

# name -> (model, prompts, num_generations, max_new_tokens, repeats) for full / quick runs.
CONFIGS = {
    "tiny": {"full": ("builtin:tiny", 10, 8, 32, 5), "quick": ("builtin:tiny", 10, 8, 32, 2)},
    "qwen-vocab": {"full": ("builtin:qwen-vocab", 2, 8, 128, 3), "quick": ("builtin:qwen-vocab", 1, 4, 128, 1)},
    # The real model at studies/smollm2-cpu.yaml's sizes (4 prompts, 4 generations, 16 tokens); `--configs smollm2`.
    "smollm2": {"full": ("builtin:smollm2", 4, 4, 16, 2), "quick": ("builtin:smollm2", 2, 4, 16, 1)},
}
DEFAULT_CONFIGS = "tiny,qwen-vocab"


def make_study(model: str, n_prompts: int, generations: int, tokens: int, fast: bool, workdir: Path):
    from ratiotune.core.study import load_study
    from ratiotune.tasks.length_ratio import BUILTIN_PROMPTS
    from ratiotune.tasks.records import load_records

    prompts = workdir / f"prompts-{n_prompts}.txt"
    prompts.write_text("\n".join([r["prompt"] for r in load_records("builtin:tutorial", BUILTIN_PROMPTS)][:n_prompts]) + "\n")
    overrides = [
        f"model.name={model}",
        f"task.train_prompts={prompts}",
        "train.learning_rate=1e-3",
        f"train.num_generations={generations}",
        f"train.max_new_tokens={tokens}",
        f"train.fast_update={str(fast).lower()}",
    ]
    return load_study(REPO / "studies" / "smoke.yaml", overrides)


def child_epoch(args: argparse.Namespace) -> dict:
    """One epoch in one mode: epoch seconds, seconds per update, peak RSS, a rollout digest."""
    from ratiotune.training.trainable import Trial

    with tempfile.TemporaryDirectory() as tmp:
        study = make_study(*args.shape, fast=args.mode == "fast", workdir=Path(tmp))
        trial = Trial(study, {})
    trainer = trial.trainer
    update_seconds: list[float] = []
    update = trainer._update_from_samples

    def timed_update(*a, **kw):
        start = time.perf_counter()
        update(*a, **kw)
        update_seconds.append(time.perf_counter() - start)

    trainer._update_from_samples = timed_update
    # Decode time and steps, per generate() call of an agent or its decode copy (rows = one update
    # window's prompts x num_generations).
    decode = {"seconds": 0.0, "steps": 0, "rows": 0, "tokens": 0}
    decoders = {id(m): m for a, d in zip(trainer.agents, trainer.decoding) for m in (a, d.decoder())}
    for agent in decoders.values():
        generate = agent.generate

        def timed_generate(*a, _generate=generate, **kw):
            start = time.perf_counter()
            out = _generate(*a, **kw)
            decode["seconds"] += time.perf_counter() - start
            sequences = getattr(out, "sequences", out)  # comlrl asks for return_dict_in_generate
            prompt = kw["input_ids"].shape[1] if "input_ids" in kw else a[0].shape[1]
            decode["steps"] += sequences.shape[1] - prompt
            decode["rows"] = sequences.shape[0]
            decode["tokens"] += sequences.numel()  # prompt + answer per row: what the update runs forward and back
            return out

        agent.generate = timed_generate
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer.run_epoch()
    epoch_seconds, epoch_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    rollouts = json.dumps(trainer.reward_func.take_groups())
    return {
        "epoch_s": epoch_seconds,
        "epoch_cpu_s": epoch_cpu,
        "update_s": statistics.mean(update_seconds),
        "updates": len(update_seconds),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rollouts": hashlib.sha256(rollouts.encode()).hexdigest()[:12],
        "nonfinite": trainer.nonfinite_losses,
        "decode_s": decode["seconds"],
        "decode_steps": decode["steps"],
        "decode_rows": decode["rows"],
        "parameters": sum(p.numel() for p in trainer.agents[0].parameters()),
        "sequence_tokens": decode["tokens"],
    }


def child_grad(args: argparse.Namespace) -> dict:
    """Stock and fast loss + backward on one real sampled group of agent 0: error and time."""
    import torch
    from comlrl.trainers.reinforce import MAGRPOTrainer

    from ratiotune.training.policy_loss import batched_policy_loss
    from ratiotune.training.trainable import Trial

    with tempfile.TemporaryDirectory() as tmp:
        trial = Trial(make_study(*args.shape, fast=True, workdir=Path(tmp)), {})
    trainer = trial.trainer
    trainer.reward_func.start_group()
    # One prompt's step fills (not yet drains) the rollout buffers: rollout_buffer_size is 2.
    trainer._train_step_returns(next(iter(trainer.get_train_dataloader()))[0])
    sample = trainer.rollout_buffers[0][0]
    # A group whose answers all got the same reward has zero advantages and zero gradients,
    # which compare trivially; then score the same completions with returns 0, 1, 2, ...
    flat = len(set(sample.returns)) == 1
    returns = [float(i) for i in range(len(sample.returns))] if flat else list(sample.returns)
    model = trainer.agents[0]
    results = {}
    for name, loss_fn in (("stock", MAGRPOTrainer._compute_loss_with_gradients), ("fast", batched_policy_loss)):
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        loss_fn(trainer, model, sample.completions_data, returns).backward()
        seconds = time.perf_counter() - start
        results[name] = (seconds, [p.grad.clone() for p in model.parameters()])
    stock, fast = results["stock"][1], results["fast"][1]
    per_tensor = [((f - s).norm() / s.norm()).item() for f, s in zip(fast, stock) if s.norm() > 0]
    whole = (torch.cat([f.flatten() for f in fast]) - torch.cat([s.flatten() for s in stock])).norm()
    return {
        "max_rel_err": max(per_tensor),
        "rel_err": (whole / torch.cat([s.flatten() for s in stock]).norm()).item(),
        "stock_loss_s": results["stock"][0],
        "fast_loss_s": results["fast"][0],
        "completion_tokens": [len(c) for c in sample.completions_data["completion_input_ids"][0]],
        "flat_returns": flat,
    }


def child_floor(args: argparse.Namespace) -> dict:
    """This CPU on one thread, now (one_thread.machine_floor), reading SmolLM2-135M's float32 weights (538 MB)."""
    return one_thread.machine_floor(134_515_008)


def print_floors(name: str, shape: tuple, fast: list[dict]) -> None:
    """Decode steps and updates of the fast runs against the floor, and peak RSS against the estimate."""
    from ratiotune.core.study import load_study
    from ratiotune.training.memory import study_estimate

    floor = run_child("floor", shape)
    params, rows = fast[0]["parameters"], fast[0]["decode_rows"]
    step = median(fast, "decode_s") / fast[0]["decode_steps"]
    flops = floor["flops"]["float32"]
    read, arithmetic = 4 * params / floor["bandwidth"], 2 * params * rows / flops
    print(f"   floor (this CPU, one thread, measured now): matmul {flops / 1e9:.0f} GFLOP/s, "
          f"read {floor['bandwidth'] / 1e9:.1f} GB/s")  # fmt: skip
    print(f"   decode: {1e3 * step:.0f} ms a step at {rows} rows ({rows / step:.0f} tokens/s, "
          f"{fast[0]['decode_steps']} steps an epoch); floor {1e3 * max(read, arithmetic):.0f} ms "
          f"(weights {4 * params / 1e6:.0f} MB read: {1e3 * read:.0f} ms; {2 * params * rows / 1e9:.2f} GFLOP: "
          f"{1e3 * arithmetic:.0f} ms)")  # fmt: skip
    updates = median(fast, "update_s") * fast[0]["updates"]
    update_floor = 6 * params * fast[0]["sequence_tokens"] / flops
    print(f"   updates: {updates:.1f} s an epoch over {fast[0]['sequence_tokens']} prompt+answer tokens; "
          f"arithmetic floor {update_floor:.1f} s (6 x parameters x tokens; {updates / update_floor:.1f}x)")  # fmt: skip
    if name == "smollm2":
        estimate, _ = study_estimate(load_study(REPO / "studies" / "smollm2-cpu.yaml"))
        print(f"   memory: peak RSS {median(fast, 'peak_rss_mb'):.0f} MB (the process: Python, torch, tokenizer "
              f"included) vs studies/smollm2-cpu.yaml's estimate {estimate.total / 2**20:.0f} MiB per trial")  # fmt: skip


def run_child(kind: str, shape: tuple, mode: str = "fast") -> dict:
    model, n_prompts, generations, tokens, _ = shape
    return one_thread.run_child(__file__, [kind, "--mode", mode, "--shape", model, str(n_prompts), str(generations), str(tokens)])


def bench_config(name: str, shape: tuple) -> tuple[float, float]:
    model, n_prompts, generations, tokens, repeats = shape
    print(f"== {name}: {model}, {n_prompts} prompts x {generations} generations x {tokens} new tokens, "
          f"{repeats} run(s) per mode, interleaved", flush=True)  # fmt: skip
    runs: dict[str, list[dict]] = {"stock": [], "fast": []}
    for r in range(repeats):
        for mode in ("stock", "fast") if r % 2 == 0 else ("fast", "stock"):
            runs[mode].append(run_child("epoch", shape, mode))
            run = runs[mode][-1]
            print(f"   run {r + 1} {mode:5s}: epoch {run['epoch_s']:7.2f} s (cpu {run['epoch_cpu_s']:7.2f} s), "
                  f"update {run['update_s']:6.2f} s x {run['updates']}, peak RSS {run['peak_rss_mb']:6.0f} MB",
                  flush=True)  # fmt: skip
    grad = run_child("grad", shape)
    same = len({run["rollouts"] for mode in runs for run in runs[mode]}) == 1
    stock_epoch, fast_epoch = median(runs["stock"], "epoch_s"), median(runs["fast"], "epoch_s")
    stock_update, fast_update = median(runs["stock"], "update_s"), median(runs["fast"], "update_s")
    print(f"   update step  stock {stock_update:7.2f} s  fast {fast_update:7.2f} s  speedup {stock_update / fast_update:5.2f}x")
    print(f"   whole epoch  stock {stock_epoch:7.2f} s  fast {fast_epoch:7.2f} s  speedup {stock_epoch / fast_epoch:5.2f}x")
    print(
        f"   epoch cpu    stock {median(runs['stock'], 'epoch_cpu_s'):7.2f} s  fast {median(runs['fast'], 'epoch_cpu_s'):7.2f} s"
    )
    print(
        f"   peak RSS     stock {median(runs['stock'], 'peak_rss_mb'):7.0f} MB fast {median(runs['fast'], 'peak_rss_mb'):7.0f} MB"
    )
    print(f"   one loss+backward on the same sampled group ({len(grad['completion_tokens'])} x "
          f"{max(grad['completion_tokens'])} tokens"
          f"{', returns 0..G-1: the sampled ones were flat' if grad['flat_returns'] else ''}): "
          f"stock {grad['stock_loss_s']:.2f} s, fast {grad['fast_loss_s']:.2f} s")  # fmt: skip
    print(f"   grad rel err: whole {grad['rel_err']:.1e}, max per tensor {grad['max_rel_err']:.1e}; "
          f"identical rollouts in every run: {'yes' if same else 'NO'}", flush=True)  # fmt: skip
    if model == "builtin:smollm2":
        print_floors(name, shape, runs["fast"])
    return stock_epoch / fast_epoch, grad["max_rel_err"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer prompts/generations/repeats: < 5 min on a quiet 2-core machine"
    )
    parser.add_argument(
        "--configs", default=DEFAULT_CONFIGS, help=f"comma-separated, of {', '.join(CONFIGS)} (default {DEFAULT_CONFIGS})"
    )
    parser.add_argument("--child", choices=["epoch", "grad", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=["stock", "fast"], default="fast", help=argparse.SUPPRESS)
    parser.add_argument("--shape", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(1)
        model, *sizes = args.shape
        args.shape = (model, *map(int, sizes))
        print(json.dumps({"epoch": child_epoch, "grad": child_grad, "floor": child_floor}[args.child](args)))
        return
    size = "quick" if args.quick else "full"
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"--configs: {', '.join(unknown)} is not one of {', '.join(CONFIGS)}")
    speedup, err = 0.0, 0.0
    for name in names:
        speedup, err = bench_config(name, CONFIGS[name][size])
    print(f"epoch speedup {speedup:.2f}x on {names[-1]} (grad rel err {err:.1e})")


if __name__ == "__main__":
    main()
