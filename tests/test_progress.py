"""The header a search prints before it starts (no Ray needed): the study, the space, the plan, and the
one-line note for a searched value known to change nothing. The per-trial lines are checked on a real
search in test_search.py."""

from conftest import REPO
from ratiotune.search.progress import header
from ratiotune.core.study import load_study


def test_the_shipped_studies_search_the_four_values_and_the_header_flags_reward_scale():
    # smoke.yaml no longer searches reward_scale (it cancels there); these two still do, and say so.
    assert "reward_scale" not in load_study(REPO / "studies" / "smoke.yaml").searched()
    for name in ("qwen2.5-0.5b.yaml", "demo.yaml"):
        study = load_study(REPO / "studies" / name)
        assert study.searched() == ["learning_rate", "num_generations", "max_new_tokens", "reward_scale"], name
        lines = header(study, f"studies/{name}", "results/x", None)
        notes = [line for line in lines if line.startswith("note: reward_scale is searched, but it cancels")]
        assert len(notes) == 1, lines
        assert any(line.startswith("space: ") and "reward_scale choice" in line for line in lines), lines


def test_the_header_names_the_plan_and_says_nothing_of_reward_scale_without_normalization():
    study = load_study(REPO / "studies" / "smoke.yaml", ["train.advantage_normalization=false"])
    lines = header(study, "studies/smoke.yaml", "results/smoke", None)
    assert lines[0].startswith("study smoke (studies/smoke.yaml): model builtin:tiny, 12 epochs per trial")
    assert any(
        line.startswith("plan: 10 trials (staged sampler; every trial trains all its epochs), 2 at a time") for line in lines
    )
    assert not any(line.startswith("note:") for line in lines), lines


def test_the_demo_study_is_small_and_still_races():
    study = load_study(REPO / "studies" / "demo.yaml")
    assert study.search.num_samples * study.train.epochs <= 12 and study.search.max_concurrent_trials == 2
    assert study.race_skipped() is None and study.baseline() is not None
