"""What the window's ramp alone allows (issue 57): a run of N nodes with a budget, each node back a random 5-15 s
after its start, as the fake 3,000-node benchmark draws them, admitted the moment the ramp has room (no proof
refused, no read, no CPU: a perfect engine). It prints the wall time against the ideal (nodes x mean restart
time / budget) and the share of the budget held on average, for the ramp the engine runs (`restart/budget.py:
ramp`), beside no ramp and two faster ones, so that a target is read against what the ramp lets any engine reach.

    python -m tests.benchmarks.bench_ramp [--runs 20]   (seconds, no cluster)
"""

from __future__ import annotations

import argparse
import heapq
import random
from collections.abc import Callable

from orchestrator.restart.budget import ramp

MEAN_RESTART_S = 10.0  # uniform 5-15 s, as bench_window --fake draws them


def no_ramp(room: int, left_clean: int) -> int:
    return room


def doubling_at_half(room: int, left_clean: int) -> int:
    """1, 2, 4, ... each step once half as many nodes as it holds left clean."""
    opened = 1
    while opened * 2 <= 2 * left_clean + 1 and opened < room:
        opened *= 2
    return min(room, opened)


def doubling_per_node(room: int, left_clean: int) -> int:
    """Twice as many away for each node that left clean."""
    return min(room, 2 ** min(left_clean, 30))


RAMPS: dict[str, Callable[[int, int], int]] = {
    "the engine's (budget.ramp)": ramp, "doubling at half": doubling_at_half,
    "doubling per node": doubling_per_node, "none": no_ramp}


def simulated(nodes: int, budget: int, opened: Callable[[int, int], int], seed: int) -> tuple[float, float]:
    """(wall time in s, the budget's share held on average) of one run, admitted as soon as ``opened`` allows."""
    draw = random.Random(seed)
    now, back_at, left_clean, started, held_s = 0.0, [], 0, 0, 0.0
    while left_clean < nodes:
        while started < nodes and len(back_at) < opened(budget, left_clean):
            heapq.heappush(back_at, now + draw.uniform(MEAN_RESTART_S / 2, MEAN_RESTART_S * 1.5))
            started += 1
        next_back = heapq.heappop(back_at)
        held_s += (len(back_at) + 1) * (next_back - now)
        now, left_clean = next_back, left_clean + 1
    return now, held_s / now / budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs averaged per line (seeds 0..runs-1)")
    args = parser.parse_args()
    print("| nodes | budget | ramp | wall time / ideal | budget held on average |")
    print("|---|---|---|---|---|")
    for nodes, budget in ((3000, 150), (300, 15), (9, 4)):
        ideal = nodes * MEAN_RESTART_S / budget
        for name, opened in RAMPS.items():
            runs = [simulated(nodes, budget, opened, seed) for seed in range(args.runs)]
            wall = sum(r[0] for r in runs) / len(runs)
            held = sum(r[1] for r in runs) / len(runs)
            print(f"| {nodes} | {budget} | {name} | {wall / ideal:.2f}x | {held:.0%} |")


if __name__ == "__main__":
    main()
