"""Everything to measure on a GPU node, section by section, each result streamed as it comes.

    python bench/gpu_suite.py --deadline 420 --out $OUT/gpu_suite.jsonl   # a GPU node: < 7 min on one H200
    python bench/gpu_suite.py --dry-run --out /tmp/dry.jsonl                # anywhere: builtin:tiny on CPU

Built for a short, bare, offline GPU window: torch 2.11 + transformers 5.17 as preinstalled
there, no Ray, optuna or wandb; pydantic, datasets and comlrl come as wheels (bench/gpu_wheels.sh).
Each section runs in its own subprocess under what is left of `--deadline`, its figures streamed
to `--out` as it ends (bench/gpu_common.py: the flags, environment and deadline this suite and
bench/gpu_window.py share). A section killed at its deadline reports what it had measured so far
("partial"): this file holds what runs in a section's process (child, Partial) and the sections.

Sections, in this order (builtin:qwen2.5-0.5b-shape: the real Qwen2.5-0.5B dimensions with
random weights, float32 master weights, bf16 autocast as the seed study qwen2.5-0.5b.yaml runs):
  env       versions, device, which packages are real and which are stand-ins
  decode    ms per decode step, eager vs compiled (8 sequences x 128 steps, interleaved medians),
            compile time, CUDA-graph recordings in and after warm-up, cudagraph_skips, recompiles
  greedy    greedy tokens, compiled vs eager, over 128 steps: equal or the first differing step
  steps     compiled decoding across AdamW steps: logits vs an eager forward on the current
            weights, and (the control) on the weights before the last step
  epoch_eager, epoch_compiled
            one warm epoch of the seed config's training (8 generations x 128 tokens) on a few of
            its prompts (one prompt-length bucket), projected to its 32 prompts + its eval; peak
            GPU memory beside ratiotune.training.memory's estimate for the same shape at 128 tokens
  update    one loss + backward: comlrl's per-sample loss vs the batched one
  packing, two_gpus   only where Ray is importable (bench/gpu_packing.py)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.machinery
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH)]

import gpu_common  # noqa: E402  (bench/: the parent's flags, environment and deadline, shared with gpu_window.py)

FULL = {"model": "builtin:qwen2.5-0.5b-shape", "generations": 8, "tokens": 128, "epoch_prompts": 2,
        "study_prompts": 32, "eval_samples": 4, "repeats": 3, "step_calls": 6, "lr": 1e-4,
        "backend": "inductor", "packings": "1,2,4,8", "pack_tokens": 32, "pack_epochs": 2}  # fmt: skip
# aot_eager compiles on CPU in seconds (Dynamo + AOTAutograd, no code generation); the same
# guards decide what recompiles.
DRY = {"model": "builtin:tiny", "generations": 2, "tokens": 32, "epoch_prompts": 1,
       "study_prompts": 32, "eval_samples": 1, "repeats": 1, "step_calls": 1, "lr": 1e-2,
       "backend": "aot_eager", "packings": "1", "pack_tokens": 8, "pack_epochs": 1}  # fmt: skip

# Seconds a section needs at most, on the GPU and in the dry run: skipped when less is left.
NEED = {"env": (30, 30), "decode": (150, 60), "greedy": (90, 40), "steps": (90, 40), "epoch_eager": (90, 60),
        "epoch_compiled": (150, 60), "update": (60, 40), "packing": (240, 90), "two_gpus": (120, 60)}  # fmt: skip
ORDER = list(NEED)


# --------------------------------------------------------------------------- in the section's process


class Partial:
    """What a section has measured so far, rewritten to a file at each step (read back on a kill)."""

    def __init__(self, path: Path):
        self.path, self.data = path, {}

    def update(self, **figures) -> None:
        self.data.update(figures)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, default=str))
        os.replace(tmp, self.path)


def install_shims() -> list[str]:
    """Stand-ins for packages the GPU node lacks and the suite never uses: wandb.

    comlrl imports wandb at import time but calls it only when a trainer has a wandb_config
    (ratiotune passes None). The wheel with its dependencies is ~25 MB of the 64 MiB that
    can travel; this stand-in, in the suite's own processes only, raises if anything logs.
    """
    import types

    used = []
    if importlib.util.find_spec("wandb") is None:
        module = types.ModuleType("wandb")
        module.__ratiotune_stand_in__ = True
        # A spec, or importlib.util.find_spec("wandb") raises ValueError (accelerate, preinstalled on
        # the GPU node, asks at import time); with no distribution metadata behind it, accelerate's
        # and transformers' is_wandb_available() still answer False.
        module.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
        module.run = None

        def refuse(*args, **kwargs):
            raise RuntimeError("wandb is a stand-in in bench/gpu_suite.py (not installed): nothing may log to it")

        module.init = module.log = module.finish = refuse
        sys.modules["wandb"] = module
        used.append("wandb")
    return used


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


@contextlib.contextmanager
def counting_cudagraph_records():
    """Counts CUDA-graph recordings (cudagraph trees' record_function: first records and re-records)."""
    count = [0]
    try:
        from torch._inductor import cudagraph_trees

        manager = cudagraph_trees.CUDAGraphTreeManager
        original = manager.record_function
    except (ImportError, AttributeError):  # another torch: the count is unknown, not 0
        yield None
        return

    def record_function(self, *args, **kwargs):
        count[0] += 1
        return original(self, *args, **kwargs)

    manager.record_function = record_function
    try:
        yield count
    finally:
        manager.record_function = original


def compile_counters() -> dict:
    from torch._dynamo.utils import counters

    # cudagraph_skips: inductor compiled the graph but will not run it as a CUDA graph (a CPU
    # tensor, a mutated input, ...): recordings alone would read 0 and hide that.
    return {"dynamo_compiles": counters["frames"]["total"], "graphs": counters["stats"]["unique_graphs"],
            "cudagraph_skips": counters["inductor"]["cudagraph_skips"]}  # fmt: skip


def bucket_prompts(tokenizer, n: int) -> list[str]:
    """The first `n` training prompts of the seed study (builtin:train) in its most common length bucket."""
    from collections import Counter

    from ratiotune.training.generation import cache_length
    from ratiotune.tasks.length_ratio import BUILTIN_PROMPTS
    from ratiotune.tasks.records import load_records

    prompts = [r["prompt"] for r in load_records("builtin:train", BUILTIN_PROMPTS)]
    lengths = {p: cache_length(len(tokenizer(p).input_ids), 1) for p in prompts}
    common = Counter(lengths.values()).most_common(1)[0][0]
    return [p for p in prompts if lengths[p] == common][:n]


class Probe:
    """One agent and its decodings, called as comlrl samples (inference_mode, requires_grad off, eval mode)."""

    def __init__(self, sizes: dict, device: str):
        import torch

        from ratiotune.training.generation import Decoding, compile_config
        from ratiotune.training.models import load_agents

        (model, _), self.tokenizer = load_agents(sizes["model"])
        del _
        self.model, self.device, self.sizes = model.to(device), device, sizes
        self.dtype = torch.bfloat16
        self.decodings = {mode: Decoding(mode, model, device, dtype=self.dtype) for mode in ("eager", "compiled")}
        self.decodings["compiled"].compile_config = compile_config(device, sizes["backend"])
        self.prompt = self.tokenizer(bucket_prompts(self.tokenizer, 1), return_tensors="pt").to(device)

    def autocast(self):
        import torch

        return torch.autocast(torch.device(self.device).type, dtype=self.dtype)

    def generate(self, mode: str, greedy: bool = False, **extra):
        import torch

        decoding, rows, steps = self.decodings[mode], self.sizes["generations"], self.sizes["tokens"]
        kwargs = decoding.generate_kwargs("rollout", rows, self.prompt.input_ids.shape[1], steps)
        model = decoding.decoder()
        flags = [p.requires_grad for p in self.model.parameters()]
        self.model.requires_grad_(False)
        model.eval()
        if greedy:  # greedy allows one sequence per prompt: the prompt `rows` times, the same (rows, length) graph
            prompt = {k: v.expand(rows, -1) for k, v in self.prompt.items()}
            sampling = {"do_sample": False, "num_return_sequences": 1}
        else:
            prompt = dict(self.prompt)
            sampling = {"do_sample": True, "temperature": 0.6, "top_p": 0.6, "num_return_sequences": rows}
        try:
            with torch.inference_mode(), self.autocast():
                return model.generate(
                    **prompt, **sampling, max_new_tokens=steps, min_new_tokens=steps,
                    pad_token_id=self.tokenizer.pad_token_id, **kwargs, **extra,
                )  # fmt: skip
        finally:
            for p, flag in zip(self.model.parameters(), flags):
                p.requires_grad_(flag)


def section_env(sizes: dict, device: str, partial: Partial) -> dict:
    import platform

    import torch
    import transformers

    from ratiotune.training import generation

    figures = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
               "cuda": torch.version.cuda, "device": device, "generate_cache_kwarg": generation.CACHE_KWARG}  # fmt: skip
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        figures.update(gpu=props.name, gpus=torch.cuda.device_count(), gpu_memory_gib=props.total_memory / 2**30)
    partial.update(**figures)
    from importlib import metadata

    from ratiotune.training import trainable  # noqa: F401  (the whole training import chain)

    figures["trainable_imports"] = "ok"
    figures["ray_loaded_by_trainable"] = "ray" in sys.modules  # must be False: the node has no Ray
    for name in ("comlrl", "datasets", "pydantic", "wandb", "ray"):
        if getattr(sys.modules.get(name), "__ratiotune_stand_in__", False):
            figures[name] = "stand-in"
            continue
        try:
            figures[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            figures[name] = "missing"
    return figures


def section_decode(sizes: dict, device: str, partial: Partial) -> dict:
    """Median ms per decode step, eager vs compiled, interleaved, with CUDA-graph and compile counts."""
    probe = Probe(sizes, device)
    steps = sizes["tokens"]
    seconds: dict[str, list[float]] = {"eager": [], "compiled": []}
    with counting_cudagraph_records() as records:
        warm = {}
        for mode in ("eager", "compiled"):  # compiled: call 1 compiles, call 2 records the CUDA graphs
            for call in range(2):
                sync(device)
                start = time.perf_counter()
                probe.generate(mode)
                sync(device)
                warm[f"{mode}_call{call + 1}_s"] = time.perf_counter() - start
        before = compile_counters()
        recorded = records[0] if records is not None else None
        partial.update(**warm, warmup_counters=before, cudagraph_records_warmup=recorded)
        for _ in range(sizes["repeats"]):
            for mode in ("eager", "compiled"):
                sync(device)
                start = time.perf_counter()
                probe.generate(mode)
                sync(device)
                seconds[mode].append(time.perf_counter() - start)
            partial.update(seconds=seconds)
        after = compile_counters()
        ms = {mode: 1000 * statistics.median(s) / steps for mode, s in seconds.items()}
        return {
            **warm, "eager_ms_per_step": ms["eager"], "compiled_ms_per_step": ms["compiled"],
            "speedup": ms["eager"] / ms["compiled"], "compile_s": warm["compiled_call1_s"],
            "cudagraph_records_warmup": recorded,
            "cudagraph_records_after_warmup": None if records is None else records[0] - recorded,
            "cudagraph_skips": after["cudagraph_skips"],
            "dynamo_compiles_after_warmup": after["dynamo_compiles"] - before["dynamo_compiles"],
            "graphs": after["graphs"], "rows": sizes["generations"], "steps": steps, "calls": sizes["repeats"],
        }  # fmt: skip


def section_greedy(sizes: dict, device: str, partial: Partial) -> dict:
    """Greedy tokens: compiled (bf16 copy) vs eager (float32 masters under autocast), and eager on the copy."""
    import torch

    from ratiotune.training.generation import Decoding

    probe = Probe(sizes, device)
    n = probe.prompt.input_ids.shape[1]
    eager = probe.generate("eager", greedy=True)[0, n:]
    compiled = probe.generate("compiled", greedy=True)[0, n:]
    copy_eager = Decoding("eager", probe.decodings["compiled"].decoder(), device)
    probe.decodings["copy_eager"] = copy_eager
    on_copy = probe.generate("copy_eager", greedy=True)[0, n:]

    def first_diff(a, b):
        different = (a != b).nonzero()
        return int(different[0]) if len(different) else None

    return {"steps": int(eager.numel()), "compiled_equals_eager": bool(torch.equal(compiled, eager)),
            "first_diff_vs_eager": first_diff(compiled, eager),
            "compiled_equals_eager_on_copy": bool(torch.equal(compiled, on_copy)),
            "first_diff_vs_eager_on_copy": first_diff(compiled, on_copy),
            "copy_vs_masters_first_diff": first_diff(on_copy, eager)}  # fmt: skip


def section_steps(sizes: dict, device: str, partial: Partial) -> dict:
    """Compiled decoding across AdamW steps (as rollouts between updates), with a control."""
    import torch

    probe = Probe(sizes, device)
    model, decoding = probe.model, probe.decodings["compiled"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=sizes["lr"])
    n = probe.prompt.input_ids.shape[1]

    def update(sequences) -> None:
        model.train()
        tokens = sequences.clone()  # a normal tensor: inference tensors cannot be saved for backward
        with probe.autocast():
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        decoding.refresh()  # as the trainer does after each step

    with counting_cudagraph_records() as records:
        for _ in range(2):
            update(probe.generate("compiled"))
        sync(device)
        before, recorded = compile_counters(), (records[0] if records is not None else None)
        start = time.perf_counter()
        for _ in range(sizes["step_calls"]):
            update(probe.generate("compiled"))
        sync(device)
        per_call = (time.perf_counter() - start) / sizes["step_calls"]
        copy_ = decoding.decoder()
        previous = [p.detach().clone() for p in copy_.parameters()]
        update(probe.generate("compiled"))  # the last step; the control keeps the weights before it
        last = probe.generate("compiled", return_dict_in_generate=True, output_logits=True)
        after = compile_counters()
    compiled = torch.stack(last.logits, dim=1)[:, 1:].float()  # step 0 is the uncompiled prefill

    def eager_logits():
        with torch.no_grad(), probe.autocast():
            return copy_(input_ids=last.sequences.clone()).logits[:, n:-1].float()

    current = eager_logits()
    with torch.no_grad():
        torch._foreach_copy_(list(copy_.parameters()), previous)
    stale = eager_logits()
    vs_current, vs_previous = float((compiled - current).abs().max()), float((compiled - stale).abs().max())
    return {"calls": sizes["step_calls"], "lr": sizes["lr"], "seconds_per_call_with_update": per_call,
            "max_logit_diff_vs_current": vs_current, "max_logit_diff_vs_previous_weights": vs_previous,
            "max_abs_logit": float(current.abs().max()),
            "verdict": "follows the updates" if 2 * vs_current < vs_previous else
                       ("STALE WEIGHTS" if 2 * vs_previous < vs_current
                        else "inconclusive (the step moved the logits less than the noise)"),
            "dynamo_compiles_after_warmup": after["dynamo_compiles"] - before["dynamo_compiles"],
            "cudagraph_records_after_warmup": None if records is None else records[0] - recorded,
            "cudagraph_skips": after["cudagraph_skips"]}  # fmt: skip


def suite_study(sizes: dict, generation: str, device: str, workdir: Path):
    """The seed study (studies/qwen2.5-0.5b.yaml) on the suite's model, a few of its prompts in one bucket."""
    from ratiotune.training.models import char_tokenizer
    from ratiotune.core.study import load_study

    prompts = bucket_prompts(char_tokenizer(), sizes["epoch_prompts"])  # builtin models: one token per character
    (workdir / "prompts.txt").write_text("\n".join(prompts) + "\n")
    overrides = [f"model.name={sizes['model']}", f"task.train_prompts={workdir / 'prompts.txt'}",
                 f"task.eval_samples_per_prompt={sizes['eval_samples']}", f"train.generation={generation}",
                 f"train.num_generations={sizes['generations']}", f"train.max_new_tokens={sizes['tokens']}",
                 "search.space={}", "race.enabled=false",
                 f"resources.gpu={1 if device.startswith('cuda') else 0}"]  # fmt: skip
    return load_study(REPO / "studies" / "qwen2.5-0.5b.yaml", overrides), prompts


def peak_gib(device: str) -> dict:
    import resource

    import torch

    if device.startswith("cuda"):
        return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
                "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}  # fmt: skip
    return {"peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def section_epoch(generation: str):
    def run(sizes: dict, device: str, partial: Partial) -> dict:
        import torch

        from ratiotune.training.generation import compile_config
        from ratiotune.training.memory import GIB, study_estimate
        from ratiotune.training.trainable import Trial

        with tempfile.TemporaryDirectory() as tmp:
            study, prompts = suite_study(sizes, generation, device, Path(tmp))
            estimate, header = study_estimate(study)
            partial.update(estimate_gib=estimate.total / GIB, estimate=estimate.describe(), prompts=len(prompts))
            if device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            trial = Trial(study, {}, devices=[device, device])
            for decoding in trial.trainer.decoding:
                if decoding.mode == "compiled":
                    decoding.compile_config = compile_config(device, sizes["backend"])
            first = trial.run_epoch()
            partial.update(first_epoch_s=first["system/epoch_seconds"], first_eval_s=first.get("system/eval_seconds"))
            second = trial.run_epoch()
        per_prompt = second["system/epoch_seconds"] / len(prompts)
        return {
            "mode": [d.mode for d in trial.trainer.decoding][0], "prompts": len(prompts),
            "first_epoch_s": first["system/epoch_seconds"], "first_eval_s": first.get("system/eval_seconds"),
            "epoch_s": second["system/epoch_seconds"], "eval_s": second.get("system/eval_seconds"),
            "tokens_per_s": second.get("system/tokens_per_second"),
            "projected_study_epoch_s": per_prompt * sizes["study_prompts"] + (second.get("system/eval_seconds") or 0),
            "estimate_gib": estimate.total / GIB, "estimate_cuda_context_gib": estimate.cuda_context / GIB,
            "estimate": estimate.describe(), "decode_copy_gib": sum(d.copy_bytes() for d in trial.trainer.decoding) / GIB,
            "kept_cache_gib": sum(d.kept_bytes() for d in trial.trainer.decoding) / GIB, **peak_gib(device),
        }  # fmt: skip

    return run


def section_update(sizes: dict, device: str, partial: Partial) -> dict:
    """comlrl's per-sample loss + backward vs the batched one, on one real sampled group of agent 0."""
    from comlrl.trainers.reinforce import MAGRPOTrainer

    from ratiotune.training.policy_loss import batched_policy_loss
    from ratiotune.training.trainable import Trial

    with tempfile.TemporaryDirectory() as tmp:
        study, _ = suite_study({**sizes, "epoch_prompts": 1}, "eager", device, Path(tmp))
        trial = Trial(study, {}, devices=[device, device])
    trainer = trial.trainer
    trainer.reward_func.start_group()
    trainer._train_step_returns(next(iter(trainer.get_train_dataloader()))[0])
    sample = trainer.rollout_buffers[0][0]
    returns = [float(i) for i in range(len(sample.returns))]  # never flat: a real gradient
    model = trainer.agents[0]
    seconds: dict[str, list[float]] = {"stock": [], "batched": []}
    for repeat in range(1 + sizes["repeats"]):
        for name, loss_fn in (("stock", MAGRPOTrainer._compute_loss_with_gradients), ("batched", batched_policy_loss)):
            model.zero_grad(set_to_none=True)
            sync(device)
            start = time.perf_counter()
            with trainer.autocast(device):
                loss = loss_fn(trainer, model, sample.completions_data, returns)
            loss.backward()
            sync(device)
            if repeat:  # repeat 0 warms up
                seconds[name].append(time.perf_counter() - start)
        partial.update(seconds=seconds)
    stock, batched = statistics.median(seconds["stock"]), statistics.median(seconds["batched"])
    tokens = max(len(c) for c in sample.completions_data["completion_input_ids"][0])
    return {"stock_s": stock, "batched_s": batched, "speedup": stock / batched, "completion_tokens": tokens}


def section_packing(sizes: dict, device: str, partial: Partial) -> dict:
    import gpu_packing

    dry = not device.startswith("cuda")
    args = argparse.Namespace(model=sizes["model"], epochs=sizes["pack_epochs"], prompts=1, num_generations=sizes["generations"],
                              max_new_tokens=sizes["pack_tokens"], dry_run=dry)  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(p) for p in sizes["packings"].split(",")]:
            try:
                rows.append(gpu_packing.run_packing(args, n, Path(tmp)))
            except (Exception, SystemExit) as exc:  # noqa: BLE001  (8 per GPU may not fit: that is a result too)
                rows.append(
                    {"packing": n, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
                )
            partial.update(rows=rows)
    return {"rows": rows}


def section_two_gpus(sizes: dict, device: str, partial: Partial) -> dict:
    import gpu_packing

    args = argparse.Namespace(model=sizes["model"], epochs=sizes["pack_epochs"], prompts=1, num_generations=sizes["generations"],
                              max_new_tokens=sizes["pack_tokens"], dry_run=not device.startswith("cuda"))  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        return gpu_packing.run_packing(args, 1, Path(tmp), gpu=2)


SECTIONS = {"env": section_env, "decode": section_decode, "greedy": section_greedy, "steps": section_steps,
            "epoch_eager": section_epoch("eager"), "epoch_compiled": section_epoch("compiled"),
            "update": section_update, "packing": section_packing, "two_gpus": section_two_gpus}  # fmt: skip


def die_with_parent() -> None:
    """End this process when the suite's process ends (killed by a timeout, say): no orphan runs on."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def child(name: str, sizes: dict, device: str, partial_path: Path, sections: dict | None = None) -> int:
    """Run one section (of `sections`, default this suite's) in this process; its result (or error) goes to `partial_path`."""
    die_with_parent()
    sys.path[:0] = [str(REPO / "src"), str(BENCH)]
    os.environ.setdefault("WANDB_MODE", "disabled")
    partial = Partial(partial_path)
    shims = install_shims()
    try:
        result = (sections or SECTIONS)[name](sizes, device, partial)
    except BaseException as exc:  # noqa: BLE001  (SystemExit too: the row says what stopped it)
        traceback.print_exc()
        partial.update(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}", stand_ins=shims)
        return 1
    partial.data = {**result, "stand_ins": shims} if shims else result
    partial.update(done=True)
    return 0


# --------------------------------------------------------------------------- the parent


def f(value, spec=".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def describe(row: dict) -> str:
    """One markdown table row for a section's JSON line."""
    return gpu_common.table_row(row, section_text)


def section_text(name: str, row: dict) -> str | None:
    """This suite's words for each section's figures (None: a section it does not know)."""
    if name == "env":
        return (f"Python {row['python']}, torch {row['torch']}, transformers {row['transformers']} (cache as "
                f"`{row['generate_cache_kwarg']}=`), CUDA {row['cuda']}, {row.get('gpus', 0)} x {row.get('gpu', 'no GPU')}"
                f" ({f(row.get('gpu_memory_gib'), '.0f')} GiB); comlrl {row['comlrl']}, datasets {row['datasets']}, "
                f"pydantic {row['pydantic']}, wandb {row['wandb']}, ray {row['ray']}")  # fmt: skip
    elif name == "decode":
        return (f"eager {f(row['eager_ms_per_step'])} ms/step, compiled {f(row['compiled_ms_per_step'])} ms/step "
                f"({f(row['speedup'], '.1f')}x; {row['rows']} rows x {row['steps']} steps, median of {row['calls']}); "
                f"compile {f(row['compile_s'], '.0f')} s; CUDA-graph recordings {row['cudagraph_records_warmup']} in warm-up, "
                f"{row['cudagraph_records_after_warmup']} after; cudagraph_skips {row['cudagraph_skips']}; "
                f"Dynamo compiles after warm-up {row['dynamo_compiles_after_warmup']}")  # fmt: skip
    elif name == "greedy":
        same = lambda equal, diff: "equal" if equal else f"first differs at step {diff}"  # noqa: E731
        return (f"{row['steps']} greedy steps: compiled vs eager "
                f"{same(row['compiled_equals_eager'], row['first_diff_vs_eager'])}; vs eager on the same bf16 copy "
                f"{same(row['compiled_equals_eager_on_copy'], row['first_diff_vs_eager_on_copy'])}; "
                f"eager on the bf16 copy vs on the float32 masters under autocast "
                f"{same(row['copy_vs_masters_first_diff'] is None, row['copy_vs_masters_first_diff'])}")  # fmt: skip
    elif name == "steps":
        return (f"{row['verdict']}: max |logit diff| vs current weights {f(row['max_logit_diff_vs_current'], '.3g')}, "
                f"vs the weights before the last step (control) {f(row['max_logit_diff_vs_previous_weights'], '.3g')} "
                f"(max |logit| {f(row['max_abs_logit'], '.3g')}, lr {row['lr']:g}); after warm-up: Dynamo compiles "
                f"{row['dynamo_compiles_after_warmup']}, CUDA-graph recordings {row['cudagraph_records_after_warmup']}, "
                f"cudagraph_skips {row['cudagraph_skips']}; "
                f"{f(row['seconds_per_call_with_update'])} s per call + step")  # fmt: skip
    elif name.startswith("epoch"):
        peak = (f"peak {f(row['peak_allocated_gib'])} GiB allocated / {f(row['peak_reserved_gib'])} reserved"
                if "peak_allocated_gib" in row else f"peak RSS {f(row.get('peak_rss_gib'))} GiB (host)")  # fmt: skip
        return (f"{row['mode']}: {f(row['epoch_s'], '.1f')} s per epoch of {row['prompts']} prompts (first "
                f"{f(row['first_epoch_s'], '.1f')} s), eval {f(row['eval_s'], '.1f')} s "
                f"(first {f(row['first_eval_s'], '.1f')} s); "
                f"projected study epoch (32 prompts + eval) {f(row['projected_study_epoch_s'], '.0f')} s; {peak} vs "
                f"estimate {f(row['estimate_gib'], '.3g')} GiB "
                f"(incl. {f(row['estimate_cuda_context_gib'], '.3g')} CUDA context)")  # fmt: skip
    elif name == "update":
        return (f"loss+backward over {row['completion_tokens']} tokens: comlrl {f(row['stock_s'], '.3f')} s, "
                f"batched {f(row['batched_s'], '.3f')} s ({f(row['speedup'], '.1f')}x)")  # fmt: skip
    return None


def main() -> None:
    args = gpu_common.parse_args(
        __doc__.splitlines()[0], ORDER, deadline=480, out="gpu_suite.jsonl", dry_run="builtin:tiny on CPU"
    )
    if args.section:
        sys.exit(child(args.section, json.loads(args.sizes), args.device, Path(args.partial)))

    began = time.monotonic()
    import torch  # the parent touches no CUDA: each section's process owns its context

    sizes = DRY if args.dry_run else FULL
    if not args.dry_run and not torch.cuda.is_available():
        sys.exit("gpu_suite: no CUDA device here; run with --dry-run to check the suite on CPU")
    device = "cpu" if args.dry_run else "cuda:0"
    gpus = 0 if args.dry_run else torch.cuda.device_count()
    ray = importlib.util.find_spec("ray") is not None

    def why_skip(name: str) -> str | None:
        if name in ("packing", "two_gpus") and not ray:
            return "Ray is not installed here"
        if name == "two_gpus" and not args.dry_run and gpus < 2:
            return f"{gpus} GPU(s)"
        return None

    env = gpu_common.section_env(Path(args.out), args.dry_run, "gpu-suite")
    gpu_common.run_sections(Path(__file__).resolve(), "suite", args, NEED, sizes, device, env, describe, began,
                            header={"ray": ray}, why_skip=why_skip)  # fmt: skip


if __name__ == "__main__":
    main()
