"""The search layer: Ray Tune + Optuna searches, the race, resume, retrain and what a run prints.
Imports training/, core/ and tasks/."""
