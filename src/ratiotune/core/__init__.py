"""The core layer: the study schema, a task's metrics table, the searched objective, statistics,
storage locations and the experiment folder reader. Imports tasks/ only."""
