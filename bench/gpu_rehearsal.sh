#!/usr/bin/env bash
# CPU rehearsal of the GPU window, from the wheels that travel, without the project's own .venv:
# a clean virtualenv that holds only what the GPU node has (torch, transformers 5.17 and the node's
# preinstalled packages: see bench/gpu_wheels.sh), the wheel folder of bench/gpu_wheels.sh installed
# offline with --no-index into a --target folder as on the node, the repository's src/ and the
# wandb stand-in on PYTHONPATH, no network (a fresh network namespace with only loopback up, where
# unshare works).
#
#   bench/gpu_rehearsal.sh            # or: make gpu-rehearsal
#
# 1. the set: ray (trimmed: no jars), optuna, comlrl, datasets, pydantic import from the folder;
#    wandb only as the stand-in; ray_dist.jar is absent.
# 2. a real `ratiotune search` of studies/gpu-window.yaml (4 trials x 2 epochs, the race) with
#    resources.gpu=0, then `ratiotune best`: both must exit 0, the race must have a result, and
#    `best` must print its train: block.
# 3. bench/gpu_window.py --dry-run (every section on builtin:tiny on CPU) to its own deadline:
#    it must end with its closing line, every section finished without error or skipped.
# This machine has Python 3.11 and torch 2.13 (CPU); Python 3.12.1 exists under pyenv, but the only
# torch for it that can be had is PyPI's CUDA build (several GB): so the venv is Python 3.11 and the
# wheels are its twin, built for 3.11 with the same pins (the node gets the 3.12 ones).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
BUILD=${BUILD:-$REPO/build/gpu-rehearsal}   # git-ignored, per checkout: two worktrees never share it
VENV=$BUILD/venv WHEELS=$BUILD/wheels SITE=$BUILD/site OUT=$BUILD/out
began=$(date +%s)

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import transformers, sys; sys.exit(not transformers.__version__.startswith("5.17"))'; then
  rm -rf "$VENV"
  python3.11 -m venv "$VENV"
  "$VENV/bin/pip" install -q torch==2.13.0   # the CPU build on this machine's disk (pinned: never a range)
  "$VENV/bin/pip" install -q 'transformers==5.17.*' tokenizers safetensors accelerate numpy pandas pyarrow scipy \
    matplotlib fsspec xxhash requests pyyaml psutil tqdm rich
fi
# What the node lacks must come from the wheels: nothing of it may be in the venv.
"$VENV/bin/pip" uninstall -q -y pydantic pydantic-core annotated-types typing-inspection ray optuna wandb \
  comlrl datasets alembic sqlalchemy colorlog tensorboardX 2>/dev/null || true
CARRY_LIMIT_MIB=${CARRY_LIMIT_MIB:-60} bench/gpu_wheels.sh "$WHEELS" 3.11 | tail -2
rm -rf "$SITE" "$OUT" && mkdir -p "$OUT"
"$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl
PYPATH="$SITE:$REPO/src:$REPO/bench/stand_ins"

offline=()
if unshare -n true 2>/dev/null; then offline=(unshare -n); fi
OFFLINE=${offline[*]}
inside() {  # inside SECONDS COMMAND...: offline (loopback up), clean environment, killed after SECONDS
  local seconds=$1; shift
  env -i PATH="$VENV/bin:/usr/bin:/bin" HOME="$HOME" PYTHONPATH="$PYPATH" HF_HUB_OFFLINE=1 PIP_NO_INDEX=1 \
    WANDB_MODE=disabled RAY_ADDRESS=local OMP_NUM_THREADS=1 OFFLINE="$OFFLINE" \
    timeout -s KILL "$seconds" "${offline[@]}" bash -c '[ -z "$OFFLINE" ] || ip link set lo up; exec "$@"' _ "$@"
}

echo "rehearsal 1: the set imports from the wheels ${offline[*]:+(no network: unshare -n, loopback only)}"
inside 120 python - <<'PY'
import importlib, os, sys
site = os.environ["PYTHONPATH"].split(":")[0]
for name in ("ray", "ray.tune", "optuna", "comlrl", "datasets", "pydantic", "sqlalchemy", "tensorboardX"):
    module = importlib.import_module(name)
    assert module.__file__.startswith(site), f"{name} comes from {module.__file__}, not the wheels"
import ray, wandb
assert getattr(wandb, "__ratiotune_stand_in__", False), f"wandb is not the stand-in: {wandb.__file__}"
assert not os.path.exists(os.path.join(os.path.dirname(ray.__file__), "jars")), "the Ray wheel still has its jars"
assert ".venv" not in sys.executable
import socket
try:
    socket.create_connection(("pypi.org", 443), timeout=3)
    print("  note: the network is reachable here (no unshare)")
except OSError:
    print("  offline: pypi.org is unreachable")
print(f"  ray {ray.__version__} (no jars), optuna {importlib.import_module('optuna').__version__}, python {sys.version.split()[0]}")
PY

echo "rehearsal 2: ratiotune search studies/gpu-window.yaml --set resources.gpu=0, then ratiotune best"
start=$(date +%s)
inside 600 python -m ratiotune search studies/gpu-window.yaml --set resources.gpu=0 --storage "$OUT" --name rehearsal \
  >"$OUT/search.log" 2>&1 || { echo "rehearsal 2: search failed (exit $?)"; tail -40 "$OUT/search.log"; exit 1; }
inside 120 python -m ratiotune best "$OUT/rehearsal" >"$OUT/best.log" 2>&1 \
  || { echo "rehearsal 2: best failed (exit $?)"; tail -40 "$OUT/best.log"; exit 1; }
grep -q "^train:" "$OUT/best.log" || { echo "rehearsal 2: best printed no train: block"; cat "$OUT/best.log"; exit 1; }
[ -f "$OUT/rehearsal/race/summary.md" ] || { echo "rehearsal 2: the race left no summary"; exit 1; }
grep -E "TERMINATED|confirmed|baseline stands" "$OUT/search.log" | tail -3 || true
head -1 "$OUT/best.log"
echo "rehearsal 2: search + race + best in $(( $(date +%s) - start )) s ($(wc -l <"$OUT/search.log") lines of output)"

[ -n "${SKIP_WINDOW:-}" ] && { echo "rehearsal 3 skipped (SKIP_WINDOW)"; exit 0; }
echo "rehearsal 3: bench/gpu_window.py --dry-run --deadline 420 under a 480 s kill"
start=$(date +%s)
inside 480 python bench/gpu_window.py --dry-run --deadline 420 --out "$OUT/window.jsonl" >"$OUT/window.log" 2>"$OUT/window.err" \
  || { echo "rehearsal 3 failed (exit $?)"; tail -30 "$OUT/window.err"; exit 1; }
grep '^|' "$OUT/window.log"
echo "rehearsal 3: $(( $(date +%s) - start )) s"
"$VENV/bin/python" - "$OUT/window.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert rows[0]["section"] == "window" and "total_s" in rows[-1], "the window did not end with its closing line"
sections = rows[1:-1]
failed = [r for r in sections if "error" in r]
assert not failed, f"sections failed: {failed}"
print(f"  finished {[r['section'] for r in sections if r.get('done')]}; skipped {[r['section'] for r in sections if 'skipped' in r]}")
PY
echo "rehearsal passed in $(( $(date +%s) - began )) s"
