"""ratiotune: reproducible hyperparameter studies for two-agent MAGRPO on the length-ratio task."""

__version__ = "0.1.0"
