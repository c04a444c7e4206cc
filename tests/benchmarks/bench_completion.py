"""What one TAB costs: the shell runs `orchestrate` once per TAB (typer's completion), so the command's
whole start (Python, its imports, the command tree) is paid each time. Measured as bash runs it, for a
command name (`orchestrate res<TAB>`) and for a cluster name (`orchestrate restart --cluster pr<TAB>`,
which reads the inventory directories), against the floor of Python with typer alone.

    python -m tests.benchmarks.bench_completion [--runs 30] [--out reports/bench-completion.json]   (about 30 s)

It also prints the modules whose import costs most, from `python -X importtime`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.bench_restart import REPO

OWN_TARGET_S = 0.06  # what the tool adds to typer's own floor (below): its imports and its command tree

# The floor: a typer app of one command and the same top-level flags, completed the same way. typer (0.2x)
# coerces every option it parses through pydantic, so a TAB pays pydantic's import whatever the tool does.
TINY_APP = """
import typer
app = typer.Typer()
@app.callback()
def main(version: bool = typer.Option(False, "--version"), verbose: bool = typer.Option(False, "--verbose"),
         quiet: bool = typer.Option(False, "--quiet")) -> None: ...
@app.command()
def restart(cluster: str = typer.Option(None, "--cluster")) -> None: ...
@app.command()
def resume() -> None: ...
app(prog_name="tiny")
"""


def timed(argv: list[str], env: dict[str, str], runs: int) -> tuple[list[float], str]:
    seconds, answer = [], ""
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
        seconds.append(time.perf_counter() - began)
        answer = done.stdout
    return seconds, answer


def figures(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"median_s": round(statistics.median(ordered), 3),
            "p90_s": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))], 3)}


def heaviest_imports(env: dict[str, str], count: int = 8) -> list[tuple[str, float]]:
    """The package's own modules whose import (their own code, not what they import) costs most."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import orchestrator.cli.main"], env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    own: list[tuple[str, float]] = []
    for line in done.stderr.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[0].isdigit():
            own.append((parts[2], int(parts[0]) / 1000))
    return sorted(own, key=lambda item: -item[1])[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench-completion.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "clusters").mkdir()
        for name in ("prod", "prod-eu", "logs"):
            (Path(home) / "clusters" / f"{name}.yaml").write_text("")
        env = {**os.environ, "ORCHESTRATOR_CONFIG_HOME": home, "PYTHONPATH": str(REPO)}
        tool = [sys.executable, "-m", "orchestrator"]
        cases = {
            "python and typer alone": ([sys.executable, "-c", "import typer"], env),
            "a one-command typer app, res<TAB> (floor)": ([sys.executable, "-c", TINY_APP],
                                                          {**env, "_TINY_COMPLETE": "complete_bash",
                                                           "COMP_WORDS": "tiny res", "COMP_CWORD": "1"}),
            "orchestrate res<TAB>": (tool, {**env, "_ORCHESTRATE_COMPLETE": "complete_bash",
                                            "COMP_WORDS": "orchestrate res", "COMP_CWORD": "1"}),
            "orchestrate restart --cluster pr<TAB>": (tool, {**env, "_ORCHESTRATE_COMPLETE": "complete_bash",
                                                             "COMP_WORDS": "orchestrate restart --cluster pr",
                                                             "COMP_CWORD": "3"}),
        }
        results: dict[str, dict[str, object]] = {}
        for label, (argv, case_env) in cases.items():
            timed(argv, case_env, 2)  # warm the file cache and the bytecode
            seconds, answer = timed(argv, case_env, args.runs)
            results[label] = {**figures(seconds), "answer": answer.split()}
        heavy = heaviest_imports(env)
    print(f"{'case':44} {'median':>8} {'p90':>8}  answer")
    for label, row in results.items():
        print(f"{label:44} {row['median_s']:>7.3f}s {row['p90_s']:>7.3f}s  {' '.join(row['answer'])}")  # type: ignore[arg-type]
    worst = max(float(row["median_s"]) for label, row in results.items() if label.startswith("orchestrate"))  # type: ignore[arg-type]
    floor = float(results["a one-command typer app, res<TAB> (floor)"]["median_s"])  # type: ignore[arg-type]
    print(f"one TAB: {worst:.3f} s (median, the slower case)")
    print(f"the tool's own part, above typer's floor of {floor:.3f} s: {worst - floor:.3f} s; target {OWN_TARGET_S} s: "
          f"{'met' if worst - floor <= OWN_TARGET_S else 'NOT met'}")
    print("the package's heaviest imports (their own code):")
    for module, ms in heavy:
        print(f"  {module:50} {ms:6.1f} ms")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": args.runs, "cases": results, "own_target_s": OWN_TARGET_S,
                                    "heaviest_imports_ms": dict(heavy)}, indent=2) + "\n")


if __name__ == "__main__":
    main()
