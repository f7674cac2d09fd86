"""One trial epoch at a study's sizes: per-prompt float32 rollouts vs the shipped path, against this CPU's floor.

    python bench/generation_speed.py --study studies/smollm2-cpu.yaml              # ~10 min on 2 cores
    python bench/generation_speed.py --study studies/smollm2-cpu.yaml --repeats 1 --windows 2 --kl-sequences 8

Every measurement runs in its own child process with one torch thread (a trial's resources.cpu: 1),
from the same seed and the study's baseline config (its sizes); the two paths alternate
(per-prompt, shipped, shipped, per-prompt, ...) and the figures are medians, so load from other
processes hits both alike. An epoch is what a trial does per epoch: the training pass (rollouts
and updates, `run_epoch`), the eval (`evaluate`) and the checkpoint (`save`), each timed.

- per-prompt float32: comlrl's one generate() call per prompt on the float32 masters
  (train.decode_dtype float32, `trainer.batched_rollouts = False`): what every trial ran before.
- shipped: the study as it is (each update window decoded in one call per agent, the decode copy
  train.decode_dtype gives on this CPU).

Rollouts are the time in generate() and comlrl's bookkeeping around it; tokens/s counts answer
tokens (trainer.generated_tokens). A decode step is one token for every row of a rollout call:
the decoder's forward of one position and the sampling after it, timed from one forward to the
next (the last to the call's end). The prefill (the prompts' forward and the first token) is timed
apart, per call: it grows with the prompts, not with the answer. (Until 2026-12-07 late the step
was the whole call over its steps, prefill included.) The step's floor is measured in the same run:
the larger of the decoding weights' bytes over the read bandwidth (summing a tensor of the model's float32 size) and the step's
FLOPs (2 x parameters x rows) over a 2048^2 matmul's rate in the decoding dtype.

Then the window (train.rollout_buffer_size) at 1, 2, 5 and 10 prompts, shipped path, on 10
train prompts so that every window is whole; and how far bf16 decoding's next-token
distributions are from float32: mean KL(float32 || bf16) at the study's temperature over the
answer positions of sequences sampled from the float32 model, on the study's model and on
builtin:tiny.

The last line reads:
<study> epoch: A s per-prompt float32, B s shipped (C x); rollouts D tokens/s vs E tokens/s (F x); decode G ms a step, floor H ms
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]
import one_thread  # noqa: E402  (bench/: children on one thread, medians, the floor; shared with step_speed.py)
from one_thread import median  # noqa: E402

REPO = one_thread.REPO
PATHS = ("per-prompt", "shipped")


def load(study_path: str, overrides: list[str]):
    from ratiotune.core.study import load_study

    return load_study(study_path, overrides)


def child_epoch(args: argparse.Namespace) -> dict:
    """One trial's first epoch on one path, split into rollouts, update, eval and checkpoint."""
    import torch
    from transformers.generation.utils import GenerationMixin

    from ratiotune.training.trainable import Trial

    overrides = list(args.set or [])
    if args.path == "per-prompt":
        overrides.append("train.decode_dtype=float32")
    study = load(args.study, overrides)
    start = time.perf_counter()
    trial = Trial(study, dict(study.search.baseline or {}))  # loads the agents and makes the decode copies
    setup_s = time.perf_counter() - start
    trainer = trial.trainer
    trainer.batched_rollouts = args.path != "per-prompt"
    seconds = {"rollouts": 0.0, "update": 0.0}
    decode = {"seconds": 0.0, "steps": 0, "rows": 0, "calls": 0, "prefill_s": 0.0, "step_s": 0.0, "timed_steps": 0}
    phase = {"name": "rollouts"}

    def timed(name, method):
        def wrapper(*a, **kw):
            start = time.perf_counter()
            try:
                return method(*a, **kw)
            finally:
                seconds[name] += time.perf_counter() - start

        return wrapper

    trainer._generate_completions = timed("rollouts", trainer._generate_completions)
    trainer._prefetch_rollouts = timed("rollouts", trainer._prefetch_rollouts)
    trainer._update_from_samples = timed("update", trainer._update_from_samples)
    generate = GenerationMixin.generate

    forwards: list[float] = []  # start times of the decoder's forwards inside the current generate()

    def timed_generate(model, *a, **kw):
        forwards.clear()
        start = time.perf_counter()
        out = generate(model, *a, **kw)
        if phase["name"] == "rollouts":
            end = time.perf_counter()
            sequences = getattr(out, "sequences", out)
            decode["seconds"] += end - start
            if len(forwards) >= 2:  # the prefill's forward, then one per further token
                decode["prefill_s"] += forwards[1] - start
                decode["step_s"] += end - forwards[1]
                decode["timed_steps"] += len(forwards) - 1
            decode["steps"] += sequences.shape[1] - kw["input_ids"].shape[1]
            decode["rows"] = max(decode["rows"], sequences.shape[0])
            decode["calls"] += 1
        return out

    GenerationMixin.generate = timed_generate
    # A decode step is one token for every row: the forward of one position and the sampling after it.
    # generate() first runs the prompts' prefill, whose cost grows with the prompt, not with the answer;
    # so a step is timed from one decoder forward to the next (the last to generate's end), and the
    # prefill, up to the second forward, apart.
    for agent_idx in range(len(trainer.agents)):
        trainer.decoding[agent_idx].decoder().register_forward_pre_hook(
            lambda module, args: forwards.append(time.perf_counter()) if phase["name"] == "rollouts" else None
        )
    tokens_before = trainer.generated_tokens
    start = time.perf_counter()
    trainer.run_epoch()
    train_s = time.perf_counter() - start
    tokens = trainer.generated_tokens - tokens_before
    trainer.reward_func.take_groups()
    phase["name"] = "eval"
    start = time.perf_counter()
    trial.evaluate()
    eval_s = time.perf_counter() - start
    trial.epoch += 1
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        trial.save(Path(tmp) / "checkpoint")
        checkpoint_s = time.perf_counter() - start
    decoder = trainer.decoding[0].decoder()
    params = sum(p.numel() for p in trainer.agents[0].parameters())
    return {
        "setup_s": setup_s,
        "epoch_s": train_s + eval_s + checkpoint_s,
        "train_s": train_s,
        "rollouts_s": seconds["rollouts"],
        "update_s": seconds["update"],
        "other_s": train_s - seconds["rollouts"] - seconds["update"],
        "eval_s": eval_s,
        "checkpoint_s": checkpoint_s,
        "tokens": tokens,
        "decode_s": decode["seconds"],  # whole generate() calls: prefill and steps
        "decode_steps": decode["steps"],
        "prefill_s": decode["prefill_s"],
        "step_s": decode["step_s"],  # the steps after the prefill's
        "timed_steps": decode["timed_steps"],
        "rows": decode["rows"],
        "calls": decode["calls"],
        "parameters": params,
        "decode_dtype": str(next(decoder.parameters()).dtype).removeprefix("torch."),
        # What a decode step reads: every weight once, in the decoding dtype (the embedding
        # table only by the rows it looks up; a tied head reads it whole, as the head).
        "decode_bytes": params * next(decoder.parameters()).element_size(),
        "window": int(trainer.args.rollout_buffer_size),
        "prompts": len(study.prompts("train")),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "torch_threads": torch.get_num_threads(),
    }


def child_floor(args: argparse.Namespace) -> dict:
    """This CPU on one thread, now (one_thread.machine_floor), reading at least the study's model's float32 size."""
    from ratiotune.training.models import load_agents

    (model, _), _tokenizer = load_agents(load(args.study, []).model.name)
    params = sum(p.numel() for p in model.parameters())
    del model, _
    return {**one_thread.machine_floor(params), "parameters": params}


def child_kl(args: argparse.Namespace) -> dict:
    """Mean KL(float32 || bf16 copy) of the next-token distribution at the study's temperature, over
    the answer positions of sequences sampled from the float32 model (one call per train prompt)."""
    import torch

    from ratiotune.training.generation import Decoding
    from ratiotune.training.models import load_agents

    study = load(args.study, [])
    torch.manual_seed(0)
    (model, _), tokenizer = load_agents(args.model)
    model.eval()
    bf16 = Decoding("eager", model, "cpu", decode_dtype="bfloat16").decoder()
    temperature, tokens = study.train.temperature, int((study.search.baseline or {}).get("max_new_tokens", 16))
    formatter = study.get_task().formatters[0]
    prompts = [formatter(r) for r in study.prompts("train")]
    per_prompt = max(1, args.kl_sequences // len(prompts))
    kls, agree, positions = [], 0, 0
    with torch.inference_mode():
        for prompt in prompts:
            ids = tokenizer([prompt], return_tensors="pt").input_ids
            sequences = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                       temperature=temperature, top_p=study.train.top_p, max_new_tokens=tokens,
                                       num_return_sequences=per_prompt, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
            start = ids.shape[1] - 1  # the logits that predict the first answer token
            logits32 = model(sequences).logits[:, start:-1].float() / temperature
            logits16 = bf16(sequences).logits[:, start:-1].float() / temperature
            p32, p16 = logits32.log_softmax(-1), logits16.log_softmax(-1)
            kl = (p32.exp() * (p32 - p16)).sum(-1)
            answer = sequences[:, ids.shape[1] :]
            # Positions up to and including the first pad/eos of each row (what the answer used).
            stops = (answer == tokenizer.pad_token_id) | (answer == tokenizer.eos_token_id)
            ends = [int(r.nonzero()[0]) + 1 if r.any() else r.shape[0] for r in stops]
            for row, end in enumerate(ends):
                kls.extend(kl[row, :end].tolist())
                agree += int((logits32[row, :end].argmax(-1) == logits16[row, :end].argmax(-1)).sum())
                positions += end
    return {"model": args.model, "mean_kl": statistics.fmean(kls), "max_kl": max(kls), "positions": positions,
            "argmax_agree": agree / positions, "sequences": per_prompt * len(prompts)}  # fmt: skip


def run_child(kind: str, study: str, path: str = "shipped", extra: list[str] | None = None) -> dict:
    return one_thread.run_child(__file__, [kind, "--study", study, "--path", path, *(extra or [])])


def step_floor(run: dict, floor: dict) -> float:
    """Seconds a decode step of `run` cannot beat: its weights' bytes read, or its FLOPs at the matmul rate."""
    read = run["decode_bytes"] / floor["bandwidth"]
    arithmetic = 2 * run["parameters"] * run["rows"] / floor["flops"][run["decode_dtype"]]
    return max(read, arithmetic)


def window_prompts(study_path: str, workdir: Path) -> Path:
    """10 train prompts from the study's task (its builtin tutorial set), so windows of 1-10 are whole."""
    from ratiotune.tasks.length_ratio import BUILTIN_PROMPTS
    from ratiotune.tasks.records import load_records

    path = workdir / "window-prompts.txt"
    records = load_records("builtin:tutorial", BUILTIN_PROMPTS)[:10]
    path.write_text("\n".join(r["prompt"] for r in records) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", required=True)
    parser.add_argument("--repeats", type=int, default=2, help="epochs per path, interleaved (default 2)")
    parser.add_argument("--windows", default="1,2,5,10", help="rollout_buffer_size values to time (default 1,2,5,10)")
    parser.add_argument("--kl-sequences", type=int, default=32, help="sampled sequences per model for the KL")
    parser.add_argument("--child", choices=["epoch", "floor", "kl"], help=argparse.SUPPRESS)
    parser.add_argument("--path", choices=PATHS, default="shipped", help=argparse.SUPPRESS)
    parser.add_argument("--set", action="append", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(1)
        print(json.dumps({"epoch": child_epoch, "floor": child_floor, "kl": child_kl}[args.child](args)))
        return

    study = load(args.study, [])
    name = study.name
    baseline = study.search.baseline or {}
    print(f"== {name}: {study.model.name}, {len(study.prompts('train'))} train prompts, window "
          f"{study.train.rollout_buffer_size}, baseline {baseline}; one thread a child, {args.repeats} epoch(s) a path, "
          "interleaved", flush=True)  # fmt: skip
    runs: dict[str, list[dict]] = {path: [] for path in PATHS}
    for r in range(args.repeats):
        for path in PATHS if r % 2 == 0 else PATHS[::-1]:
            run = run_child("epoch", args.study, path)
            runs[path].append(run)
            print(f"   run {r + 1} {path:10s}: epoch {run['epoch_s']:6.1f} s (rollouts {run['rollouts_s']:5.1f}, "
                  f"update {run['update_s']:5.1f}, eval {run['eval_s']:5.1f}, checkpoint {run['checkpoint_s']:5.1f}), "
                  f"{run['calls']} rollout calls of {run['rows']} rows, {run['decode_dtype']}; "
                  f"trial setup {run['setup_s']:.1f} s",
                  flush=True)  # fmt: skip
    floor = run_child("floor", args.study)
    print(f"   floor (one thread, measured now): matmul float32 {floor['flops']['float32'] / 1e9:.0f} GFLOP/s, "
          f"bfloat16 {floor['flops']['bfloat16'] / 1e9:.0f} GFLOP/s; read {floor['bandwidth'] / 1e9:.1f} GB/s")  # fmt: skip
    print()
    print("| path | epoch s | rollouts s | update s | eval s | checkpoint s | other s | rollout tokens/s "
          "| prefill ms a call | decode ms a step (rows, dtype) | step floor ms | peak RSS MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    figures = {}
    for path in PATHS:
        first = runs[path][0]
        rate = median(runs[path], "tokens") / median(runs[path], "rollouts_s")
        step = median(runs[path], "step_s") / first["timed_steps"]
        prefill = median(runs[path], "prefill_s") / first["calls"]
        figures[path] = (median(runs[path], "epoch_s"), rate, step, step_floor(first, floor))
        print(f"| {path} | {figures[path][0]:.1f} | {median(runs[path], 'rollouts_s'):.1f} | "
              f"{median(runs[path], 'update_s'):.1f} | {median(runs[path], 'eval_s'):.1f} | "
              f"{median(runs[path], 'checkpoint_s'):.1f} | {median(runs[path], 'other_s'):.1f} | {rate:.0f} | "
              f"{1e3 * prefill:.0f} | {1e3 * step:.0f} ({first['rows']}, {first['decode_dtype']}) | "
              f"{1e3 * figures[path][3]:.0f} | {median(runs[path], 'peak_rss_mb'):.0f} |", flush=True)  # fmt: skip

    windows = [int(w) for w in args.windows.split(",") if w]
    if windows:
        with tempfile.TemporaryDirectory() as tmp:
            prompts = window_prompts(args.study, Path(tmp))
            print(f"\nthe window (train.rollout_buffer_size), shipped path, 10 train prompts ({prompts.name}), one epoch each:")
            print("| window | rows a call | updates an agent | epoch s | rollouts s | update s | eval + checkpoint s |")
            print("|---|---|---|---|---|---|---|")
            for window in windows:
                sizes = ["--set", f"train.rollout_buffer_size={window}", "--set", f"task.train_prompts={prompts}"]
                run = run_child("epoch", args.study, "shipped", sizes)
                print(f"| {window} | {run['rows']} | {-(-run['prompts'] // window)} | {run['epoch_s']:.1f} | "
                      f"{run['rollouts_s']:.1f} | {run['update_s']:.1f} | {run['eval_s'] + run['checkpoint_s']:.1f} |",
                      flush=True)  # fmt: skip

    if args.kl_sequences:
        print(f"\nbf16 decode copy vs float32: next-token KL at temperature {study.train.temperature} "
              f"over sampled answers ({args.kl_sequences} sequences a model):")  # fmt: skip
        for model in dict.fromkeys([study.model.name, "builtin:tiny"]):
            kl = run_child("kl", args.study, extra=["--model", model, "--kl-sequences", str(args.kl_sequences)])
            print(f"   {model}: mean KL {kl['mean_kl']:.2e} nats (max {kl['max_kl']:.2e}) over {kl['positions']} "
                  f"positions of {kl['sequences']} sequences; the most likely token agrees at {kl['argmax_agree']:.1%}",
                  flush=True)  # fmt: skip

    (a, d, _, _), (b, e, g, h) = figures["per-prompt"], figures["shipped"]
    print(f"{name} epoch: {a:.1f} s per-prompt float32, {b:.1f} s shipped ({a / b:.2f} x); rollouts {d:.0f} tokens/s "
          f"vs {e:.0f} tokens/s ({e / d:.2f} x); decode {1e3 * g:.0f} ms a step, floor {1e3 * h:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
