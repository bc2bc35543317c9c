"""Everything a person reads: console tables, Markdown, plots, the HTML report, live progress.

Data in, text or files out; only commands call it, and nothing here imports torch.
"""
