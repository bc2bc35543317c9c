"""history: every run in one store, change points found (SPEC §11). Being built."""
