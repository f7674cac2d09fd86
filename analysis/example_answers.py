"""Answers before and after training: `python analysis/example_answers.py EXPERIMENT [--prompts N] [--samples K]`.

Samples the untrained agents (the study's model) and the recommended ones (what `ratiotune best`
names: the first confirmation seed's final agents, or the search trial's best checkpoint when the
study ran no race) on the study's test prompts (task.test_prompts), at the study's temperature and top-p and the
recommended max_new_tokens, from one seed. Prints each pair's characters, their ratio and the
answers, so one sees what the figures mean (length-ratio: did agent 1 learn to stop early?).
"""

import argparse
import sys
from pathlib import Path

import ratiotune


def sample(agent, tokenizer, prompts: list[str], samples: int, tokens: int, temperature: float, top_p: float) -> list[list[str]]:
    """`samples` answers of `agent` to each prompt, drawn from torch's current random stream."""
    import torch

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    answers = []
    for prompt in prompts:
        ids = tokenizer([prompt] * samples, return_tensors="pt")
        with torch.no_grad():
            out = agent.eval().generate(
                **ids, max_new_tokens=tokens, do_sample=True, temperature=temperature, top_p=top_p, pad_token_id=pad
            )
        answers.append(tokenizer.batch_decode(out[:, ids.input_ids.shape[1] :], skip_special_tokens=True))
    return answers


def trained_agents(folder: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    agents = [AutoModelForCausalLM.from_pretrained(folder / f"agent_{i}", dtype=torch.float32) for i in (0, 1)]
    return agents, AutoTokenizer.from_pretrained(folder / "agent_0")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--prompts", type=int, default=2, help="test prompts to sample (default 2)")
    parser.add_argument("--samples", type=int, default=2, help="answer pairs per prompt (default 2)")
    args = parser.parse_args(argv)
    try:
        exp = ratiotune.read_experiment(args.experiment)
        rec = exp.recommended()
    except ratiotune.StudyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    import torch
    from transformers.utils import logging

    from ratiotune.training.models import load_agents  # the study's model, builtin or not, as trials load it

    logging.disable_progress_bar()

    trained = rec.agents[0] if rec.agents else rec.checkpoint
    if trained is None:
        print(f"error: {args.experiment} names no trained agents (no race agents, no checkpoint)", file=sys.stderr)
        return 2
    study = ratiotune.load_study(exp.path / "study.yaml")
    records = study.prompts("test")[: args.prompts]
    # Each agent's own prompt text (a task may format a record differently per agent).
    prompts = [[format_(r) for r in records] for format_ in study.get_task().formatters]
    tokens = int(rec.hyperparameters["max_new_tokens"])
    print(f"recommended ({rec.which}): {rec.hyperparameters}; agents {trained}")
    settings = (args.samples, tokens, study.train.temperature, study.train.top_p)
    for label, (agents, tokenizer) in (
        ("before training", load_agents(study.model.name)),
        ("after training", trained_agents(Path(trained))),
    ):
        torch.manual_seed(0)  # once for both agents: two untrained agents are one model, their answers two draws
        first, second = (sample(agent, tokenizer, texts, *settings) for agent, texts in zip(agents, prompts))
        print(f"\n== {label}")
        for prompt, ones, twos in zip(prompts[0], first, second):
            print(f"prompt: {prompt}")
            for one, two in zip(ones, twos):
                ratio = f"{len(two) / len(one):.2f}" if one else "n/a"
                print(f"  agent 1 ({len(one)} chars): {one.strip()!r}")
                print(f"  agent 2 ({len(two)} chars, ratio {ratio}): {two.strip()!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
