"""CoMLRL's story-length-ratio tutorial, written on ratiotune's public API.

Two agents (two separate instances of the same model) answer the same prompt
independently; agent 2 never sees agent 1's answer. The shared reward
(ratiotune.tasks.length_ratio, the builtin task "length-ratio") is 1.0 when agent 2's answer has 2-3x the
characters of agent 1's and decays as exp(-distance) outside that band. MAGRPO
trains both on it with the tutorial's settings: learning rate 5e-5, 3 epochs,
8 generations per prompt, 128 new tokens, reward scale 100, logging every 10 steps.

About the scale: RewardProcessors.scale(factor=100.0) multiplies every reward by
100 before comlrl sees it, but with advantage normalization (comlrl's default)
the advantages are divided by their standard deviation, so the factor cancels
exactly and training is the same as at scale 1. It only changes the reward
numbers comlrl logs to W&B (they are 100x the raw reward).

    python examples/story-len-ratio.py                                 # Qwen/Qwen2.5-0.5B x2, GPU with >= 24 GB
    python examples/story-len-ratio.py --model builtin:tiny --epochs 1 # offline on CPU, no download
    python examples/story-len-ratio.py --wandb --wandb-project P --wandb-entity E

`ratiotune train STUDY.yaml` runs the same kind of single training from a study
file, with per-epoch metrics and a held-out eval; this script stays close to the
tutorial instead.
"""

import argparse

import torch
from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
from comlrl.utils.reward_processor import RewardProcessors
from datasets import Dataset

from ratiotune.training.models import load_agents
from ratiotune.tasks.length_ratio import make_task
from ratiotune.tasks.records import load_records


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B", help="hub id, local directory or builtin:tiny (CPU, offline)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=128, help="the tutorial's 128; lower it for a quicker CPU run")
    parser.add_argument("--output", default="results/story-len-ratio", help="where agent_0/ and agent_1/ are saved")
    parser.add_argument("--wandb", action="store_true", help="log to W&B (honours WANDB_MODE, e.g. offline)")
    parser.add_argument("--wandb-project", default="ratiotune")
    parser.add_argument("--wandb-entity", default=None, help="default: your W&B default entity")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # Two separate instances with the same starting weights: each agent gets its own updates.
    agents, tokenizer = load_agents(args.model)

    config = MAGRPOConfig(
        num_train_epochs=args.epochs,
        agent_learning_rate=5e-5,
        logging_steps=10,
        num_generations=8,
        max_new_tokens=args.max_new_tokens,
        # The tutorial is single-turn; comlrl 1.4.3 defaults to 2 turns.
        num_turns=1,
        agent_devices=device,
    )
    wandb_config = None
    if args.wandb:
        wandb_config = {"project": args.wandb_project, "entity": args.wandb_entity, "name": "magrpo-length-ratio"}

    # The task in comlrl's terms: records, one formatter per agent, the shared reward.
    task = make_task(target_min=2.0, target_max=3.0)
    trainer = MAGRPOTrainer(
        agents=agents,
        tokenizer=tokenizer,
        # The tutorial's 10 training prompts, shipped with the package: records {"prompt": ...}.
        train_dataset=Dataset.from_list(load_records("builtin:tutorial", task.builtin_prompts)),
        formatters=list(task.formatters),
        reward_func=task.reward,
        reward_processor=RewardProcessors.scale(factor=100.0),
        args=config,
        wandb_config=wandb_config,
    )
    trainer.train()
    # Also closes the W&B run when one is open.
    trainer.save_model(args.output)
    print(f"Training complete! Agents saved to {args.output}/agent_0 and {args.output}/agent_1")


if __name__ == "__main__":
    main()
