"""What needs a restart, and why (`orchestrate pending`, `restart --pending`): what a node runs against what its
host has. host.py: the host's one read-only command and its answer, parsed; verdict.py: the pure judgement of
each node into reasons with their evidence. The application (runs/pending.py) reads and reports; the products
say what each running node read at start (`RunningNode`)."""
