"""The training layer: one trial (models, the comlrl adapter, rollouts, the Ray Tune trainable)
and the commands that run one config without a search. Imports core/ and tasks/."""
