"""One module per command: typed specs in, an exit code out; the only layer that prints."""
