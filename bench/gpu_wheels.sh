#!/usr/bin/env bash
# The wheels bench/gpu_suite.py needs on the GPU node beyond what it has preinstalled.
#
#   bench/gpu_wheels.sh [DIR] [PYTHON]     # default: .whl (git-ignored), Python 3.12 (the node's)
#
# The node has torch 2.11, transformers 5.17, tokenizers, safetensors, accelerate, numpy, pandas,
# pyarrow, fsspec, xxhash, requests, pyyaml, psutil, tqdm, rich, pytest (and more), but no comlrl,
# datasets, pydantic, ray, optuna or wandb. What the suite imports beyond that list, with the
# versions constraints.txt pins:
#   comlrl        the trainer (pure Python)
#   datasets      comlrl and ratiotune.training.magrpo build the prompt set with it; with dill and
#                 multiprocess, which it imports (fsspec, xxhash, pyarrow, pandas are there)
#   pydantic      ratiotune.core.study's schema; with pydantic-core, annotated-types, typing-inspection
# Not carried: wandb (comlrl imports it but never calls it without a wandb_config; its wheel
# and dependencies are ~25 MB; the suite's processes get a stand-in that refuses to log),
# ray (78 MB: the packing and two-GPU sections run only where Ray is installed), optuna.
# Install there: python3 -m pip install -q --no-index --no-deps --target /tmp/site DIR/*.whl
set -euo pipefail
DIR=${1:-.whl}
PY=${2:-3.12}
cd "$(dirname "$0")/.."
PACKAGES=(
  comlrl==1.4.3
  datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
)
mkdir -p "$DIR"
rm -f "$DIR"/*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 --platform any -d "$DIR" "${PACKAGES[@]}"
ls -1 "$DIR"
du -sh "$DIR"
