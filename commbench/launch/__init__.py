"""Where ranks come from: an external launcher (torchrun, Kubeflow, SLURM srun, mpirun) whose
environment says where this process sits, or local ranks started through torch's elastic agent.
"""

from commbench.launch.environment import RankEnv, detect, pin_interfaces

__all__ = ["RankEnv", "detect", "pin_interfaces"]
