#!/usr/bin/env bash
# The wheels a GPU window needs on the node beyond what it has preinstalled: the training chain
# (bench/gpu_suite.py) and a whole `ratiotune search` through Ray (bench/gpu_window.py).
#
#   bench/gpu_wheels.sh [DIR] [PYTHON]     # default: .whl (git-ignored), Python 3.12 (the node's)
#
# The node has torch 2.11, transformers 5.17, tokenizers, safetensors, accelerate, numpy, pandas,
# pyarrow, scipy, matplotlib, fsspec, xxhash, requests, pyyaml, psutil, tqdm, rich, pytest, and
# torch's and transformers' own dependencies (filelock, typing_extensions, jinja2 with markupsafe,
# packaging, huggingface_hub, regex), but no comlrl, datasets, pydantic, ray, optuna or wandb.
# What travels, at the versions constraints.txt pins:
#   comlrl        the trainer (pure Python)
#   datasets      comlrl and ratiotune.training.magrpo build the prompt set with it; with dill and
#                 multiprocess, which it imports (fsspec, xxhash, pyarrow, pandas are there)
#   pydantic      ratiotune.core.study's schema; with pydantic-core, annotated-types, typing-inspection
#   ray           trimmed by bench/trim_ray_wheel.py (no jars, dashboard page, rllib, serve, llm:
#                 75.6 -> 39.6 MiB), with what `import ray` and ray.tune need beyond the node:
#                 click, jsonschema (attrs, referencing, rpds-py, jsonschema-specifications),
#                 msgpack, protobuf, and tensorboardX (Tune's TensorBoard logger, which
#                 `tensorboard --logdir` reads; Tune only warns without it)
#   optuna        the searcher, with alembic (mako), sqlalchemy and colorlog
# Not carried: wandb (comlrl imports it but never calls it without a wandb_config; its wheel and
# dependencies are ~25 MB): bench/stand_ins/wandb (on PYTHONPATH, so Ray's trial processes see it
# too) refuses to log. optuna-dashboard (`ratiotune dashboard` only).
# The whole carry, the repository's files plus DIR, must stay under CARRY_LIMIT_MIB (60: the device
# tool carries 64 MiB, the rest is headroom); this script measures it and fails above it.
# Install there: python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site DIR/*.whl
set -euo pipefail
DIR=${1:-.whl}
PY=${2:-3.12}
CARRY_LIMIT_MIB=${CARRY_LIMIT_MIB:-60}
cd "$(dirname "$0")/.."
PACKAGES=(
  comlrl==1.4.3
  datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  ray==2.60.0 click==8.5.1 jsonschema==4.26.0 attrs==26.1.0 referencing==0.37.0 rpds-py==2026.9.1
  jsonschema-specifications==2025.9.1 msgpack==1.2.4 protobuf==7.36.2 tensorboardX==2.6.5
  optuna==5.0.0 alembic==1.20.1 Mako==1.4.3 SQLAlchemy==2.1.9 colorlog==6.12.0
)
mkdir -p "$DIR"
rm -f "$DIR"/*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 --platform any -d "$DIR" "${PACKAGES[@]}" 2> >(grep -v "is ignored" >&2)
python3 bench/trim_ray_wheel.py "$DIR"/ray-*.whl
echo "$(ls -1 "$DIR"/*.whl | wc -l) wheels in $DIR"
# The carry: what the device tool sends (tracked and untracked-not-ignored files) plus DIR.
repo=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s}')
wheels=$(stat -c %s "$DIR"/*.whl | awk '{s+=$1} END {print s}')
python3 - "$repo" "$wheels" "$CARRY_LIMIT_MIB" "$DIR" <<'PY'
import sys
repo, wheels, limit, folder = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
total = (repo + wheels) / 2**20
print(f"carry: repository {repo / 2**20:.1f} MiB + {folder} {wheels / 2**20:.1f} MiB = {total:.1f} MiB (limit {limit:g} MiB)")
sys.exit(0 if total < limit else f"gpu_wheels: the carry is {total:.1f} MiB, over {limit:g} MiB")
PY
