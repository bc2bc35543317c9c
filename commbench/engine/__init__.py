"""The rank machinery every command that runs ranks shares: the session (joining, the control
channel), binding, timers, failures and fault injection, the probe and facts, one rank scaffold
and the sink Protocols (sinks.py). The sweep's measuring loop is measure/sampling.py; the rank
sides of each command are measure/worker.py, locate/rank.py and replay/rank.py."""
