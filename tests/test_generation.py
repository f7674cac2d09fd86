"""train.generation: the static KV cache gives the eager tokens, and the compiled decode step
never recompiles once warm (over epochs, eval and a checkpoint restore).

Facts, not timing: tokens and parameters compared exactly, Dynamo's own recompile error.
Compilation uses the aot_eager backend on CPU (Dynamo + AOTAutograd, no code generation):
what recompiles is decided by Dynamo's guards, the same with every backend.
"""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import per_prompt_rollouts, run_cli

from ratiotune.training.generation import (
    MODES,
    PROMPT_BUCKET,
    Decoding,
    cache_length,
    compile_config,
    resolve,
)
from ratiotune.training.models import load_agents
from ratiotune.training.rollouts import generate_batched
from ratiotune.core.study import StudyError, TrainSpec, validate_study
from ratiotune.training.trainable import Trial

# Left-padded to the longest (37 characters = tokens): 1..37 tokens of real prompt per row.
PROMPTS = ["Hi:", "Tell a joke about dinosaurs:", "Design a playground on Mars, please:", "A"]


def sample(model, tokenizer, decoding: Decoding | None, purpose: str = "eval", n: int = 3, tokens: int = 24):
    """One seeded, left-padded sampling call, as sample_answers makes it; returns the token ids."""
    tokenizer.padding_side = "left"
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    extra = decoding.generate_kwargs(purpose, len(PROMPTS) * n, batch.input_ids.shape[1], tokens) if decoding else {}
    torch.manual_seed(7)
    model.eval()
    with torch.no_grad():
        return model.generate(
            **batch, do_sample=True, temperature=0.6, top_p=0.6, max_new_tokens=tokens, num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **extra,
        )  # fmt: skip


def adamw_step(model, optimizer, tokenizer) -> None:
    """One real update (a language-model loss on the prompts), in place as in training."""
    model.train()
    tokenizer.padding_side = "right"
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    loss = model(**batch, labels=batch.input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def test_static_cache_gives_the_eager_tokens_across_updates():
    """Same seed, same weights: the kept static cache samples exactly the dynamic cache's tokens,
    on left-padded prompts of 1..37 tokens, over calls with AdamW steps in between."""
    (eager_model, static_model), tokenizer = load_agents("builtin:tiny")
    decoding = Decoding("static", static_model, "cpu")
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (eager_model, static_model)]
    for call in range(3):
        expected = sample(eager_model, tokenizer, None)
        got = sample(static_model, tokenizer, decoding)
        assert torch.equal(expected, got), f"call {call}"
        assert (expected[:, -24:] != tokenizer.pad_token_id).any()  # real tokens were sampled, not only padding
        for model, optimizer in zip((eager_model, static_model), optimizers):
            adamw_step(model, optimizer, tokenizer)
        assert torch.equal(eager_model.lm_head.weight, static_model.lm_head.weight)
    # One cache, reused: 37 prompt tokens round up to 64, plus the 24 new tokens.
    assert list(decoding.caches) == [("eval", 12, 64 + 24)]


def test_a_static_trial_trains_exactly_as_an_eager_one(tiny_study):
    """Through comlrl's rollouts, the batched update and our eval: the same answers and,
    after two epochs of updates, the same parameters to the bit."""
    runs = {}
    for mode in ("eager", "static"):
        study = validate_study({**tiny_study, "train": {**tiny_study["train"], "generation": mode}})
        trial = Trial(study, {})
        assert [d.mode for d in trial.trainer.decoding] == [mode, mode]
        answers = []
        for _ in range(2):
            trial.trainer.run_epoch()
            answers.append(trial.trainer.reward_func.take_groups())
            answers.append(trial.evaluate())
        runs[mode] = (answers, [p.detach().clone() for a in trial.trainer.agents for p in a.parameters()], trial)
    assert runs["static"][0] == runs["eager"][0]
    assert all(torch.equal(a, b) for a, b in zip(runs["static"][1], runs["eager"][1]))
    static_trial = runs["static"][2]
    # Per agent: one rollout cache per window size (windows of rollout_buffer_size 2 prompts x 2
    # generations, and the odd last prompt's 2 rows) and one eval cache (2 prompts x 2 samples).
    for decoding in static_trial.trainer.decoding:
        assert sorted(k[:2] for k in decoding.caches) == [("eval", 4), ("rollout", 2), ("rollout", 4)]
        assert decoding.kept_bytes() > 0
    assert all(not d.caches for d in runs["eager"][2].trainer.decoding)


def cache_addresses(trial: Trial) -> dict:
    return {
        (agent, key): [layer.keys.data_ptr() for layer in cache.layers]
        for agent, decoding in enumerate(trial.trainer.decoding)
        for key, cache in decoding.caches.items()
    }


def test_compiled_decoding_never_recompiles_after_warm_up(tiny_study, tmp_path):
    """Warm up (one epoch + eval compiles the rollout and the eval graph), then turn any
    recompile into an error: an epoch, eval, a checkpoint restore and another epoch + eval run
    on the same graphs and the same cache tensors."""
    from torch._dynamo.utils import counters

    study = validate_study({**tiny_study, "train": {**tiny_study["train"], "generation": "compiled"}})
    trial = Trial(study, {})
    for decoding in trial.trainer.decoding:
        assert decoding.mode == "compiled"
        decoding.compile_config = compile_config("cpu", backend="aot_eager")
    torch._dynamo.reset()
    counters.clear()

    trial.run_epoch()
    graphs = counters["stats"]["unique_graphs"]
    # Two rollout graphs and an eval graph: compiled rollouts decode the 2 prompts between two
    # updates (rollout_buffer_size 2) in one call of 4 rows, and the third prompt alone (2 rows).
    # The two agents share them (Dynamo passes the weights in as graph inputs, so its guards do
    # not pin one module instance).
    assert graphs == 3
    addresses = cache_addresses(trial)
    assert len(addresses) == 6
    assert sorted({key[:2] for _, key in addresses}) == [("eval", 4), ("rollout", 2), ("rollout", 4)]

    frames = counters["frames"]["total"]  # every compile Dynamo starts, in any thread

    trial.save(tmp_path / "checkpoint")
    with torch._dynamo.config.patch(error_on_recompile=True):
        trial.run_epoch()
        trial.restore(tmp_path / "checkpoint")
        metrics = trial.run_epoch()
        assert counters["frames"]["total"] == frames and counters["stats"]["unique_graphs"] == graphs
        assert cache_addresses(trial) == addresses
        # The control: a shape never seen (3 eval samples per prompt) does recompile, and errors.
        with pytest.raises(torch._dynamo.exc.RecompileError):
            trial.evaluate(samples_per_prompt=3)
    assert trial.epoch == 2 and metrics["infeasible"] == 0


def test_modes_resolve_per_device_and_caches_are_bucketed():
    assert TrainSpec().generation == "auto"
    assert [resolve("auto", d) for d in ("cpu", "cuda:0", torch.device("cuda", 1))] == ["eager", "compiled", "compiled"]
    assert resolve("static", "cpu") == "static" and resolve("eager", "cuda:0") == "eager"
    assert resolve("auto", "cuda:1", threaded=True) == "eager"  # one GPU per agent: comlrl's two threads
    with pytest.raises(ValueError, match="'fast'.*auto, eager, static, compiled"):
        resolve("fast", "cpu")
    assert cache_length(1, 8) == cache_length(PROMPT_BUCKET, 8) == PROMPT_BUCKET + 8
    assert cache_length(PROMPT_BUCKET + 1, 8) == 2 * PROMPT_BUCKET + 8
    assert compile_config("cuda:0").mode == "reduce-overhead" and compile_config("cpu").mode is None


def test_every_generation_value_validates_and_a_bad_one_exits_2(tiny_study, write_study):
    assert set(TrainSpec.model_fields["generation"].annotation.__args__) == set(MODES)
    for mode in MODES:
        study = copy.deepcopy(tiny_study)
        study["train"]["generation"] = mode
        assert validate_study(study).train.generation == mode
    study["train"]["generation"], study["resources"]["gpu"] = "compiled", 2
    with pytest.raises(StudyError, match="train.generation: 'compiled' cannot run with resources.gpu: 2"):
        validate_study(study)
    result = run_cli("train", str(write_study(tiny_study)), "--set", "train.generation=fast", timeout=300)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "train.generation" in result.stderr and "'fast'" in result.stderr
    assert all(mode in result.stderr for mode in MODES), result.stderr


def test_the_memory_estimate_counts_the_kept_caches(tiny_study):
    """memory.py's kept-cache term is the bytes the static caches of a trial really hold."""
    from ratiotune.training.memory import study_estimate

    study = validate_study({**tiny_study, "train": {**tiny_study["train"], "generation": "static"}})
    trial = Trial(study, {})
    trial.run_epoch()
    kept = sum(d.kept_bytes() for d in trial.trainer.decoding)
    estimate, header = study_estimate(study)
    assert kept > 0 and estimate.kept_caches == kept
    assert "static decoding" in header and "kept static caches" in estimate.describe()
    eager = study_estimate(validate_study(tiny_study))[0]  # auto on CPU: eager, nothing kept
    assert eager.kept_caches == 0 and eager.total < estimate.total


def test_static_decoding_runs_under_comlrls_two_threads(tiny_study):
    """One device per agent ("mp", here two CPU names): each agent decodes into its own caches
    from its own thread; auto resolves to eager there (compile is not thread-safe)."""
    study = validate_study({**tiny_study, "train": {**tiny_study["train"], "generation": "static"}})
    trial = Trial(study, {}, devices=["cpu", "cpu:0"])
    assert trial.trainer.args.parallel_training == "mp"
    metrics = trial.run_epoch()
    assert metrics["infeasible"] == 0
    assert all({k[0] for k in d.caches} == {"eval", "rollout"} for d in trial.trainer.decoding)
    auto = Trial(validate_study(tiny_study), {}, devices=["cpu", "cpu:0"])
    assert [d.mode for d in auto.trainer.decoding] == ["eager", "eager"]


def test_compiled_decoding_under_autocast_uses_a_bf16_copy_that_follows_each_step(tiny_study):
    """No per-step re-cast of the float32 masters: the compiled decode step runs on a bf16 copy,
    refreshed in place after every optimizer step (same tensors, so CUDA graphs keep reading it)."""
    from ratiotune.training.generation import CACHE_KWARG
    from ratiotune.training.memory import study_estimate

    (model, _), tokenizer = load_agents("builtin:tiny")
    decoding = Decoding("compiled", model, "cpu", dtype=torch.bfloat16)
    copy_ = decoding.decoder()
    assert copy_ is not model and decoding.decoder() is copy_
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in copy_.parameters())
    assert all(b.dtype == torch.float32 for n, b in copy_.named_buffers() if "inv_freq" in n)  # RoPE stays exact
    addresses = [p.data_ptr() for p in copy_.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def equal_to_masters() -> bool:
        masters = dict(model.named_parameters())
        return all(torch.equal(p, masters[n].detach().to(torch.bfloat16)) for n, p in copy_.named_parameters())

    assert equal_to_masters()
    adamw_step(model, optimizer, tokenizer)
    assert not equal_to_masters()  # the control: a step moves the masters away from the copy
    decoding.refresh()
    assert equal_to_masters() and [p.data_ptr() for p in copy_.parameters()] == addresses
    adamw_step(model, optimizer, tokenizer)
    assert decoding.decoder() is copy_ and equal_to_masters()  # a step nobody announced: version counters
    # No copy without autocast, nor for eager/static decoding.
    assert Decoding("compiled", model, "cpu").decoder() is model
    assert Decoding("static", model, "cpu", dtype=torch.bfloat16).decoder() is model
    assert CACHE_KWARG in ("cache", "past_key_values")

    # Through a trial: comlrl's rollouts and our eval sample from the copies, and after the
    # epoch's updates each copy equals its agent's masters cast to bf16.
    study = validate_study({**tiny_study, "model": {**tiny_study["model"], "dtype": "bfloat16"},
                            "train": {**tiny_study["train"], "generation": "compiled"}})  # fmt: skip
    trial = Trial(study, {})
    for decoding in trial.trainer.decoding:
        decoding.compile_config = compile_config("cpu", backend="aot_eager")
    before = [[p.detach().clone() for p in agent.parameters()] for agent in trial.trainer.agents]
    metrics = trial.run_epoch()
    assert metrics["infeasible"] == 0
    for agent, decoding, old in zip(trial.trainer.agents, trial.trainer.decoding, before):
        assert decoding._copy is not None and sorted({k[0] for k in decoding.caches}) == ["eval", "rollout"]
        assert any(not torch.equal(p, q) for p, q in zip(agent.parameters(), old))  # the agent was updated
        masters = dict(agent.named_parameters())
        assert all(torch.equal(p, masters[n].detach().to(torch.bfloat16)) for n, p in decoding._copy.named_parameters())
    estimate = study_estimate(study)[0]
    assert estimate.decode_copies == sum(d.copy_bytes() for d in trial.trainer.decoding) > 0
    assert estimate.kept_caches == sum(d.kept_bytes() for d in trial.trainer.decoding)


def test_float16_is_refused_at_validation_naming_field_value_and_allowed(tiny_study):
    study = copy.deepcopy(tiny_study)
    study["model"]["dtype"] = "float16"
    with pytest.raises(StudyError) as info:
        validate_study(study)
    line = str(info.value).splitlines()[1].strip()
    assert line.startswith("model.dtype: 'float16'") and "GradScaler" in line and "bfloat16, float32" in line
    for dtype in ("auto", "bfloat16", "float32"):
        study["model"]["dtype"] = dtype
        assert validate_study(study).model.dtype == dtype


def compiled_trial(tiny_study, **train) -> Trial:
    study = validate_study({**tiny_study, "train": {**tiny_study["train"], "generation": "compiled", **train}})
    trial = Trial(study, {})
    for decoding in trial.trainer.decoding:
        decoding.compile_config = compile_config("cpu", backend="aot_eager")
    return trial


def per_prompt_and_batched(trainer, items, agent_idx: int = 0):
    """comlrl's call per prompt (as before) and one batched call for all of them, in comlrl's format."""
    return per_prompt_rollouts(trainer, items, agent_idx), generate_batched(trainer, agent_idx, items)


def test_batched_rollouts_give_each_prompts_own_call_with_greedy_sampling(tiny_study):
    """top_k 1 makes sampling greedy: the one left-padded call for the prompts between two updates
    gives every prompt exactly what its own call gave (tokens, lengths, texts, prompt ids), also when
    rows stop early at different steps (EOS made a frequent token, so the cut to each prompt's own
    stopping step is exercised)."""
    trial = compiled_trial(tiny_study, top_k=1, max_new_tokens=16, num_generations=2)
    trainer = trial.trainer
    assert trainer.batches_rollouts() and int(trainer.args.rollout_buffer_size) == 2
    items = [batch[0] for batch in trainer.get_train_dataloader()]
    alone, batched = per_prompt_and_batched(trainer, items)
    for own, got in zip(alone, batched):
        assert got["completions"] == own["completions"] and got["response_lens"] == own["response_lens"]
        assert torch.equal(got["prompt_input_ids"], own["prompt_input_ids"])
        assert all(torch.equal(a, b) for a, b in zip(got["completion_input_ids"][0], own["completion_input_ids"][0]))
    # Early stops: the token the agent emits most often becomes EOS for this agent.
    tokens = torch.cat([t for own in alone for t in own["completion_input_ids"][0]])
    frequent = int(tokens.bincount().argmax())
    trainer.agents[0].generation_config.eos_token_id = frequent
    alone, batched = per_prompt_and_batched(trainer, items)
    lengths = [len(t) for own in alone for t in own["completion_input_ids"][0]]
    assert min(lengths) < 16, "no prompt's call stopped early: the cut was not exercised"
    for own, got in zip(alone, batched):
        assert [len(t) for t in got["completion_input_ids"][0]] == [len(t) for t in own["completion_input_ids"][0]]
        assert all(torch.equal(a, b) for a, b in zip(got["completion_input_ids"][0], own["completion_input_ids"][0]))
        assert got["response_lens"] == own["response_lens"] and got["completions"] == own["completions"]


def test_batched_rollouts_sample_the_per_prompt_distribution(tiny_study):
    """With the study's sampling (temperature 0.6, top-p 0.6) both paths draw from one distribution.
    Rows are independent draws, so each prompt's first and second sampled tokens over 128 rollouts per
    path go into a chi-square test of homogeneity: not rejected (p > 0.001), while the control
    (the batched path with top_k 1: greedy, another distribution) is rejected everywhere (p < 1e-6)."""
    from scipy.stats import chi2_contingency

    trial = compiled_trial(tiny_study, max_new_tokens=4, num_generations=8)
    trainer = trial.trainer
    items = [batch[0] for batch in trainer.get_train_dataloader()][:2]

    def draws(batched: bool, calls: int = 16) -> dict[tuple[int, int], list[int]]:
        """(prompt, position) -> the tokens sampled there, one per rollout."""
        seen: dict[tuple[int, int], list[int]] = {}
        for call in range(calls):
            torch.manual_seed(1000 + call + (500 if batched else 0))
            outputs = generate_batched(trainer, 0, items) if batched else per_prompt_and_batched(trainer, items)[0]
            for prompt, out in enumerate(outputs):
                for row in out["completion_input_ids"][0]:
                    for position in (0, 1):
                        seen.setdefault((prompt, position), []).append(int(row[position]))
        return seen

    def p_value(a: list[int], b: list[int]) -> float:
        """Chi-square homogeneity of two samples of tokens; tokens seen < 5 times in all are pooled."""
        counts = {t: (a.count(t), b.count(t)) for t in set(a) | set(b)}
        common = [c for c in counts.values() if sum(c) >= 5]
        rare = (sum(c[0] for c in counts.values() if sum(c) < 5), sum(c[1] for c in counts.values() if sum(c) < 5))
        table = common + ([rare] if sum(rare) else [])
        if len(table) < 2:
            return 1.0  # one token only, on both paths
        return float(chi2_contingency(list(zip(*table)))[1])

    per_prompt, batched = draws(False), draws(True)
    for key in per_prompt:
        assert len(per_prompt[key]) == len(batched[key]) == 128
        assert p_value(per_prompt[key], batched[key]) > 1e-3, key
    trainer.args.top_k = 1
    control = draws(True, calls=8)
    assert max(p_value(per_prompt[key], control[key]) for key in per_prompt) < 1e-6
