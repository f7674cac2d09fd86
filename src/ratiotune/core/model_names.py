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


def looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists()


# Seconds to wait for the hub when checking that a model id exists: one request, no retries,
# so a machine without hub access hears it at once instead of after transformers' retries.
HUB_CHECK_TIMEOUT = 10


def model_problem(name: str) -> str | None:
    """Why `name` cannot be loaded here, in one line with the fixes; None when it can.

    Builtin names always load. A local folder needs a config.json. A hub id must be in the
    local cache, or the hub must answer for it (not with HF_HUB_OFFLINE=1). Downloads nothing.
    """
    if name in BUILTIN_MODELS:
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
