"""Everything to measure on a GPU machine, in one command: one markdown table + a JSON file.

    python bench/gpu_suite.py                    # on a machine with 1+ GPUs: < 8 min on one H200
    python bench/gpu_suite.py --dry-run          # anywhere: tiny sizes on CPU, ~2-3 min, checks the suite

Sections (builtin:qwen2.5-0.5b-shape, the real Qwen2.5-0.5B dimensions with random weights,
bf16 autocast over float32 master weights as trials train; nothing is downloaded):
1. rollout: ms per decode step of one generate() at num_generations sequences in each
   train.generation mode (eager: the dynamic cache, as comlrl calls it; static: the kept
   static cache uncompiled; compiled: that cache + the decode step compiled, mode
   reduce-overhead = CUDA graphs), through the package's generation.Decoding, interleaved,
   medians (bench/generation_speed.py); the first call of each is its compile time. Then the
   compiled mode over 30 calls with an AdamW step of the agent between calls (as rollouts
   between updates): Dynamo compiles and CUDA-graph recordings after the warm-up call (both
   should be 0), and the max |logit| difference of the last compiled call against an eager
   forward of the same tokens on the updated weights (stale weights in a graph would show here).
2. epoch: one training epoch of the package's Trial on cuda:0 (the second one is timed), with
   train.generation eager and compiled (the first epoch of compiled includes its compile time).
3. update: one loss + backward on the same sampled group, stock comlrl vs the batched
   update (train.fast_update), median of a few repeats, torch.cuda.synchronize'd.
4. packing: bench/gpu_packing.py's table (1, 2, 4, 8 trials per GPU through Ray Tune).
5. with 2+ GPUs: one `resources.gpu: 2` trial (one agent per GPU, comlrl's "mp").
--dry-run runs every section on CPU with builtin:tiny and small sizes (one logical GPU for
packing, two CPU device names for the 2-GPU trial): its figures say nothing about GPUs.
A section that fails is reported in the table with its error; the others still run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gpu_packing  # noqa: E402  (bench/gpu_packing.py: the packing table, reused as is)
from generation_speed import decode_speed  # noqa: E402  (bench/generation_speed.py: ms/step per mode)
from step_speed import make_study  # noqa: E402  (the smoke study with a model and sizes)

FULL = {"model": "builtin:qwen2.5-0.5b-shape", "generations": 8, "tokens": 128, "prompts": 2,
        "packings": "1,2,4,8", "pack_tokens": 32, "pack_epochs": 2, "repeats": 3,
        "update_calls": 30, "backend": "inductor"}  # fmt: skip
# The dry run compiles with aot_eager (Dynamo + AOTAutograd, no code generation): seconds, not
# minutes, on CPU, and the same guards decide what recompiles.
DRY = {"model": "builtin:tiny", "generations": 4, "tokens": 16, "prompts": 1,
       "packings": "1,2", "pack_tokens": 8, "pack_epochs": 2, "repeats": 2,
       "update_calls": 30, "backend": "aot_eager"}  # fmt: skip


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def rollout(sizes: dict, device: str, dtype) -> dict:
    """ms per decode step per train.generation mode, then the compiled mode across AdamW updates."""
    from ratiotune.models import load_agents

    (agent, _), tokenizer = load_agents(sizes["model"])
    del _
    agent.to(device)
    speed = decode_speed(agent, tokenizer, device=device, dtype=dtype, rows=sizes["generations"], tokens=sizes["tokens"],
                         repeats=sizes["repeats"], backend=sizes["backend"])  # fmt: skip
    return {"speed": speed, "updates": compiled_across_updates(agent, tokenizer, sizes, device, dtype)}


@contextlib.contextmanager
def counting_cudagraph_records():
    """Counts CUDA-graph recordings (cudagraph trees' record_function: first records and re-records)."""
    from torch._inductor import cudagraph_trees

    count = [0]
    original = cudagraph_trees.CUDAGraphTreeManager.record_function

    def record_function(self, *args, **kwargs):
        count[0] += 1
        return original(self, *args, **kwargs)

    cudagraph_trees.CUDAGraphTreeManager.record_function = record_function
    try:
        yield count
    finally:
        cudagraph_trees.CUDAGraphTreeManager.record_function = original


def compiled_across_updates(model, tokenizer, sizes: dict, device: str, dtype) -> dict:
    """`update_calls` compiled rollout calls, each followed by an AdamW step on its own sequences."""
    import torch
    from torch._dynamo.utils import counters

    from ratiotune.generation import Decoding, compile_config

    decoding = Decoding("compiled", model, device)
    decoding.compile_config = compile_config(device, sizes["backend"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    prompt = tokenizer(["Invent a new type of fruit:"], return_tensors="pt").to(device)
    rows, steps, prompt_len = sizes["generations"], sizes["tokens"], prompt.input_ids.shape[1]

    def autocast():
        return torch.autocast(torch.device(device).type, dtype=dtype)

    def generate(**extra):
        model.eval()
        with torch.inference_mode(), autocast():
            return model.generate(
                **prompt, do_sample=True, temperature=0.6, top_p=0.6, max_new_tokens=steps, min_new_tokens=steps,
                num_return_sequences=rows, pad_token_id=tokenizer.pad_token_id,
                **decoding.generate_kwargs("rollout", rows, prompt_len, steps), **extra,
            )  # fmt: skip

    def update(sequences) -> None:
        model.train()
        tokens = sequences.clone()  # a normal tensor: inference tensors cannot be saved for backward
        with autocast():
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()  # in place: the graphs must read the new values
        optimizer.zero_grad(set_to_none=True)

    with counting_cudagraph_records() as records:
        update(generate())  # warm-up: compiles (and records the CUDA graphs)
        sync(device)
        frames, graphs, recorded = counters["frames"]["total"], counters["stats"]["unique_graphs"], records[0]
        start = time.perf_counter()
        for _ in range(sizes["update_calls"]):
            update(generate())
        sync(device)
        seconds = time.perf_counter() - start
        last = generate(return_dict_in_generate=True, output_logits=True)
    compiled_logits = torch.stack(last.logits, dim=1).float()  # (rows, steps, vocab): step 0 is the uncompiled prefill
    with torch.no_grad(), autocast():
        eager_logits = model(input_ids=last.sequences.clone()).logits[:, prompt_len - 1 : -1].float()
    return {
        "calls": sizes["update_calls"],
        "dynamo_compiles_after_warmup": counters["frames"]["total"] - frames,
        "new_graphs_after_warmup": counters["stats"]["unique_graphs"] - graphs,
        "cudagraph_records_warmup": recorded if device.startswith("cuda") else None,
        "cudagraph_records_after_warmup": records[0] - recorded if device.startswith("cuda") else None,
        "max_logit_diff": float((compiled_logits - eager_logits).abs().max()),
        "max_abs_logit": float(eager_logits.abs().max()),
        "seconds_per_call_with_update": seconds / sizes["update_calls"],
    }


def epoch(sizes: dict, device: str, workdir: Path, generation: str) -> dict:
    """Two epochs of the package's Trial on `device` with train.generation = `generation`; the second is timed."""
    import torch

    from ratiotune.generation import compile_config
    from ratiotune.trainable import Trial

    study = make_study(sizes["model"], sizes["prompts"], sizes["generations"], sizes["tokens"], True, workdir)
    # Eval: 2 answers per held-out prompt (the smoke study's 4 would double the eval time).
    study = study.model_copy(update={"task": study.task.model_copy(update={"eval_samples_per_prompt": 2}),
                                     "train": study.train.model_copy(update={"generation": generation})})  # fmt: skip
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    trial = Trial(study, {}, devices=[device, device])
    for decoding in trial.trainer.decoding:
        if decoding.mode == "compiled":
            decoding.compile_config = compile_config(device, sizes["backend"])
    first = trial.run_epoch()
    second = trial.run_epoch()
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
    return {"first_epoch_s": first["system/epoch_seconds"], "epoch_s": second["system/epoch_seconds"],
            "eval_s": second["system/eval_seconds"], "tokens_per_s": second["system/tokens_per_second"],
            "peak_allocated_gib": peak, "autocast": str(trial.trainer.autocast_dtype)}  # fmt: skip


def update(sizes: dict, device: str, workdir: Path) -> dict:
    """Stock vs batched loss + backward of agent 0 on one real sampled group (as step_speed.child_grad)."""
    from comlrl.trainers.reinforce import MAGRPOTrainer

    from ratiotune.magrpo import batched_policy_loss
    from ratiotune.trainable import Trial

    trial = Trial(make_study(sizes["model"], 1, sizes["generations"], sizes["tokens"], True, workdir), {},
                  devices=[device, device])  # fmt: skip
    trainer = trial.trainer
    trainer.reward_func.start_group()
    trainer._train_step_returns(next(iter(trainer.get_train_dataloader()))[0])
    sample = trainer.rollout_buffers[0][0]
    returns = [float(i) for i in range(len(sample.returns))]  # never flat: a real gradient
    model = trainer.agents[0]
    seconds: dict[str, list[float]] = {"stock": [], "fast": []}
    for repeat in range(1 + sizes["repeats"]):
        for name, loss_fn in (("stock", MAGRPOTrainer._compute_loss_with_gradients), ("fast", batched_policy_loss)):
            model.zero_grad(set_to_none=True)
            sync(device)
            start = time.perf_counter()
            with trainer.autocast(device):
                loss = loss_fn(trainer, model, sample.completions_data, returns)
            loss.backward()
            sync(device)
            if repeat:  # repeat 0 warms up
                seconds[name].append(time.perf_counter() - start)
    stock, fast = statistics.median(seconds["stock"]), statistics.median(seconds["fast"])
    tokens = max(len(c) for c in sample.completions_data["completion_input_ids"][0])
    return {"stock_s": stock, "fast_s": fast, "speedup": stock / fast, "completion_tokens": tokens}


def packing(sizes: dict, dry_run: bool, workdir: Path) -> list[dict]:
    args = argparse.Namespace(model=sizes["model"], epochs=sizes["pack_epochs"], prompts=1,
                              num_generations=sizes["generations"], max_new_tokens=sizes["pack_tokens"], dry_run=dry_run)  # fmt: skip
    rows = []
    for n in [int(p) for p in sizes["packings"].split(",")]:
        try:
            rows.append(gpu_packing.run_packing(args, n, workdir))
        except (Exception, SystemExit) as exc:  # noqa: BLE001  (8 per GPU may not fit: that is a result too)
            rows.append({"packing": n, "error": str(exc).splitlines()[0][:200]})
    return rows


def two_gpus(sizes: dict, dry_run: bool, workdir: Path) -> dict:
    args = argparse.Namespace(model=sizes["model"], epochs=sizes["pack_epochs"], prompts=1,
                              num_generations=sizes["generations"], max_new_tokens=sizes["pack_tokens"], dry_run=dry_run)  # fmt: skip
    return gpu_packing.run_packing(args, 1, workdir, gpu=2)


def section(results: dict, name: str, fn, *args) -> None:
    start = time.perf_counter()
    print(f"-- {name} ...", flush=True)
    try:
        results[name] = fn(*args)
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        results[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
    print(f"   {name} done in {time.perf_counter() - start:.0f} s", flush=True)


def table(results: dict, header: str) -> str:
    f = lambda v, spec=".1f": "n/a" if v is None else format(v, spec)  # noqa: E731
    lines = [f"### {header}", "", "| section | measure | value |", "|---|---|---|"]
    rollout = results.get("rollout", {})
    if "error" in rollout:
        lines.append(f"| rollout | error | {rollout['error']} |")
    for row in rollout.get("speed", []):
        value = row.get("error") or (f"{row['ms_per_step']:.2f} ms/step ({row['vs_eager']:.2f}x eager; "
                                     f"first call {row['first_call_s']:.1f} s)")  # fmt: skip
        lines.append(f"| rollout | {row['mode']} | {value} |")
    u = rollout.get("updates")
    if u:
        records = "n/a (no CUDA)" if u["cudagraph_records_after_warmup"] is None else (
            f"{u['cudagraph_records_after_warmup']} (warm-up {u['cudagraph_records_warmup']})")
        lines.append(f"| rollout | compiled, {u['calls']} calls with AdamW steps between | Dynamo compiles after warm-up "
                     f"{u['dynamo_compiles_after_warmup']} (new graphs {u['new_graphs_after_warmup']}), CUDA-graph "
                     f"recordings after warm-up {records}, max logit diff vs eager {u['max_logit_diff']:.3g} "
                     f"(max |logit| {u['max_abs_logit']:.3g}), {u['seconds_per_call_with_update']:.2f} s per call + update |")  # fmt: skip
    for name in ("epoch_eager", "epoch_compiled", "update", "two_gpus"):
        row = results.get(name)
        if row is None:
            continue
        if "error" in row:
            lines.append(f"| {name} | error | {row['error']} |")
        elif name.startswith("epoch"):
            lines.append(f"| epoch | {name.removeprefix('epoch_')}: seconds (2nd epoch; 1st {f(row['first_epoch_s'])}) | {f(row['epoch_s'])} s, eval {f(row['eval_s'])} s, "
                         f"{f(row['tokens_per_s'], '.0f')} tokens/s, peak {f(row['peak_allocated_gib'], '.2f')} GiB allocated |")  # fmt: skip
        elif name == "update":
            lines.append(f"| update | loss+backward, {row['completion_tokens']} tokens | stock {row['stock_s']:.3f} s, "
                         f"batched {row['fast_s']:.3f} s: {row['speedup']:.2f}x |")  # fmt: skip
        else:
            lines.append(f"| 2 GPUs | resources.gpu: 2 trial | epoch {f(row['epoch_s'])} s, peak {f(row['allocated_gib'], '.2f')} GiB/GPU "
                         f"allocated (estimate {f(row['estimate_gib'], '.2f')} GiB per trial) |")  # fmt: skip
    for row in results.get("packing", []):
        if "error" in row:
            lines.append(f"| packing | {row['packing']} trials/GPU | failed: {row['error']} |")
            continue
        lines.append(f"| packing | {row['packing']} trials/GPU ({row['at_once']} at once) | epoch {row['epoch_s']:.1f} s, "
                     f"{row['trials_per_gpu_hour']:.0f} trials/GPU-hour, peak {row['allocated_gib']:.2f} GiB allocated / "
                     f"{row['reserved_gib']:.2f} reserved vs estimate {row['estimate_gib']:.2f} GiB per trial |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on CPU: checks the suite, not the GPU")
    parser.add_argument("--out", default="gpu_suite.json", help="JSON results (default: ./gpu_suite.json)")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: rollout,epoch,update,packing,two_gpus")
    args = parser.parse_args()

    import ray
    import torch

    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    sizes = DRY if args.dry_run else FULL
    gpus = torch.cuda.device_count()
    if args.dry_run:
        device, where = "cpu", "CPU (dry run: figures say nothing about GPUs)"
        ray.init(address="local", num_cpus=os.cpu_count() or 2, num_gpus=2, include_dashboard=False, logging_level="WARNING")
    else:
        if not gpus:
            sys.exit("gpu_suite: no CUDA device here; run with --dry-run to check the suite on CPU")
        device = "cuda:0"
        props = torch.cuda.get_device_properties(0)
        where = f"{gpus} x {props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}"
        ray.init(address="local", include_dashboard=False, logging_level="WARNING")
    skip = set(filter(None, args.skip.split(",")))
    header = (f"{sizes['model']}, bf16 autocast over float32 weights, {sizes['generations']} generations x "
              f"{sizes['tokens']} new tokens, on {where}")  # fmt: skip
    print(header, flush=True)

    began = time.perf_counter()
    results: dict = {"header": header, "sizes": sizes, "dry_run": args.dry_run}
    with tempfile.TemporaryDirectory(prefix="gpu-suite-") as tmp:
        work = Path(tmp)
        if "rollout" not in skip:
            section(results, "rollout", rollout, sizes, device, torch.bfloat16)
        if "epoch" not in skip:
            for generation in ("eager", "compiled"):
                section(results, f"epoch_{generation}", epoch, sizes, device, work, generation)
        if "update" not in skip:
            section(results, "update", update, sizes, device, work)
        if "packing" not in skip:
            section(results, "packing", packing, sizes, args.dry_run, work)
        if "two_gpus" not in skip and (args.dry_run or gpus >= 2):
            section(results, "two_gpus", two_gpus, sizes, args.dry_run, work)
    results["total_s"] = time.perf_counter() - began
    ray.shutdown()
    print()
    print(table(results, header))
    print(f"\ntotal {results['total_s']:.0f} s; JSON: {args.out}")
    Path(args.out).write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
