"""Load the two agents and their tokenizer: a hub id, a local directory, a GGUF file or a builtin model.

Builtin models are random-init Qwen2 networks with a character-level tokenizer built
in code, so tests, the demo and benchmarks need no network. The length-ratio reward
needs no language skill (only *when to stop*), so a random model learns it.
"""

from __future__ import annotations

import copy
import string
from pathlib import Path

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from ratiotune.core.model_names import BUILTIN_MODELS, gguf_file, looks_like_path

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
# Printable ASCII plus newline: every character our prompt files use.
CHARACTERS = [c for c in string.printable if c not in "\t\r\x0b\x0c"]


def char_tokenizer(vocab_size: int | None = None) -> PreTrainedTokenizerFast:
    """A character-level tokenizer: one token per character, pad/eos/unk specials.

    With vocab_size larger than the character set, the extra ids become special
    filler tokens so that any id a model samples decodes (to nothing).
    """
    vocab = {token: i for i, token in enumerate([PAD, EOS, UNK, *CHARACTERS])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    if vocab_size is not None and vocab_size > len(vocab):
        # Fillers are special in the backend only (skip_special_tokens drops them), not listed
        # as additional_special_tokens: transformers checks that list against a Python list on
        # load, quadratic in its length (89 s for a saved 151,936-token tokenizer; this way 5 s).
        backend.add_special_tokens([AddedToken(f"<x{i}>", special=True, normalized=False) for i in range(len(vocab), vocab_size)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
    )


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


def model_source(name: str) -> str:
    """What from_pretrained loads for a non-builtin `name`: a local folder, a hub id, or the plain
    folder converted once from a GGUF file (builtin:smollm2, a path to a .gguf)."""
    gguf = gguf_file(name)
    if gguf is not None:
        from ratiotune.training.gguf_model import plain_folder

        return str(plain_folder(gguf))
    return str(Path(name).expanduser()) if looks_like_path(name) else name


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
        source = model_source(name)
        tokenizer = AutoTokenizer.from_pretrained(source)
        agents = [AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32) for _ in range(2)]
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return agents, tokenizer
