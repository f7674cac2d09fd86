"""A GGUF file as a plain Hugging Face folder: what every other part of ratiotune loads.

transformers reads a .gguf file (`from_pretrained(folder, gguf_file=...)`, with the gguf and
accelerate packages) and dequantizes it to float32, but the model it returns refuses
`save_pretrained` ("quantized with gguf and is not serializable"), so checkpoints and shipped agents
could not be written. Converted once here instead: the same weights in a model built from its config
(no quantizer attached), its config without the `quantization_config` that would make every later
load ask for gguf again, and the tokenizer. Loading that folder takes well under a second; the
GGUF read takes ~20 s on this 2-core machine.

The folder is cached under $RATIOTUNE_MODEL_CACHE (default ~/.cache/ratiotune/models), named by the
file's name and size; it is written to a temporary folder and renamed, so a kill mid-conversion never
leaves a folder that looks complete.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

CACHE_ENV = "RATIOTUNE_MODEL_CACHE"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ratiotune" / "models").expanduser()


def plain_folder(gguf: Path) -> Path:
    """The plain float32 folder of `gguf` (a .gguf file), converted on first use."""
    gguf = gguf.expanduser().resolve()
    folder = cache_root() / f"{gguf.stem}-{gguf.stat().st_size}"
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        convert(gguf, staging)
        try:
            staging.rename(folder)
        except OSError:  # another process converted it first: theirs is as good
            if not (folder / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def convert(gguf: Path, output: Path) -> None:
    """Dequantize `gguf` into a plain model saved in `output` (safetensors, config.json, tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf.name}
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kwargs)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(output)
    tokenizer.save_pretrained(output)
