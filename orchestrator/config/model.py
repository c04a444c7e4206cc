"""The inventory of a cluster, as frozen, typed models. Validation happens once, at load time."""

from __future__ import annotations

import os
import re
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AwareDatetime,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orchestrator.config.loader import problems_of, read_bytes_of
from orchestrator.config.maintenance import Schedule, Window
from orchestrator.config.model_base import ABSOLUTE_PATH, Model
from orchestrator.config.upgrade import UpgradeSection
from orchestrator.errors import ConfigError

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
BYTE_SIZE_RE = re.compile(r"\d{1,12}(\.\d{1,6})?(b|kb|mb|gb|tb)")
DAY_S = 86_400
MAX_SECRET_BYTES = 64 * 1024  # a password, an API key, a passphrase: a file larger is not one
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")


class SecretSource(Model):
    """A secret is named, never written inline: an environment variable or a file."""

    env: str | None = Field(None, max_length=128)
    file: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def named_not_written(cls, value: object) -> object:
        if isinstance(value, str | int | float):  # never echoed: it may be the secret itself
            raise ValueError("a secret is not written in the file: give where it is, {env: VARIABLE} (an "
                             "environment variable) or {file: PATH} (a file only its owner reads)")
        return value

    @model_validator(mode="after")
    def exactly_one(self) -> SecretSource:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of `env` (variable name) or `file` (path)")
        return self

    def warnings(self, label: str) -> list[str]:
        """What is unsafe about where the secret is kept (said in the plan, never the secret)."""
        if self.file is None:
            return []
        try:
            mode = self.file.expanduser().stat().st_mode
        except OSError:
            return []
        if mode & 0o077:
            return [f"WARNING: {label}: the secret file {self.file} is readable by others (mode {mode & 0o777:o}); "
                    f"`chmod 600 {self.file}`"]
        return []

    def describe(self) -> str:
        return f"environment variable {self.env}" if self.env else f"file {self.file}"

    def resolve(self) -> str:
        """The secret's value. Raises ValueError with a message that never contains the secret."""
        if self.env is not None:
            value = os.environ.get(self.env)
            if value is None:
                if not ENV_NAME.fullmatch(self.env):
                    # Not shown: a value that is no variable name may be the secret itself, put there by mistake.
                    raise ValueError("the environment variable named here is not set, and its name does not look "
                                     "like a variable name (not shown: is it the secret itself?)")
                raise ValueError(f"environment variable {self.env} is not set")
            return value
        assert self.file is not None
        try:  # a regular file of a secret's size: never a FIFO (a hang) or a device (/dev/zero never ends)
            return read_bytes_of(self.file.expanduser(), MAX_SECRET_BYTES).decode("utf-8").strip()
        except ConfigError as exc:
            raise ValueError(f"cannot read secret file {self.file}: {'; '.join(exc.problems)}") from None
        except UnicodeDecodeError:
            raise ValueError(f"secret file {self.file} is not UTF-8 text") from None


class ClusterSection(Model):
    name: str = Field(pattern=NAME_RE)
    product: str = Field("elasticsearch", pattern=r"^[a-z][a-z0-9_-]{0,40}$")  # a plug-in of orchestrator.products
    endpoints: list[str] = Field(default_factory=list)
    ca_file: Path | None = None
    verify_certs: bool = True
    username: str | None = None
    password: SecretSource | None = None
    api_key: SecretSource | None = None
    request_timeout_s: float = Field(30.0, ge=1, le=600)
    # The node attribute that names a node's zone (cluster.routing.allocation.awareness.attributes):
    # zone mode batches by it when the inventory gives no `zone`.
    awareness_attribute: str = Field("zone", pattern=r"^[A-Za-z0-9_-]{1,64}$")

    @field_validator("endpoints")
    @classmethod
    def urls(cls, v: list[str]) -> list[str]:
        for url in v:
            if "@" in url:
                # Never echo it: it holds a password.
                raise ValueError("an endpoint holds credentials (user:password@host); they would end up in "
                                 "messages and journals. Give cluster.username with password: {env: NAME} or "
                                 "{file: PATH}, or api_key: {env: NAME}")
            m = re.fullmatch(r"https?://(\[[0-9A-Fa-f:.]+\]|[^\s/@:\[\]]+)(?::(\d{1,5}))?/?", url)
            if m is None:
                raise ValueError(f"{url[:100]!r} is not an http(s)://host:port URL")
            if m[2] is not None and not 1 <= int(m[2]) <= 65535:
                raise ValueError(f"{url[:100]!r}: port {int(m[2])} is not between 1 and 65535")
        return v

    @model_validator(mode="after")
    def coherent(self) -> ClusterSection:
        if self.password is not None and self.username is None:
            raise ValueError("`password` needs `username`")
        if self.password is not None and self.api_key is not None:
            raise ValueError("give either username/password or api_key, not both")
        return self


class SshSection(Model):
    transport: Literal["ssh", "local"] = "ssh"
    user: str = Field("root", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    port: int = Field(22, ge=1, le=65535)
    key_file: Path | None = None
    key_passphrase: SecretSource | None = None
    known_hosts: Path | None = None
    connect_timeout_s: float = Field(10.0, ge=1, le=300)
    command_timeout_s: float = Field(300.0, ge=1, le=7200)
    sudo: bool = False
    # When sudo asks the SSH user for a password: where it is kept. Sent on the command's standard input,
    # never in an argument or a log (hosts/transport.py:with_sudo).
    sudo_password: SecretSource | None = None
    # What the hosts' sudo rules allow the user: `shell` (sudo /bin/sh: each action is one small script
    # run as root) or `commands` (exactly the commands `orchestrate sudoers` prints, without a password).
    sudo_rules: Literal["shell", "commands"] = "shell"
    # The OpenSSH client config read for Host aliases, HostName, User, Port, IdentityFile and ProxyJump
    # (hosts/ssh_config.py, read with `ssh -G`); None: OpenSSH's own (~/.ssh/config, /etc/ssh/ssh_config).
    config_file: Path | None = None
    read_config: bool = True
    # A config's `Match exec` runs a local command while it is read: refused unless this is true.
    allow_local_commands: bool = False

    @model_validator(mode="after")
    def host_keys_required(self) -> SshSection:
        if self.transport == "ssh" and self.known_hosts is None:
            raise ValueError("`known_hosts` is required: unknown host keys are refused, never added")
        if self.sudo_password is not None and not self.sudo:
            raise ValueError("`sudo_password` is set but `sudo` is false: set `sudo: true` (or remove the password)")
        if self.sudo_rules == "commands" and not self.sudo:
            raise ValueError("`sudo_rules: commands` needs `sudo: true`")
        if self.sudo_rules == "commands" and self.sudo_password is not None:
            raise ValueError("`sudo_rules: commands` runs many sudo calls per action and cannot hand each a "
                             "password: give the exact rules NOPASSWD (`orchestrate sudoers` prints them) and "
                             "remove `sudo_password`, or use `sudo_rules: shell` with the password")
        return self


DEFAULT_REBOOT = "systemctl reboot"


class ServiceSection(Model):
    manager: Literal["systemd", "commands"] = "systemd"
    unit: str = Field("elasticsearch", pattern=r"^[A-Za-z0-9][A-Za-z0-9@_.:-]{0,200}$")
    stop: str | None = None
    start: str | None = None
    status: str | None = None
    reboot: str = Field(DEFAULT_REBOOT, min_length=1, max_length=300)  # `restart --reboot`: reboots the host

    @model_validator(mode="after")
    def commands_complete(self) -> ServiceSection:
        if self.manager == "commands" and not (self.stop and self.start and self.status):
            raise ValueError("manager `commands` needs `stop`, `start` and `status` commands")
        return self


class NodeEntry(Model):
    name: str = Field(pattern=NAME_RE)
    host: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}$")
    zone: str | None = Field(None, pattern=NAME_RE)
    ssh_port: int | None = Field(None, ge=1, le=65535)
    ssh_user: str | None = Field(None, pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    data_paths: list[ABSOLUTE_PATH] = Field(default_factory=list, max_length=64)


class Timeouts(Model):
    """Each bounded: a timeout of years or an interval of 1e-300 s is a mistake, not a setting."""

    stop_s: float = Field(180, ge=1, le=DAY_S)
    start_s: float = Field(120, ge=1, le=DAY_S)
    join_s: float = Field(300, ge=1, le=DAY_S)
    recovery_s: float = Field(3600, ge=1, le=7 * DAY_S)
    reboot_s: float = Field(900, ge=1, le=DAY_S)  # `restart --reboot`: the host back with a new boot id
    # Before a batch stops, for the retention leases of its copies (Elasticsearch renews every 30 s).
    lease_wait_s: float = Field(45, ge=0, le=DAY_S)
    poll_interval_s: float = Field(1.0, ge=0.05, le=60)
    # The gate before each batch: this many healthy samples in a row (poll_interval_s apart), and
    # the run stops after unhealthy_s of waiting for them (None: recovery_s).
    stable_samples: int = Field(1, ge=1, le=100)
    # A run lock not renewed for this long is stale: its run is dead, and `resume --take-over` from another
    # machine may take it. Written into the lock by its holder, which renews it every tenth of this (30 s at most).
    lock_stale_s: float = Field(300, ge=30, le=DAY_S)
    unhealthy_s: float | None = Field(None, ge=1, le=7 * DAY_S)

    @property
    def gate_give_up_s(self) -> float:
        return self.unhealthy_s if self.unhealthy_s is not None else self.recovery_s


AUTO: Literal["auto"] = "auto"
Count = Annotated[int, Field(ge=1, le=100)]


class RecoveryLimits(Model):
    """Raised for the length of the run, restored exactly afterwards. `auto` (the default): chosen
    from the nodes' processors, their declared recovery bandwidth and Elasticsearch's own defaults
    (shards/limits.py); a number or size here is used as given. A run never lowers a limit in force."""

    node_concurrent_recoveries: Count | Literal["auto"] = AUTO
    node_initial_primaries_recoveries: Count | Literal["auto"] = AUTO
    max_bytes_per_sec: str = Field(AUTO, max_length=30)
    max_concurrent_file_chunks: int = Field(4, ge=1, le=8)
    # Wait for retention leases only when the copies that would be copied in full weigh at least this
    # much (about what 100mb/s copies in the 15 s an average wait takes); "0b": always.
    lease_wait_min_bytes: str = Field("1gb", max_length=30)

    @field_validator("max_bytes_per_sec", "lease_wait_min_bytes")
    @classmethod
    def byte_size(cls, v: str, info: ValidationInfo) -> str:
        if info.field_name == "max_bytes_per_sec" and v.lower() == AUTO:
            return AUTO
        if not BYTE_SIZE_RE.fullmatch(v.lower()):
            raise ValueError(f"{v!r} is not a byte size such as 100mb" +
                             (" (or auto)" if info.field_name == "max_bytes_per_sec" else ""))
        return v.lower()


class ProductSettings(Model):
    """A product's own section of the inventory, named like the product (`riak:`), defined by its plug-in
    (a subclass of this) and checked when the inventory is opened for a run (runs/target.py). A product
    with no settings of its own takes this one: no keys."""


class TuningSection(Model):
    profile: str = Field("none", pattern=r"^[A-Za-z0-9_-]+$")
    # apply: a restart tunes each host while its node is down, and persists it (the default: the tool's
    # reason to be; docs/tuning.md). check: a restart reads each host and reports its drift, changing nothing
    # there (hosts that Puppet, Ansible or Chef own).
    mode: Literal["apply", "check"] = "apply"


class MetricsSection(Model):
    """Prometheus output of a run (docs/metrics.md): a file for node_exporter's textfile collector,
    and/or a Pushgateway. Both optional; a failure to write is a warning, never a failed run."""

    textfile: Path | None = None  # e.g. /var/lib/node_exporter/textfile/orchestrator.prom
    pushgateway: str | None = Field(None, pattern=r"^https?://[^\s/@]+(:\d+)?(/[^\s@]*)?$")
    job: str = Field("orchestrator", pattern=r"^[A-Za-z0-9_-]{1,64}$")


class ProbeSection(Model):
    """A search of the operator's choosing, timed by the tool every ``interval_s`` (0: the watch's own interval):
    what a client waits for, end to end, where the nodes' counters give the time on each node per shard. With a
    probe, the latency budget holds the probe's time (the median probe of each interval)."""

    index: str = Field(min_length=1, max_length=255, pattern=r"^[^\s/#?]+$")  # an index, alias or pattern
    query: dict[str, Any] = Field(default_factory=lambda: {"match_all": {}})
    interval_s: float = Field(0, ge=0, le=3600)


class SearchSection(Model):
    """What searchers see, watched through a run (docs/restart-procedure.md, "Searches"): every node's search
    counters read every ``interval_s`` (one light read of the nodes' stats), the baseline before the first
    stop, then continuously: events, `status`, the report and the metrics. 0 turns the watch off.

    ``latency_budget`` ("" : none): what the slowest node's query time may reach while the run goes on, as a
    factor of its baseline (``2x``) or in milliseconds (``50ms``); with a ``probe``, the probe's time instead.
    Over it for ``sustain_s``, the recovery rate the run raised is halved (never below ``recovery_floor``);
    within it for as long, raised again by steps up to the run's own rate (restart/latency_control.py)."""

    interval_s: float = Field(10, ge=0, le=3600)
    latency_budget: str = Field("", pattern=r"^(|[0-9]+(\.[0-9]+)?(x|ms))$")
    sustain_s: float = Field(20, ge=0, le=3600)
    recovery_floor: str = Field("20mb", max_length=30)
    probe: ProbeSection | None = None

    @field_validator("recovery_floor")
    @classmethod
    def floor_size(cls, v: str) -> str:
        if not BYTE_SIZE_RE.fullmatch(v.lower()):
            raise ValueError(f"{v!r} is not a byte size such as 20mb")
        return v.lower()

    @model_validator(mode="after")
    def budget_needs_the_watch(self) -> SearchSection:
        if self.latency_budget and not self.interval_s:
            raise ValueError("latency_budget needs the watch: interval_s above 0")
        if self.probe is not None and not self.interval_s:
            raise ValueError("probe needs the watch: interval_s above 0")
        if self.latency_budget and float(self.latency_budget.rstrip("xms")) <= 0:
            raise ValueError("latency_budget must be above 0")
        return self


class MaintenanceSection(Model):
    """The agreed hours in which nodes may be taken away (restart/maintenance.py). ``windows``: each as
    ``DAYS HH:MM-HH:MM [ZONE]`` (``Mon-Fri 22:00-06:00 Europe/Berlin``); none: any time. A batch is begun
    only if its estimated time ends before the window closes. Else the run stops with every node back and
    every setting restored, as ``--stop-after`` stops it; ``outside: wait`` (the default) holds the run, its
    lock kept, until the next window opens, and goes on; ``stop`` ends the process (exit code 12) and
    ``orchestrate resume`` goes on. Not part of what a run does: `resume` takes today's windows without asking."""

    windows: list[str] = Field(default_factory=list, max_length=50)
    outside: Literal["wait", "stop"] = "wait"
    until: AwareDatetime | None = None  # an end of this invocation's own (`--until`): no batch ends after it

    def schedule(self) -> Schedule:
        return Schedule.of(self.windows, self.until)

    @field_validator("windows")
    @classmethod
    def readable(cls, v: list[str]) -> list[str]:
        problems = []
        for text in v:  # the parser's own words say what is wrong
            try:
                Window.parse(text)
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("; ".join(problems))
        return v


class Inventory(Model):
    cluster: ClusterSection
    ssh: SshSection = SshSection(known_hosts=Path("~/.ssh/known_hosts").expanduser())
    service: ServiceSection = ServiceSection()
    nodes: list[NodeEntry] = Field(min_length=1)
    timeouts: Timeouts = Timeouts()
    recovery: RecoveryLimits = RecoveryLimits()
    # The section named like `cluster.product` (`riak:` for Riak), as given: its plug-in's `settings`
    # model reads it (`settings_of`); the shared inventory knows no product's settings.
    product_settings: dict[str, Any] = Field(default_factory=dict)
    tuning: TuningSection = TuningSection()
    metrics: MetricsSection = MetricsSection()
    search: SearchSection = SearchSection()
    maintenance: MaintenanceSection = MaintenanceSection()
    upgrade: UpgradeSection = UpgradeSection()
    playbook: str | None = Field(None, pattern=r"^[A-Za-z0-9_./-]+$")  # None: the product's own procedure
    allow_yellow: bool = False
    # A run's default window (`--max-unavailable`): N nodes or P % of them away at once; "" or "1": one at a time.
    max_unavailable: str = Field("", pattern=r"^(|[1-9][0-9]{0,5}%?)$")
    _source: Path | None = PrivateAttr(None)  # the file it was read from: playbooks and profiles are looked
    # for beside it first

    def set_source(self, path: Path) -> None:
        self._source = path

    @property
    def directory(self) -> Path | None:
        return self._source.resolve().parent if self._source is not None else None

    @model_validator(mode="before")
    @classmethod
    def product_section(cls, data: Any) -> Any:
        """The top-level key named like the cluster's product becomes `product_settings`."""
        if not isinstance(data, dict):
            return data
        cluster = data.get("cluster")
        product = cluster.get("product", "elasticsearch") if isinstance(cluster, dict) else None
        if isinstance(product, str) and product in data and product not in cls.model_fields:
            return {**{k: v for k, v in data.items() if k != product}, "product_settings": data[product]}
        return data

    @model_validator(mode="after")
    def unique_nodes(self) -> Inventory:
        counts = Counter(n.name for n in self.nodes)
        dupes = sorted(n for n, c in counts.items() if c > 1)
        if dupes:
            raise ValueError(f"node names must be unique; repeated: {', '.join(dupes)}")
        zoned = [n.zone is not None for n in self.nodes]
        if any(zoned) and not all(zoned):
            raise ValueError("give a `zone` to every node or to none")
        return self

    def node(self, name: str) -> NodeEntry:
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, NodeEntry]:
        return {n.name: n for n in self.nodes}


SettingsT = TypeVar("SettingsT", bound=ProductSettings)


def settings_of(inv: Inventory, model: type[SettingsT]) -> SettingsT:
    """The inventory's section for its product, read by the product's own model; ConfigError naming the
    section's keys otherwise."""
    try:
        return model.model_validate(inv.product_settings)
    except ValidationError as exc:
        raise ConfigError("inventory", [f"{inv.cluster.product}.{p}" for p in problems_of(exc, None)]) from None
