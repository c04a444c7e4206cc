# The two commands of the README: `make demo` and `make test`. Both set up a fresh machine first.
.PHONY: setup demo test lint unit integration bench down report-shot mutate

setup:
	./scripts/setup

demo: setup
	./scripts/demo

lint: setup
	./scripts/lint

test: setup
	./scripts/test  # the lint and the unit suite beside the integration suite: scripts/test says why

unit: setup
	.venv/bin/pytest -q tests/unit

integration: setup
	.venv/bin/pytest -ra tests/integration

down:
	.venv/bin/orchestrate sandbox down

bench: setup
	.venv/bin/python -m tests.benchmarks.bench_plan
	.venv/bin/python -m tests.benchmarks.bench_plan --nodes 5000 --copies 1000000 --out reports/bench-plan-5000.json
	.venv/bin/python -m tests.benchmarks.bench_restart
	.venv/bin/python -m tests.benchmarks.bench_reuse --idle-runs 10 --idle-wait
	.venv/bin/python -m tests.benchmarks.bench_recovery
	.venv/bin/python -m tests.benchmarks.bench_script
	.venv/bin/python -m tests.benchmarks.bench_journal
	.venv/bin/python -m tests.benchmarks.bench_scale --out reports/bench-scale.json
	.venv/bin/python -m tests.benchmarks.bench_sandbox_reads
	.venv/bin/python -m tests.benchmarks.bench_completion
	.venv/bin/python -m tests.benchmarks.bench_ramp
	.venv/bin/python -m tests.benchmarks.bench_boot --out reports/bench-boot.json

# The run report of a succeeded and of a failed run, rendered by headless Chromium, for review.
report-shot: setup
	.venv/bin/python -m tests.report_shots build/report-shots

# Mutation testing of the safety core over the unit suite (mutmut; not in CI: hours on 2 cores).
# Resumable; its report is reports/mutation.md (docs/safety.md, "Mutation testing").
mutate: setup
	.venv/bin/pip install -q mutmut==3.8.1 pytest-timeout==2.4.0
	.venv/bin/python scripts/mutate.py
