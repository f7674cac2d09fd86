"""The names in a trial's config: the four searchable values and the keys reserved for retrain and the race."""

# The four hyperparameters a study may search; each is fixed in `train` unless searched.
SEARCHABLE = ("learning_rate", "num_generations", "max_new_tokens", "reward_scale")

# Reserved trial config keys, set only by `retrain` and the race (never searched; Study.hyperparameters
# ignores them): SEED_KEY runs the trial with this seed instead of train.seed (fresh seeds per
# config); START_KEY is a kept checkpoint folder to continue from, for train.epochs *more* epochs;
# TEST_KEY > 0 adds the test-prompt figures (that many pairs per prompt) to the final epoch's row.
SEED_KEY = "seed"
START_KEY = "start_checkpoint"
TEST_KEY = "test_samples_per_prompt"
LR_POINTS = 10  # the staged sampler's learning-rate grid when search.lr_points is null
