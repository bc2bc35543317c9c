"""commbench: collective-communication benchmarks through torch.distributed (NCCL or gloo)."""

__version__ = "0.1.0"
