"""Where ranks come from: an external launcher (torchrun, Kubeflow, SLURM srun, mpirun) whose
environment says where this process sits, or local ranks started through torch's elastic agent;
and the one launch path every measuring command takes (launch.ranks: ``place``, then
``run_ranks`` with a ``LaunchConfig``).
"""

from commbench.launch.environment import RankEnv, detect, pin_interfaces
from commbench.launch.ranks import LaunchConfig, Launched, Placement, place, run_ranks

__all__ = ["LaunchConfig", "Launched", "Placement", "RankEnv", "detect", "pin_interfaces",
           "place", "run_ranks"]
