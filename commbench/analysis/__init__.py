"""Analysis of result files: compare (and, in time, model fits, step-time estimates, importers).

Result files in, data out; nothing here prints or imports torch.
"""
