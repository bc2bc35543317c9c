"""The measuring engine: timers, the adaptive loop, rank coordination, and the per-rank worker."""
