"""Rewrite Ray's wheel without the parts a ratiotune search never loads, so that Ray fits what travels.

    python bench/trim_ray_wheel.py WHEEL            # in place: the same file name, a smaller wheel

Ray 2.60's wheel is ~76 MiB; a GPU window carries the repository and its wheels in 64 MiB.
Dropped (about 36 MiB), each because a study on one node never imports or starts it:
  ray/jars/                    ray_dist.jar (31 MiB compressed): Java workers only; Ray treats the
                               folder as optional (ray/_private/services.py adds it to the
                               classpath only when it exists)
  ray/dashboard/client/build/  the dashboard's web page (JavaScript); `ratiotune search` starts
                               Ray with include_dashboard=False. Ray's dashboard HTTP server
                               refuses to start on Linux without the folder (http_server_head.py:
                               setup_static_dir), so a one-line index.html and an empty static/
                               stand in: a `ray start --head` still starts, its page says why
  ray/rllib/, ray/serve/, ray/llm/   RL library, model serving, LLM serving: never imported by
                               ray.tune, ray.train or ray.air (bench/gpu_rehearsal.sh runs a whole
                               search, race included, on the trimmed wheel)
The wheel keeps its name and version (so `ray==2.60.0` still resolves to it) and its RECORD lists
exactly the files left, so pip installs it as usual.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import zipfile
from pathlib import Path

DROPPED = ("ray/jars/", "ray/dashboard/client/build/", "ray/rllib/", "ray/serve/", "ray/llm/")
STAND_INS = {
    "ray/dashboard/client/build/index.html": (
        "<p>Ray's dashboard page was left out of this wheel (bench/trim_ray_wheel.py).</p>\n"
    ),
    "ray/dashboard/client/build/static/README": "left out (bench/trim_ray_wheel.py)\n",
}


def trim(wheel: Path) -> tuple[int, int]:
    """Rewrite `wheel` in place without DROPPED; returns its (old, new) size in bytes."""
    before = wheel.stat().st_size
    tmp = wheel.with_suffix(".trimming")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target:
        record, lines = None, []
        for info in source.infolist():
            if info.filename.startswith(DROPPED):
                continue
            if info.filename.endswith(".dist-info/RECORD"):
                record = info
                lines = [line for line in source.read(info).decode().splitlines() if not line.startswith(DROPPED)]
                continue
            target.writestr(info, source.read(info), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
        for name, text in STAND_INS.items():
            target.writestr(name, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            lines.append(f"{name},sha256={digest},{len(text.encode())}")
        assert record is not None, f"{wheel} has no RECORD"
        target.writestr(record, "\n".join(lines) + "\n", compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)  # RECORD last
    os.replace(tmp, wheel)
    return before, wheel.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    args = parser.parse_args()
    before, after = trim(args.wheel)
    print(f"{args.wheel.name}: {before / 2**20:.1f} -> {after / 2**20:.1f} MiB (dropped {', '.join(DROPPED)})")


if __name__ == "__main__":
    main()
