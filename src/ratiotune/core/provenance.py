"""provenance.json: what produced an experiment folder, written by `search` at start.

Plain JSON, so anyone can read it without trusting the folder: the ratiotune version
(and git revision when run from a checkout), the versions of the libraries whose
behaviour decides the results, the command line, and the GPUs this machine showed.
`resume` appends one entry per resume, so the folder tells its whole history.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

PROVENANCE_FILE = "provenance.json"

# Distributions whose versions change what a study computes.
PACKAGES = ("ratiotune", "torch", "transformers", "ray", "optuna", "comlrl")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_revision() -> str | None:
    """The checkout's commit (with '+dirty' for local changes), or None outside a git checkout."""
    source = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=source,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "") if commit else None


def gpus_seen() -> list[str]:
    import torch

    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def collect(argv: list[str]) -> dict[str, Any]:
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": [Path(sys.argv[0]).name, *argv],
        "ratiotune_git_revision": git_revision(),
        "python": platform.python_version(),
        "versions": {name: package_version(name) for name in PACKAGES},
        "platform": platform.platform(),
        "gpus": gpus_seen(),
    }


def write(experiment_dir: Path, argv: list[str]) -> None:
    (experiment_dir / PROVENANCE_FILE).write_text(json.dumps({"search": collect(argv), "resumes": []}, indent=2) + "\n")


def append_resume(experiment_dir: Path, argv: list[str]) -> None:
    """Record a resume; a folder without provenance (older ratiotune) gets a fresh file."""
    path = experiment_dir / PROVENANCE_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = {"search": None, "resumes": []}
    record.setdefault("resumes", []).append(collect(argv))
    path.write_text(json.dumps(record, indent=2) + "\n")
