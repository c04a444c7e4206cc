"""A fleet of clusters restarted together (issue 60): a canary cluster, then waves of clusters, at most
``concurrency`` of a wave at once. One definition, read by `orchestrate fleet` and by the Airflow fleet DAG
(docs/examples/fleet_dag.py), so that both restart the same clusters in the same order."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from orchestrator.config.loader import load_model
from orchestrator.config.model import NAME_RE
from orchestrator.config.model_base import Model

ClusterName = str


class Fleet(Model):
    """``canary``: an inventory name (as `--cluster NAME`) restarted alone first; ``waves``: lists of inventory
    names, each wave begun only once every cluster before it succeeded; ``concurrency``: a wave's clusters
    restarted at once (the Airflow DAG's pool slots play that part there); ``conn_id``: the Airflow
    Connection with the clusters' user and secrets (Airflow's only)."""

    canary: str | None = Field(None, pattern=NAME_RE)
    waves: list[list[ClusterName]] = Field(default_factory=list)
    concurrency: int = Field(2, ge=1, le=64)
    conn_id: str | None = None

    @model_validator(mode="after")
    def each_cluster_once(self) -> Fleet:
        import re

        if any(not wave for wave in self.waves):
            raise ValueError("a wave names at least one cluster")
        names = self.clusters()
        if not names:
            raise ValueError("a fleet names at least one cluster: a canary or a wave")
        bad = [n for n in names if not re.match(NAME_RE, n)]
        if bad:
            raise ValueError(f"not an inventory name: {', '.join(map(repr, bad))}")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"each cluster once: {', '.join(twice)} named more than once")
        return self

    def clusters(self) -> list[str]:
        return [*([self.canary] if self.canary else []), *(n for wave in self.waves for n in wave)]

    def stages(self) -> list[list[str]]:
        """The canary alone, then each wave: the order the clusters are restarted in."""
        return [*([[self.canary]] if self.canary else []), *self.waves]


def load_fleet(path: Path) -> Fleet:
    return load_model(path, Fleet)
