"""`rolling_orchestrator`: the distribution's name as a module, for Airflow alone.

Airflow 3.3 looks for each provider's example DAGs by importing the module its distribution name makes
(`rolling-orchestrator` -> `rolling_orchestrator`), and logs an ERROR with a traceback on every DAG parse when
there is none (`load_examples`, on by default). This empty package answers it: it ships no example DAGs (they
are in docs/examples, for operators to copy). The tool's own code is the `orchestrator` package.
"""
