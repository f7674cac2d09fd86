"""Decoding speed: ms per decode step of each train.generation mode, and (--study) a study's whole epoch.

    python bench/generation_speed.py                       # builtin:tiny on CPU, 8 x 64 tokens
    python bench/generation_speed.py --model builtin:qwen2.5-0.5b-shape --tokens 16 --repeats 3
    python bench/generation_speed.py --study studies/smollm2-cpu.yaml   # epoch, per-prompt float32 vs shipped

Modes (the default): one agent samples num_generations answers to one prompt through the package's own
decoding (generation.Decoding, as rollouts do), every step forced (min_new_tokens), so each
call is `tokens` decode steps. The modes alternate call by call (eager, static, compiled,
eager, ...) and the figures are medians, so load from other processes on a shared machine
hits every mode alike; read the ratios, absolute ms move with load. The first call of each
mode is warm-up (and, compiled, the compilation): reported as "first call", not in the median.
ms/step is a whole generate() call over its steps, so it includes the prompt's prefill.
Torch uses one thread, as a search trial with resources.cpu: 1 does.

--study: bench/epoch_speed.py (one trial epoch at the study's sizes, split into rollouts, update,
eval and checkpoint, against this CPU's floor, and the window sizes 1, 2, 5, 10).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

MODES = ("eager", "static", "compiled")


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def decode_speed(
    model,
    tokenizer,
    *,
    device: str,
    dtype,
    rows: int,
    tokens: int,
    repeats: int,
    backend: str = "inductor",
    modes: tuple[str, ...] = MODES,
) -> list[dict]:
    """Median ms per decode step of each mode over `repeats` interleaved calls (after one warm-up call each).

    `backend` compiles the compiled mode (inductor: mode reduce-overhead on CUDA, plain on CPU).
    A mode that fails is a row with its error; the others still run.
    """
    import torch

    from ratiotune.training.generation import Decoding, compile_config

    prompt = tokenizer(["Tell a joke about dinosaurs:"], return_tensors="pt").to(device)
    # As trials decode: compiled under bf16 autocast runs on the agent's bf16 copy (Decoding.decoder).
    decodings = {mode: Decoding(mode, model, device, dtype=dtype) for mode in modes}
    if "compiled" in decodings:
        decodings["compiled"].compile_config = compile_config(device, backend)
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    errors: dict[str, str] = {}
    model.eval()
    for call in range(1 + repeats):
        for mode in modes:
            if mode in errors:
                continue
            extra = decodings[mode].generate_kwargs("rollout", rows, prompt.input_ids.shape[1], tokens)
            try:
                sync(device)
                start = time.perf_counter()
                with (
                    torch.inference_mode(),
                    torch.autocast(torch.device(device).type, dtype=dtype, enabled=dtype != torch.float32),
                ):
                    out = decodings[mode].decoder().generate(
                        **prompt, do_sample=True, temperature=0.6, top_p=0.6, max_new_tokens=tokens, min_new_tokens=tokens,
                        num_return_sequences=rows, pad_token_id=tokenizer.pad_token_id, **extra,
                    )  # fmt: skip
                sync(device)
                seconds[mode].append(time.perf_counter() - start)
                assert out.shape[1] - prompt.input_ids.shape[1] == tokens
            except Exception as exc:  # noqa: BLE001  (reported in the table)
                errors[mode] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    results = []
    for mode in modes:
        if mode in errors:
            results.append({"mode": mode, "error": errors[mode]})
            continue
        results.append({"mode": mode, "ms_per_step": 1000 * statistics.median(seconds[mode][1:]) / tokens,
                        "first_call_s": seconds[mode][0], "calls": len(seconds[mode]) - 1})  # fmt: skip
    eager = next((r["ms_per_step"] for r in results if r["mode"] == "eager" and "error" not in r), None)
    for row in results:
        if eager and "ms_per_step" in row:
            row["vs_eager"] = eager / row["ms_per_step"]
    return results


def main() -> None:
    if "--study" in sys.argv or "--child" in sys.argv:
        import epoch_speed  # bench/ is on sys.path when this file runs as a script

        epoch_speed.main()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", help="a study file: its epoch, per-prompt float32 vs shipped (bench/epoch_speed.py)")
    parser.add_argument("--model", default="builtin:tiny")
    parser.add_argument("--rows", type=int, default=8, help="sequences per call (num_generations)")
    parser.add_argument("--tokens", type=int, default=64, help="decode steps per call")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per mode (after one warm-up)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="autocast dtype")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend of the compiled mode")
    args = parser.parse_args()

    import torch

    from ratiotune.training.models import load_agents

    torch.set_num_threads(1)
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    (model, _), tokenizer = load_agents(args.model)
    del _
    model.to(device)
    rows = decode_speed(model, tokenizer, device=device, dtype=getattr(torch, args.dtype), rows=args.rows,
                        tokens=args.tokens, repeats=args.repeats, backend=args.backend)  # fmt: skip
    print(f"{args.model} on {device} ({args.dtype}, torch {torch.__version__}, 1 thread), {args.rows} sequences x "
          f"{args.tokens} steps, median of {args.repeats} interleaved calls, compiled with {args.backend}")  # fmt: skip
    print("| mode | ms/step | vs eager | first call s |")
    print("|---|---|---|---|")
    for row in rows:
        if "error" in row:
            print(f"| {row['mode']} | failed: {row['error']} | | |")
        else:
            print(f"| {row['mode']} | {row['ms_per_step']:.2f} | {row['vs_eager']:.2f}x | {row['first_call_s']:.1f} |")


if __name__ == "__main__":
    main()
