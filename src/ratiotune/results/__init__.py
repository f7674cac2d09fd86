"""The results layer: reports, plots, DataFrames for your own analysis and the Optuna dashboard.
Imports search/, training/, core/ and tasks/."""
