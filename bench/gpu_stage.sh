#!/usr/bin/env bash
# Stage this checkout's committed files and the wheel folder for the device tool.
#
#   bench/gpu_stage.sh DEST        # DEST: a folder inside the checkout the session was started in
#
# The device tool sends only the session's own checkout (tracked files, untracked files git does
# not ignore, and the ignored paths named in `carry`): a branch in another worktree travels only
# as a copy inside it. DEST must be ignored there (echo /NAME/ >> .git/info/exclude) and named in
# carry. Then, on the GPU node (one command, ~8 minutes, figures under $OUT): the window of issue 33
#   cd NAME && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site && python3 bench/gpu_window.py --deadline 450 \
#     --out $OUT/gpu_window.jsonl 2>$OUT/stderr.log | tee $OUT/table.md
# (or bench/gpu_suite.py --deadline 420 --out $OUT/gpu_suite.jsonl, the first suite, the same way).
set -euo pipefail
DEST=${1:?usage: bench/gpu_stage.sh DEST}
cd "$(dirname "$0")/.."
[ -n "$(ls .whl/*.whl 2>/dev/null)" ] || bench/gpu_wheels.sh .whl 3.12
rm -rf "$DEST" && mkdir -p "$DEST"
git archive HEAD | tar -x -C "$DEST"
cp -r .whl "$DEST/.whl"
du -sh "$DEST"
