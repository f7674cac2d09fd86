"""What travels to the GPU node (bench/gpu_wheels.sh, bench/trim_ray_wheel.py), checked without the network:
the pins are constraints.txt's, and the trimmed wheel drops exactly the dropped folders, lists in its
RECORD exactly the files it holds, keeps the dashboard's stand-in page, and installs with pip."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import trim_ray_wheel  # noqa: E402


def test_every_wheel_is_pinned_at_the_constraints_version():
    constraints = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if "==" in line:
            name, version = line.split("==")
            constraints[name.lower().replace("_", "-")] = version.strip()
    script = (REPO / "bench" / "gpu_wheels.sh").read_text()
    block = script[script.index("PACKAGES=(") : script.index(")\nmkdir")]
    pins = re.findall(r"([A-Za-z0-9_.-]+)==([0-9]\S*)", block)
    assert {name.lower() for name, _ in pins} >= {"ray", "optuna", "comlrl", "sqlalchemy", "tensorboardx", "pydantic"}
    for name, version in pins:
        assert constraints[name.lower().replace("_", "-")] == version, name


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def fake_ray_wheel(folder: Path) -> Path:
    """A small wheel laid out like Ray's (name, dist-info, the folders the trimmer drops and keeps)."""
    files = {
        "ray/__init__.py": b"__version__ = '2.60.0'\n",
        "ray/tune/__init__.py": b"",
        "ray/dashboard/http_server_head.py": b"",
        "ray/jars/ray_dist.jar": b"x" * 4096,
        "ray/dashboard/client/build/index.html": b"<html>the real page</html>",
        "ray/dashboard/client/build/static/js/main.js": b"y" * 2048,
        "ray/rllib/__init__.py": b"",
        "ray/serve/__init__.py": b"",
        "ray/llm/__init__.py": b"",
        "ray-2.60.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: ray\nVersion: 2.60.0\n",
        "ray-2.60.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
    }
    wheel = folder / "ray-2.60.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        record = [record_line(n, d) for n, d in files.items()] + ["ray-2.60.0.dist-info/RECORD,,"]
        z.writestr("ray-2.60.0.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


def test_the_trimmed_wheel_drops_the_folders_lists_what_it_holds_and_installs(tmp_path):
    wheel = fake_ray_wheel(tmp_path)
    before, after = trim_ray_wheel.trim(wheel)
    assert after < before
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert not any(n.startswith(trim_ray_wheel.DROPPED) and n not in trim_ray_wheel.STAND_INS for n in names)
        assert {"ray/__init__.py", "ray/tune/__init__.py", "ray/dashboard/http_server_head.py"} <= names
        assert set(trim_ray_wheel.STAND_INS) <= names  # Ray's dashboard server needs the build folder
        record = z.read("ray-2.60.0.dist-info/RECORD").decode().splitlines()
        listed = {line.split(",")[0] for line in record}
        assert listed == names
        for line in record:  # every hash is the file's own
            name, digest, size = line.split(",")
            if digest:
                assert line == record_line(name, z.read(name))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(target), str(wheel)],
                   check=True)  # fmt: skip
    assert (target / "ray" / "tune" / "__init__.py").exists() and not (target / "ray" / "jars").exists()
    assert (target / "ray" / "dashboard" / "client" / "build" / "static").is_dir()
