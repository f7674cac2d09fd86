"""Load the two agents and their tokenizer: a hub id, a local directory or a builtin model.

Builtin models are random-init Qwen2 networks with a character-level tokenizer built
in code, so tests, the demo and benchmarks need no network. The length-ratio reward
needs no language skill (only *when to stop*), so a random model learns it.
"""

from __future__ import annotations

import copy
import string
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
# Printable ASCII plus newline: every character our prompt files use.
CHARACTERS = [c for c in string.printable if c not in "\t\r\x0b\x0c"]


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


def char_tokenizer(vocab_size: int | None = None) -> PreTrainedTokenizerFast:
    """A character-level tokenizer: one token per character, pad/eos/unk specials.

    With vocab_size larger than the character set, the extra ids become special
    filler tokens so that any id a model samples decodes (to nothing).
    """
    vocab = {token: i for i, token in enumerate([PAD, EOS, UNK, *CHARACTERS])}
    specials = [PAD, EOS, UNK]
    if vocab_size is not None:
        for i in range(len(vocab), vocab_size):
            vocab[f"<x{i}>"] = i
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
    )
    if vocab_size is not None and vocab_size > len(specials) + len(CHARACTERS):
        tokenizer.add_special_tokens(
            {"additional_special_tokens": [f"<x{i}>" for i in range(len(specials) + len(CHARACTERS), vocab_size)]}
        )
    return tokenizer


# A builtin model is one network, like a downloaded checkpoint: its weights never depend on
# the trial seed, so seeds change only sampling (and the order of updates). Before this,
# every seed was also a new random network, and the seed-to-seed spread of a config
# measured the luck of the draw of the network more than the config.
BUILTIN_WEIGHTS_SEED = 0


def builtin_model(name: str, tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    shape = BUILTIN_MODELS[name]
    config = Qwen2Config(
        vocab_size=shape.vocab_size or len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    # Fork so building a model never moves the caller's global RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(BUILTIN_WEIGHTS_SEED)
        return Qwen2ForCausalLM(config)


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
        return f"{name!r} is neither a local folder nor a model on {constants.ENDPOINT} (or it is private: `huggingface-cli login`)"
    except Exception as exc:  # noqa: BLE001  (connection refused, DNS, timeout, proxy: all mean "unreachable")
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"{name!r} is not in the local hub cache and {constants.ENDPOINT} cannot be reached ({reason}); {fixes}"
    return None


def load_agents(name: str) -> tuple[list[PreTrainedModel], PreTrainedTokenizerFast]:
    """Two separate agent instances with identical starting weights, and one tokenizer.

    A hub id and a local directory take the same path (from_pretrained); only the
    builtin names are built in code. The weights are always float32 master weights:
    `model.dtype` (ModelSpec.compute_dtype) is the compute dtype the trainer autocasts to,
    because a pure-bf16 AdamW step loses small updates (bf16 has 8 mantissa bits: a weight
    of ~0.02 moves in steps of ~1.2e-4 and a norm weight of 1.0 in steps of ~7.8e-3, so an
    update of ~lr = 1e-5 rounds to nothing).
    """
    if name in BUILTIN_MODELS:
        tokenizer = char_tokenizer(BUILTIN_MODELS[name].vocab_size)
        first = builtin_model(name, tokenizer).to(torch.float32)
        agents = [first, copy.deepcopy(first)]
    else:
        source = str(Path(name).expanduser()) if looks_like_path(name) else name
        tokenizer = AutoTokenizer.from_pretrained(source)
        agents = [AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32) for _ in range(2)]
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return agents, tokenizer
