"""`make mutate`: mutation testing of the safety core with mutmut, one module at a time, each against the
unit tests that exercise it (MODULES), in a copy of the repository of its own (build/mutate/NAME: mutmut
rewrites the code it runs in mutants/ there). Every run starts from a clean mutmut cache and records the
commit it tests (build/mutate/RUN.json), so that the report speaks of one commit only; `--resume` goes on with
a run that was stopped, refused if the tree changed since it began. Each mutant killed by a timeout is run
again with a timeout per test, to name the test that ran out of time. Then reports/mutation.md
(scripts/mutation_report.py).

    python scripts/mutate.py [MODULE ...] [--minutes N] [--resume]   (MODULE: e.g. lock or restart/lock.py)
    python scripts/mutate.py MODULE ... --survivors        (only the module's survivors, against the tests now)
    python scripts/mutate.py MODULE ... --finish-alone [--jobs N]   (a stopped run's rest, each mutant run alone)
    python scripts/mutate.py MODULE ... --later [--jobs N]   (the run's survivors against the tests now, apart)
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from mutation_report import ARGUMENTS  # beside this script, so on its path: a survivor's argument
from mutation_report import modules as results
from mutation_report import run_again

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "build" / "mutate"
# Each module, with the unit tests that exercise it (from its imports and what calls it); the rest of the
# unit suite would add hours and few kills. A survivor is then a mutant these tests let through.
MODULES: dict[str, tuple[str, ...]] = {
    # The engine as the window, the last look's proof, a take-over, the maintenance windows and the search watch
    # drive it: their tests reach what the engine's own do not (its pass at 4005791).
    "orchestrator/restart/engine.py": ("test_engine", "test_engine_waits", "test_command_steps", "test_hooks",
                                       "test_deferral", "test_lock", "test_window_run", "test_last_look_proof",
                                       "test_take_over", "test_maintenance", "test_search_watch"),
    # test_take_over: the journal's copy in the cluster; test_window_run and test_search_watch: what a window and
    # the search watch write (the copies a node held before its stop, the series, the window closed by searches).
    "orchestrator/restart/journal.py": ("test_journal_and_retry", "test_journal_file", "test_planted_state",
                                        "test_engine", "test_deferral", "test_report", "test_take_over",
                                        "test_window_run", "test_search_watch"),
    # test_search_watch: runs through the real shard adapter (the fake cluster of the others takes any plan).
    "orchestrator/restart/steps.py": ("test_engine", "test_engine_waits", "test_command_steps", "test_deferral",
                                      "test_opensearch", "test_riak", "test_search_watch"),
    "orchestrator/restart/lock.py": ("test_lock", "test_engine", "test_deferral"),
    # test_last_look_proof and test_window: the last look's proof (stop_check) and the window's, which the others
    # do not reach (safety.py's pass at dd68adc: `c.state != "STARTED"` in the proof survived them).
    "orchestrator/shards/safety.py": ("test_plan", "test_settled", "test_batch_reads", "test_preflight",
                                      "test_limits", "test_last_look_proof", "test_window",
                                      "test_safety_refusals"),
    "orchestrator/shards/settled.py": ("test_settled", "test_batch_reads", "test_plan"),
    "orchestrator/shards/leases.py": ("test_waits", "test_cluster_answers", "test_batch_reads"),
    "orchestrator/shards/plan.py": ("test_plan", "test_limits", "test_preflight", "test_settled", "test_upgrade"),
    "orchestrator/riak/handoffs.py": ("test_riak",),
    # Not the SSH transport's tests: a mutant of a route there waits on a connection that never comes (the
    # module's pass went from minutes to hours); test_ssh_config holds each route's parts.
    "orchestrator/hosts/ssh_config.py": ("test_ssh_config", "test_discover", "test_revoked_host_keys"),
    "orchestrator/restart/hooks.py": ("test_hooks", "test_command_steps"),
    # What feeds the decisions (issue 58): the shard adapter's reads and their answers, what needs a restart,
    # and the window.
    "orchestrator/shards/adapter.py": ("test_adapter_reads", "test_batch_reads", "test_last_look_proof",
                                       "test_take_over", "test_window_run", "test_preflight", "test_settled",
                                       "test_cluster_answers", "test_search_watch", "test_waits"),
    "orchestrator/shards/batch_reads.py": ("test_adapter_reads", "test_batch_reads", "test_last_look_proof",
                                           "test_waits", "test_cluster_answers", "test_window_run"),
    "orchestrator/shards/answers.py": ("test_cluster_answers", "test_batch_reads", "test_last_look_proof",
                                       "test_search_watch"),
    "orchestrator/pending/verdict.py": ("test_pending", "test_pending_hostile", "test_pending_verdict"),
    "orchestrator/pending/host.py": ("test_pending", "test_pending_hostile", "test_pending_host"),
    "orchestrator/runs/pending.py": ("test_pending", "test_pending_read", "test_written_files"),
    "orchestrator/shards/window.py": ("test_window", "test_window_run"),
    "orchestrator/restart/window_run.py": ("test_window_run", "test_maintenance", "test_deferral"),
    "orchestrator/restart/budget.py": ("test_window_run", "test_window"),
}
# Tests left out of a module's pass by name (pytest's -k), where one costs far more than it adds: the window
# engine's property run takes about 30 s for each mutant it reaches, which made the proof's pass about 7 hours
# on 2 cores (55 mutants in 53 min); the proof's own property test (test_window) stays.
WITHOUT_THE_ENGINE_PROPERTY_RUN = "not never_leave_a_shard_without_a_started_copy"
LEFT_OUT: dict[str, str] = {
    "orchestrator/shards/window.py": WITHOUT_THE_ENGINE_PROPERTY_RUN,
    "orchestrator/restart/budget.py": WITHOUT_THE_ENGINE_PROPERTY_RUN,
    "orchestrator/shards/adapter.py": WITHOUT_THE_ENGINE_PROPERTY_RUN,
    "orchestrator/shards/batch_reads.py": WITHOUT_THE_ENGINE_PROPERTY_RUN,
}
COPIED_NOT = shutil.ignore_patterns(".git", ".venv", "build", "mutants", "reports", "__pycache__", "*.egg-info",
                                    ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis")


def work_dir(module: str) -> Path:
    return WORK / Path(module).stem


def prepared(module: str, tests: tuple[str, ...]) -> Path:
    """The module's copy of the repository, its mutmut settings narrowed to the module and its tests."""
    work = work_dir(module)
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO, work, ignore=COPIED_NOT, dirs_exist_ok=True)
    text = (work / "pyproject.toml").read_text()
    text = re.sub(r"only_mutate = \[[^\]]*\]", f'only_mutate = ["{module}"]', text, count=1)
    selection = ", ".join([f'"tests/unit/{t}.py"' for t in tests]
                          + ([f'"-k", "{LEFT_OUT[module]}"'] if module in LEFT_OUT else []))
    text = re.sub(r"pytest_add_cli_args_test_selection = \[[^\]]*\]",
                  f"pytest_add_cli_args_test_selection = [{selection}]", text, count=1)
    (work / "pyproject.toml").write_text(text)
    return work


def survivors(module: str, untested: bool = False) -> list[str]:
    """The mutants of ``module`` that its last run let through, as the report reads them (``untested``: and those
    no test of the run reached, which tests added to the module's list since may reach)."""
    verdicts = results().get(module, (WORK, {}))[1]
    let_through = ("survived", "no tests") if untested else ("survived",)
    return sorted(name for name, verdict in verdicts.items() if verdict in let_through)


def chosen(names: list[str]) -> dict[str, tuple[str, ...]]:
    if not names:
        return MODULES
    picked = {m: t for n in names for m, t in MODULES.items() if m.endswith((f"/{n}", f"/{n}.py"))}  # in order
    unknown = [n for n in names if not any(m.endswith((f"/{n}", f"/{n}.py")) for m in MODULES)]
    if unknown:
        sys.exit(f"mutate: not a module of the safety core: {', '.join(unknown)}; known: "
                 f"{', '.join(Path(m).stem for m in MODULES)}")
    return picked


def git(*args: str) -> str:
    """A git command's output in this checkout, stripped."""
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def commit_tested() -> dict[str, object]:
    """The commit the run tests, and whether the tree holds changes not committed (then the report says so)."""
    return {"commit": git("rev-parse", "HEAD"), "subject": git("log", "-1", "--format=%s")[:100],
            "changed": bool(git("status", "--porcelain", "--untracked-files=no", "--", "orchestrator", "tests")),
            "date": git("log", "-1", "--format=%cI")}


def begin_run(modules: dict[str, tuple[str, ...]], resume: bool) -> None:
    """A clean cache for each module (mutmut keeps results per function, of whatever code it last saw), and
    the commit recorded; or, with ``resume``, the run that was stopped, on the same commit."""
    record = WORK / "RUN.json"
    now = commit_tested()
    if resume:
        if not record.exists() or json.loads(record.read_text()).get("commit") != now["commit"]:
            sys.exit("mutate: --resume goes on with a stopped run of this commit only; run without it")
        return
    for module in modules:
        shutil.rmtree(work_dir(module), ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({**now, "modules": sorted(modules)}, indent=2))


def reaching(module: str, name: str) -> list[str]:
    """The tests that reach the mutant's function, as mutmut found them (its mutmut-stats.json): the ones it runs
    on that function's mutants. None found: every listed test is run."""
    stats = work_dir(module) / "mutants" / "mutmut-stats.json"
    by_function = json.loads(stats.read_text()).get("tests_by_mangled_function_name", {}) if stats.exists() else {}
    return sorted(by_function.get(name.rsplit("__mutmut_", 1)[0], ()))


def run_alone(module: str, tests: tuple[str, ...], name: str, limit: int, every_test: bool = False) -> str:
    """One mutant's tests (those that reach its function) run again outside mutmut's worker, one at a time with
    pytest-timeout's ``limit`` (limit_for), stopping at the first that fails: what it says of the mutant
    (mutation_report.run_again reads it)."""
    chosen_tests = (not every_test and reaching(module, name)) or [f"tests/unit/{t}.py" for t in tests]
    run = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                          f"--timeout={limit}", "--hypothesis-seed=0", "--hypothesis-profile=mutation",
                          *chosen_tests, *(("-k", LEFT_OUT[module]) if module in LEFT_OUT else ())],
                         cwd=work_dir(module) / "mutants", capture_output=True, text=True, timeout=limit * 40,
                         env={**os.environ, "MUTANT_UNDER_TEST": name})
    failed = [line.split(" ", 1)[1].split(" - ")[0] for line in run.stdout.splitlines()
              if line.startswith("FAILED ")]
    # With -x only the first failing test fails: a timeout anywhere in the output is its own, though hypothesis
    # wraps a property test's (a FlakyFailure, its FAILED line not naming the timeout).
    timed_out = failed[:1] if "Timeout (>" in run.stdout else []
    return (f"{timed_out[0]} (over {limit} s)" if timed_out else
            f"{failed[0]} (failed when run alone: an assertion)" if failed else
            "none timed out when run again" if run.returncode == 0 else f"pytest exit {run.returncode}")


def name_the_timeouts(module: str, tests: tuple[str, ...], unchecked: bool = False, jobs: int = 1) -> None:
    """For each mutant of ``module`` killed by a timeout, the test that ran out of time: its tests run again
    alone (run_alone), the first that times out named. ``unchecked``: also each mutant mutmut did not check (a
    run stopped part way, whose worker hung on mutants that fail at once when run alone), said so in the report.
    ``jobs``: mutants run at once (their tests wait more than they compute)."""
    work = work_dir(module)
    verdicts = results().get(module, (work, {}))[1]  # a mutant already run alone keeps what it did then
    notes_file, alone_file = work / "timeouts.json", work / "alone.json"
    notes: dict[str, str] = json.loads(notes_file.read_text()) if notes_file.exists() else {}
    alone: list[str] = json.loads(alone_file.read_text()) if alone_file.exists() else []
    wanted = ("timeout", "not checked") if unchecked else ("timeout",)
    names = sorted(n for n, v in verdicts.items() if v in wanted and n not in notes)
    alone += [n for n in names if verdicts[n] == "not checked"]
    limit = limit_for(module, tests) if names else TIMEOUT_S
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = {pool.submit(run_alone, module, tests, n, limit): n for n in names}
        for done in as_completed(runs):  # written as each ends: a stop loses only the mutants running
            notes[runs[done]] = done.result()
            notes_file.write_text(json.dumps(notes, indent=2, sort_keys=True))
            if unchecked:
                alone_file.write_text(json.dumps(sorted(n for n in alone if n in notes)))


def killed_later(module: str, tests: tuple[str, ...], jobs: int = 1) -> None:
    """The run's survivors of ``module`` (and its mutants no test reached), each run alone against the tests of
    this checkout (copied into mutmut's tree first, the mutated code left as the run made it): those a test now
    fails are recorded in later.json, which the report counts apart from the run's own kills (the run's figure
    stays its commit's)."""
    work = work_dir(module)
    shutil.copytree(REPO / "tests", work / "mutants" / "tests", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    tested = commit_tested()
    of = f"the tests of {str(tested['commit'])[:12]}" + (" with changes" if tested["changed"] else "")
    later_file = work / "later.json"
    later: dict[str, str] = json.loads(later_file.read_text()) if later_file.exists() else {}
    # An argued survivor is not run again (each runs every test of its module, a minute or more): the report
    # still checks that its argument is bound to its change.
    argued = json.loads(ARGUMENTS.read_text()) if ARGUMENTS.exists() else {}
    names = [n for n in survivors(module, untested=True) if n not in later and n not in argued]
    since = tests_since_run(module, tests)
    print(f"mutate: {module}: its survivors against {', '.join(since) or 'no test'} (the tests added to its list "
          "or changed since its run)", flush=True)
    names = names if since else []
    limit = limit_for(module, since) if names else TIMEOUT_S
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        # Every such test: which tests reach a function was traced with the run's tests, not these.
        runs = {pool.submit(run_alone, module, since, n, limit, every_test=True): n for n in names}
        for done in as_completed(runs):
            note = done.result()
            if run_again("timeout", note) == "killed":
                later[runs[done]] = f"{note.split(' (')[0]} ({of})"
                later_file.write_text(json.dumps(later, indent=2, sort_keys=True))
    print(f"mutate: {module}: {sum(1 for n in names if n in later)} of {len(names)} survivor(s) killed by {of}",
          flush=True)


def tests_since_run(module: str, tests: tuple[str, ...]) -> tuple[str, ...]:
    """The tests of ``tests`` that can fail a survivor now: those added to the module's list or changed since the
    run's commit (a survivor passed every test of the run, and a test file unchanged, with the helpers it imports,
    fails it no more now); all of them once a file of tests/ other than a test file changed (a helper, a fixture)."""
    commit = str(json.loads((WORK / "RUN.json").read_text())["commit"])
    then_source = git("show", f"{commit}:scripts/mutate.py")
    then: dict[str, tuple[str, ...]] = next(
        ast.literal_eval(node.value) for node in ast.walk(ast.parse(then_source))
        if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None
        and "MODULES" in ast.unparse(node.target if isinstance(node, ast.AnnAssign) else node.targets[0]))
    changed = {Path(p) for p in (git("diff", "--name-only", commit, "--", "tests").split()
                                 + git("ls-files", "--others", "--exclude-standard", "tests").split())}
    if any(not (p.parent == Path("tests/unit") and p.name.startswith("test_")) for p in changed):
        return tests
    listed = set(then.get(module, ()))
    return tuple(t for t in tests if t not in listed or Path(f"tests/unit/{t}.py") in changed)


TIMEOUT_S = 30  # a test of the unit suite takes at most a few seconds; a mutant's that runs past this has hung
# The limit is at least this many times the module's slowest test unmutated, so that the load of 2 jobs does not
# end it either: the window loop's engine property run takes about 31-33 s unmutated, and under 30 s every mutant
# that reached it "timed out", whatever it changed.
SLOWEST_TIMES = 4


def limit_for(module: str, tests: tuple[str, ...]) -> int:
    """pytest-timeout's limit for each test of ``module``'s mutants run alone: TIMEOUT_S, and at least
    SLOWEST_TIMES the slowest of its tests unmutated, measured once in mutmut's tree (slowest.json), so that no
    module's timeouts can be its slowest test's own time, as window_run's were. Measured again when the module's
    tests are not the ones measured (a test file added to its list: engine's slowest went from 3 s to 28 s)."""
    kept = work_dir(module) / "slowest.json"
    if not kept.exists() or json.loads(kept.read_text()).get("tests") != list(tests):
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=1",
                              "--durations-min=0", "--hypothesis-seed=0", "--hypothesis-profile=mutation",
                              *[f"tests/unit/{t}.py" for t in tests],
                              *(("-k", LEFT_OUT[module]) if module in LEFT_OUT else ())],
                             cwd=work_dir(module) / "mutants", capture_output=True, text=True,
                             env={**os.environ, "MUTANT_UNDER_TEST": ""})  # none: every function as written
        found = re.search(r"^([\d.]+)s call +(\S+)", run.stdout, re.MULTILINE)
        kept.write_text(json.dumps({"seconds": float(found.group(1)) if found else 0.0,
                                    "test": found.group(2) if found else None, "passed": run.returncode == 0,
                                    "tests": list(tests)}))
    slowest = json.loads(kept.read_text())
    limit = max(TIMEOUT_S, math.ceil(SLOWEST_TIMES * float(slowest["seconds"])))
    print(f"mutate: {module}: its slowest test unmutated, {slowest['test']}, took {slowest['seconds']:.1f} s: each "
          f"mutant's tests run alone under {limit} s", flush=True)
    if not slowest["passed"]:
        print(f"mutate: {module}: its tests FAIL unmutated (in {work_dir(module) / 'mutants'}): a kill says nothing "
              "until they pass", flush=True)
    return limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="only these (default: all of MODULES)")
    parser.add_argument("--minutes", type=float, default=60, help="at most this long per module (--resume goes on)")
    parser.add_argument("--resume", action="store_true", help="go on with a stopped run of this commit")
    parser.add_argument("--survivors", action="store_true",
                        help="test again only the mutants that survived, as after adding tests")
    parser.add_argument("--finish-alone", action="store_true",
                        help="a run stopped part way: its timeouts and the mutants it did not check run alone "
                             "(outside mutmut's worker), said so in the report")
    parser.add_argument("--later", action="store_true",
                        help="a finished run's survivors run alone against the tests of this checkout, those "
                             "killed counted apart in the report (later.json)")
    parser.add_argument("--jobs", type=int, default=1, help="with --finish-alone or --later: mutants run at once")
    args = parser.parse_args()
    if args.later:
        for module, tests in chosen(args.modules).items():
            killed_later(module, tests, jobs=args.jobs)
        subprocess.run([sys.executable, str(REPO / "scripts" / "mutation_report.py")], check=True)
        return
    if args.finish_alone:
        for module, tests in chosen(args.modules).items():
            name_the_timeouts(module, tests, unchecked=True, jobs=args.jobs)
        return
    mutmut = Path(sys.executable).with_name("mutmut")
    modules = chosen(args.modules)
    if not args.survivors:
        begin_run(modules, args.resume)
    for module, tests in modules.items():
        work = prepared(module, tests)
        again = survivors(module) if args.survivors else []
        if args.survivors and not again:
            print(f"mutate: {module}: no survivor to test again", flush=True)
            continue
        if again:
            # Which tests reach which function, found anew: mutmut traces only tests it has not seen, so a
            # test changed since (one that now calls the function) would otherwise not be run on its mutants.
            (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        print(f"mutate: {module} against {', '.join(tests)} (in {work.relative_to(REPO)})"
              + (f": its {len(again)} survivor(s) again" if again else ""), flush=True)
        # mutmut forks a worker per mutant: a session of its own, so that a stop ends them all. Named
        # mutants are run again even when they have a result.
        run = subprocess.Popen([str(mutmut), "run", *again], cwd=work, stdout=subprocess.DEVNULL,
                               start_new_session=True)
        try:
            run.wait(timeout=args.minutes * 60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGTERM)
            run.wait(timeout=60)
            print(f"mutate: {module}: stopped after {args.minutes:.0f} min; --resume goes on", flush=True)
            continue
        name_the_timeouts(module, tests)
    subprocess.run([sys.executable, str(REPO / "scripts" / "mutation_report.py")], check=True)


if __name__ == "__main__":
    main()
