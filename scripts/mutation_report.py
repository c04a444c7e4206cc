"""The mutation testing report of the safety core (`make mutate`): per module, mutants made, killed (a
test failed, or the mutant ran out of time), survived, with no test, and not yet checked, against the 90 %
target; then each survivor, named as `mutmut show NAME` shows its change. Read from mutmut's own results
in each module's build/mutate/NAME/mutants/ (scripts/mutate.py; a module stopped half way reports what
it checked, and `make mutate` goes on from there).

    python scripts/mutation_report.py [--out reports/mutation.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = 90.0
KILLED, TIMEOUT, NO_TESTS = {1, 3}, {-24, 24, 152, 255, 36}, {5, 33}


def verdict(code: int | None) -> str:
    if code is None:
        return "not checked"
    if code in KILLED:
        return "killed"
    if code in TIMEOUT:
        return "timeout"
    if code in NO_TESTS:
        return "no tests"
    return "survived" if code == 0 else "suspicious"


def modules() -> dict[str, tuple[Path, dict[str, str]]]:
    """module path -> (where it was mutated, {mutant name: verdict})."""
    out: dict[str, tuple[Path, dict[str, str]]] = {}
    for meta in sorted((REPO / "build" / "mutate").glob("*/mutants/orchestrator/**/*.py.meta")):
        mutants = next(p for p in meta.parents if p.name == "mutants")
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        out[str(meta.relative_to(mutants)).removesuffix(".meta")] = (mutants.parent,
                                                                    {k: verdict(v) for k, v in codes.items()})
    return out


def shown(name: str, work: Path) -> str:
    mutmut = Path(sys.executable).with_name("mutmut")
    done = subprocess.run([str(mutmut), "show", name], cwd=work, capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or done.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "mutation.md")
    parser.add_argument("--no-diffs", action="store_true", help="name the survivors without their changes")
    args = parser.parse_args()
    found = modules()
    if not found:
        sys.exit("no mutation results: run `make mutate` first")
    lines = ["# Mutation testing of the safety core", "",
             "| module | mutants | killed | timed out | survived | no tests | not checked | killed % of checked |",
             "|---|---|---|---|---|---|---|---|"]
    for module, (_, verdicts) in found.items():
        c = Counter(verdicts.values())
        checked = len(verdicts) - c["not checked"]
        score = 100.0 * (c["killed"] + c["timeout"]) / checked if checked else 0.0
        mark = "" if not checked else " (met)" if score >= TARGET else " (below 90)"
        lines.append(f"| {module} | {len(verdicts)} | {c['killed']} | {c['timeout']} | {c['survived']} | "
                     f"{c['no tests']} | {c['not checked']} | {score:.0f} %{mark} |")
    print("\n".join(lines))
    for module, (work, verdicts) in found.items():
        survivors = sorted(n for n, v in verdicts.items() if v in ("survived", "no tests", "suspicious"))
        if survivors:
            lines += ["", f"## {module}: {len(survivors)} survivor(s)", ""]
            for name in survivors:
                lines += [f"### {name} ({verdicts[name]})", ""] + \
                    ([] if args.no_diffs else ["```diff", shown(name, work), "```", ""])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"report: {args.out}")


if __name__ == "__main__":
    main()
