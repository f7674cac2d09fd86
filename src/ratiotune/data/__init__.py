"""Package data: the builtin prompt files (no code)."""
