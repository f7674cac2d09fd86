#!/usr/bin/env bash
# CPU rehearsal of the GPU window: bench/gpu_suite.py --dry-run in a clean virtualenv that holds
# only what the GPU node has (torch, transformers 5.17 and the node's preinstalled packages the
# suite touches: pandas, pyarrow, fsspec, xxhash, requests, pyyaml, psutil) plus the wheel folder
# of bench/gpu_wheels.sh, offline (no network namespace where unshare works), with no Ray.
#
#   bench/gpu_rehearsal.sh            # or: make gpu-rehearsal
#
# Run 1: the suite to its own --deadline 150 under a hard 180 s kill: it must end by itself with
#        its closing line, every section either finished without error or skipped.
# Run 2: the suite killed with SIGKILL half-way (60 s): the lines of the sections that finished
#        must be there, whole, and the killed suite's section process must be gone.
# This machine has no CPU build of torch 2.11 (the node's): torch here is 2.13 and the venv is
# Python 3.11, so the wheels are built for 3.11 with the same pins (the node gets the 3.12 ones).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-/tmp/gpu-rehearsal-venv}
WHEELS=${WHEELS:-/tmp/gpu-rehearsal-wheels}
SITE=${SITE:-/tmp/gpu-rehearsal-site}
OUT=${OUT:-/tmp/gpu-rehearsal-out}
began=$(date +%s)

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import transformers, sys; sys.exit(not transformers.__version__.startswith("5.17"))'; then
  rm -rf "$VENV"
  python3.11 -m venv "$VENV"
  "$VENV/bin/pip" install -q torch==2.13.0   # the CPU build on this machine's disk (pinned: never a range)
  "$VENV/bin/pip" install -q 'transformers==5.17.*' pandas pyarrow fsspec xxhash requests pyyaml psutil
  # transformers' CLI dependency typer brings pydantic here; the node has none: the wheels must bring it.
  "$VENV/bin/pip" uninstall -q -y pydantic pydantic-core annotated-types typing-inspection
fi
bench/gpu_wheels.sh "$WHEELS" 3.11 | tail -1
rm -rf "$SITE" "$OUT" && mkdir -p "$OUT"
"$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl
for absent in ray optuna wandb; do
  if PYTHONPATH="$SITE" "$VENV/bin/python" -c "import $absent" 2>/dev/null; then echo "rehearsal: $absent must not be importable" >&2; exit 1; fi
done

offline=()
if unshare -n true 2>/dev/null; then offline=(unshare -n); fi
run() {  # run SECONDS OUTFILE SUITE-ARGS...: the suite offline, killed with SIGKILL after SECONDS
  local seconds=$1 out=$2; shift 2
  env -i PATH=/usr/bin:/bin HOME="$HOME" PYTHONPATH="$SITE" HF_HUB_OFFLINE=1 PIP_NO_INDEX=1 \
    timeout -s KILL "$seconds" "${offline[@]}" "$VENV/bin/python" bench/gpu_suite.py --dry-run --out "$out" "$@" \
    >"$out.log" 2>"$out.err"
}

echo "rehearsal 1: --dry-run --deadline 150 under a 180 s kill ${offline[*]:+(no network: unshare -n)}"
start=$(date +%s)
run 180 "$OUT/full.jsonl" --deadline 150 || { echo "rehearsal 1 failed (exit $?)"; tail -30 "$OUT/full.jsonl.err"; exit 1; }
grep '^|' "$OUT/full.jsonl.log"
echo "rehearsal 1: $(( $(date +%s) - start )) s"

echo "rehearsal 2: --dry-run --deadline 600, killed with SIGKILL after 60 s"
start=$(date +%s)
run 60 "$OUT/killed.jsonl" --deadline 600 && { echo "rehearsal 2: the suite was not killed"; exit 1; }
sleep 2
grep '^|' "$OUT/killed.jsonl.log" || true
echo "rehearsal 2: killed after $(( $(date +%s) - start )) s"

"$VENV/bin/python" - "$OUT" <<'PY'
import json, subprocess, sys
from pathlib import Path

out = Path(sys.argv[1])
full = [json.loads(line) for line in (out / "full.jsonl").read_text().splitlines()]
assert full[0]["section"] == "suite" and "total_s" in full[-1], "run 1 did not end with its closing line"
sections = full[1:-1]
failed = [r for r in sections if "error" in r]
assert not failed, f"sections failed: {failed}"
done = [r["section"] for r in sections if r.get("done")]
skipped = {r["section"]: r["skipped"] for r in sections if "skipped" in r}
assert "env" in done and "decode" in done, done
assert all("Ray is not installed" in skipped[s] for s in ("packing", "two_gpus")), skipped
env = next(r for r in sections if r["section"] == "env")
assert env["transformers"].startswith("5.17") and env["wandb"] == "stand-in" and env["ray"].startswith("missing"), env
assert env["generate_cache_kwarg"] == "past_key_values" and env["ray_loaded_by_trainable"] is False, env
print(f"run 1: {full[-1]['total_s']:.0f} s; finished {done}; skipped {sorted(skipped)}")

lines = (out / "killed.jsonl").read_text().splitlines()
killed = [json.loads(line) for line in lines]  # every line whole: each was written and flushed at once
finished = [r["section"] for r in killed if r.get("done")]
assert finished and "total_s" not in killed[-1], "run 2: no finished section, or it was not killed"
left = subprocess.run(["pgrep", "-f", str(out / "killed.jsonl")], capture_output=True, text=True).stdout.split()
assert not left, f"run 2: processes of the killed suite still run: {left}"
print(f"run 2 (killed at 60 s): {len(killed)} whole lines, finished sections {finished}; no process left behind")
PY
echo "rehearsal passed in $(( $(date +%s) - began )) s"
