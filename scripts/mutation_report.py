"""The mutation testing report of the safety core (`make mutate`): the commit tested, then per module the
mutants made, killed by a failing assertion, killed by a timeout (apart: a timeout says the mutant hung, not
what it broke; one whose tests, run again outside mutmut's worker, failed or all passed is counted a kill or a
survivor), survived, with no test, and not yet checked, against the 90 % target of assertion kills; then
each timeout with the test that ran out of time, and each survivor, named as `mutmut show NAME` shows its
change, with the argument for it where one is written (scripts/mutation_arguments.json). Read from mutmut's
own results in each module's build/mutate/NAME/mutants/ (scripts/mutate.py).

An argument is bound to the change it was written for (`{"why": ..., "change": the mutated line}`): mutmut
numbers a function's mutants anew when the function changes, so an argument kept by name alone may come to
stand for another mutant. One whose change is not the mutant's is shown as stale and not counted; one written
before binding (a plain text) is counted and said to be unbound.

    python scripts/mutation_report.py [--out reports/mutation.md]
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ARGUMENTS = REPO / "scripts" / "mutation_arguments.json"  # mutant name -> why no behaviour tells it apart
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


def run_again(verdict_then: str, note: str | None) -> str:
    """A timeout's verdict once its tests were run again outside mutmut's worker (scripts/mutate.py,
    timeouts.json): a test that failed is an assertion's kill, and tests that all passed are a survivor's (the
    worker's limit was hit, not a hang of the mutant's). Only a test that ran out of time again is a timeout.
    A mutant mutmut did not check, run alone the same way (`--finish-alone`), is judged alike."""
    if verdict_then not in ("timeout", "not checked") or note is None:
        return verdict_then
    if note.endswith("(failed when run alone: an assertion)"):
        return "killed"
    return "survived" if note == "none timed out when run again" else "timeout"


def modules() -> dict[str, tuple[Path, dict[str, str]]]:
    """module path -> (where it was mutated, {mutant name: verdict}), each timeout as its run again found it."""
    out: dict[str, tuple[Path, dict[str, str]]] = {}
    for meta in sorted((REPO / "build" / "mutate").glob("*/mutants/orchestrator/**/*.py.meta")):
        mutants = next(p for p in meta.parents if p.name == "mutants")
        text = meta.read_text()
        if not text.strip():  # mutmut was stopped while writing it: the module's run must be made again
            print(f"mutation_report: {meta} is empty (a run stopped while writing it): left out", file=sys.stderr)
            continue
        codes = json.loads(text).get("exit_code_by_key", {})
        again_file, later_file = mutants.parent / "timeouts.json", mutants.parent / "later.json"
        again = json.loads(again_file.read_text()) if again_file.exists() else {}
        # Survivors killed since by tests added after the run, each run again against them in mutmut's tree.
        later = json.loads(later_file.read_text()) if later_file.exists() else {}
        verdicts = {k: run_again(verdict(v), again.get(k)) for k, v in codes.items()}
        out[str(meta.relative_to(mutants)).removesuffix(".meta")] = (
            mutants.parent, {k: "killed since" if v in ("survived", "no tests") and k in later else v
                             for k, v in verdicts.items()})
    return out


def argument_for(name: str, arguments: dict[str, Any], work: Path) -> tuple[str | None, str]:
    """The argument written for mutant ``name`` where it still applies, and what the report says of it: bound
    (its change is the mutant's), unbound (written before binding), or stale (written for another change)."""
    argued = arguments.get(name)
    if argued is None:
        return None, ""
    if isinstance(argued, str):
        return argued, "unbound: written before arguments named their change"
    added = {line[1:].strip() for line in shown(name, work).splitlines()
             if line.startswith("+") and not line.startswith("+++")}
    if argued.get("change", "").strip() in added:
        return str(argued["why"]), "bound to its change"
    return None, f"stale: written for the change `{argued.get('change')}`, not this mutant's"


@functools.cache
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
    run = json.loads((REPO / "build" / "mutate" / "RUN.json").read_text()) \
        if (REPO / "build" / "mutate" / "RUN.json").exists() else {}
    arguments = json.loads(ARGUMENTS.read_text()) if ARGUMENTS.exists() else {}
    tested = (f"Commit `{str(run.get('commit', '?'))[:12]}` ({run.get('subject', '?')}, {run.get('date', '?')})"
              + (", with changes not committed" if run.get("changed") else "")
              + ", every module from a clean mutmut cache.")
    lines = ["# Mutation testing of the safety core", "", tested, "",
             "| module | mutants | killed by an assertion | killed by a timeout | survived (argued) | no tests | "
             "not checked | assertion kills % of checked | with timeouts | killed since by later tests | "
             "with those |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for module, (work, verdicts) in found.items():
        c = Counter(verdicts.values())
        checked = len(verdicts) - c["not checked"]
        by_assertion = 100.0 * c["killed"] / checked if checked else 0.0
        with_timeouts = 100.0 * (c["killed"] + c["timeout"]) / checked if checked else 0.0
        argued = sum(1 for n, v in verdicts.items()
                     if v == "survived" and argument_for(n, arguments, work)[0] is not None)
        mark = "" if not checked else " (met)" if by_assertion >= TARGET else " (below 90)"
        with_since = 100.0 * (c["killed"] + c["killed since"]) / checked if checked else 0.0
        lines.append(f"| {module} | {len(verdicts)} | {c['killed']} | {c['timeout']} | {c['survived']} ({argued}) | "
                     f"{c['no tests']} | {c['not checked']} | {by_assertion:.1f} %{mark} | {with_timeouts:.1f} % | "
                     f"{c['killed since']} | {with_since:.1f} % |")
    for module, (work, _) in found.items():
        alone = json.loads((work / "alone.json").read_text()) if (work / "alone.json").exists() else []
        if alone:
            lines += ["", f"{module}: {len(alone)} of its mutants were not checked by mutmut's worker (its run was "
                      "stopped part way) and were run alone instead, as its timeouts are: each counted as what its "
                      "tests did then."]
    print("\n".join(lines))
    for module, (work, verdicts) in found.items():
        timeouts = json.loads((work / "timeouts.json").read_text()) if (work / "timeouts.json").exists() else {}
        timed_out = sorted(n for n, v in verdicts.items() if v == "timeout")
        if timed_out:
            lines += ["", f"## {module}: {len(timed_out)} killed by a timeout (a test ran out of time again)", ""]
            lines += [f"- `{name}`: {timeouts.get(name, 'not run again yet')}" for name in timed_out]
        later = json.loads((work / "later.json").read_text()) if (work / "later.json").exists() else {}
        killed_since = sorted(n for n, v in verdicts.items() if v == "killed since")
        if killed_since:
            lines += ["", f"## {module}: {len(killed_since)} survivor(s) of the run killed since by later tests", ""]
            lines += [f"- `{name}`: {later[name]}" for name in killed_since]
        survivors = sorted(n for n, v in verdicts.items() if v in ("survived", "no tests", "suspicious"))
        if survivors:
            lines += ["", f"## {module}: {len(survivors)} survivor(s)", ""]
            for name in survivors:
                argued_for, status = argument_for(name, arguments, work)
                lines += [f"### {name} ({verdicts[name]})", ""] + \
                    ([f"Argued ({status}): {argued_for}", ""] if argued_for else
                     [f"Not argued: the argument kept for it is {status}", ""] if status else []) + \
                    ([] if args.no_diffs else ["```diff", shown(name, work), "```", ""])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"report: {args.out}")


if __name__ == "__main__":
    main()
