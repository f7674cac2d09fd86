"""The header a search prints before it starts (no Ray needed): the study, the space, the plan, and the
one-line note for a searched value known to change nothing. The per-trial lines are checked on a real
search in test_search.py."""

from conftest import REPO
from ratiotune.search.progress import header
from ratiotune.core.study import load_study


def test_the_shipped_studies_list_the_four_values_and_the_header_says_reward_scale_is_held():
    for name in ("smoke.yaml", "qwen2.5-0.5b.yaml", "demo.yaml", "headline-expansion.yaml", "gpu-window.yaml"):
        study = load_study(REPO / "studies" / name)
        assert study.searched() == ["learning_rate", "num_generations", "max_new_tokens", "reward_scale"], name
        space = study.search.space
        assert all(len(space[n].values) > 1 for n in ("num_generations", "max_new_tokens")), name  # varied, not fixed
        lines = header(study, f"studies/{name}", "results/x", None)
        notes = [line for line in lines if line.startswith("note: reward_scale held at ")]
        assert len(notes) == 1, lines
        assert any(line.startswith("space: ") and "reward_scale " in line and "(held)" in line for line in lines), lines


def test_the_header_names_the_plan_and_says_nothing_of_reward_scale_without_normalization():
    study = load_study(REPO / "studies" / "smoke.yaml", ["train.advantage_normalization=false"])
    lines = header(study, "studies/smoke.yaml", "results/smoke", None)
    assert lines[0].startswith("study smoke (studies/smoke.yaml): model builtin:tiny, 12 epochs per trial")
    assert any(
        line.startswith("plan: 20 trials (staged sampler; every trial trains all its epochs), 2 at a time") for line in lines
    )
    assert not any(line.startswith("note:") for line in lines), lines


def test_the_demo_study_is_small_and_still_races():
    study = load_study(REPO / "studies" / "demo.yaml")
    assert study.search.num_samples * study.train.epochs <= 12 and study.search.max_concurrent_trials == 2
    assert study.race_skipped() is None and study.baseline() is not None
