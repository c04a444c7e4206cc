"""Where the orchestrator keeps and finds its files, and how it writes them.

- state: run journals (``state_root()/runs/CLUSTER``); the sandbox keeps its own there too.
- the user's configuration: inventories (``clusters/``), playbooks and tuning profiles of their own.
- what the package ships: the default playbooks and tuning profiles (``orchestrator.shipped``).

Search order for a playbook or tuning profile named in an inventory (never the current directory
implicitly): an explicit path, the inventory's own directory, the user's configuration directory,
then what the package ships. See docs/configuration.md.
"""

from __future__ import annotations

import os
import stat
import tempfile
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from orchestrator.errors import ConfigError, JournalError


class UnsafePath(JournalError):
    """The state directory could be tampered with by another user."""


def state_root() -> Path:
    explicit = os.environ.get("ORCHESTRATOR_STATE")
    if explicit:
        return Path(explicit)
    if os.geteuid() == 0:
        return Path("/var/lib/orchestrator")
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "orchestrator"


def config_home() -> Path:
    """The user's own configuration: ``clusters/NAME.yaml``, ``playbooks/``, ``tuning/``."""
    explicit = os.environ.get("ORCHESTRATOR_CONFIG_HOME")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "orchestrator"


def shipped(kind: str) -> Traversable:
    """The folder of defaults the package ships: ``playbooks`` or ``tuning``."""
    return resources.files(f"orchestrator.shipped.{kind}")


def search(kind: str, name: str, inventory_dir: Path | None) -> tuple[Path | Traversable | None, list[str]]:
    """Find ``name`` (a ``kind``: playbooks or tuning) in the documented order; also say where it looked."""
    places: list[Path | Traversable] = []
    if name.endswith((".yaml", ".yml")) or "/" in name:
        explicit = Path(name).expanduser()
        places.append(explicit if explicit.is_absolute() or inventory_dir is None else inventory_dir / explicit)
    else:
        if inventory_dir is not None:
            places.append(inventory_dir / kind / f"{name}.yaml")
        places += [config_home() / kind / f"{name}.yaml", shipped(kind) / f"{name}.yaml"]
    looked = [str(p) if isinstance(p, Path) else f"(shipped) {kind}/{p.name}" for p in places]
    return next((p for p in places if p.is_file()), None), looked


def not_private(info: os.stat_result) -> str | None:
    """Why a file or directory with this ``lstat``/``fstat`` could be changed by someone other than this
    user (a symbolic link, another owner, group or other write), or None when only this user can."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if info.st_uid != os.geteuid():
        return f"belongs to uid {info.st_uid}, not to this user ({os.geteuid()})"
    if info.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def check_private_dir(path: Path) -> None:
    """Refuse ``path`` (a directory that exists) when it or a parent of it under the state root could be
    changed by another user. A journal read from such a place could be planted: `resume` runs its hooks
    and `abandon` writes its undo records, as this user (often root)."""
    for d in (path, *[p for p in path.parents if state_root() in (p, *p.parents)]):
        problem = not_private(d.lstat())
        if problem:
            remedy = "; `chmod go-w` it first" if "writable" in problem else \
                "; keep run state in a directory of this user's own (ORCHESTRATOR_STATE)"
            raise UnsafePath(f"{d} {problem}: refusing to read or keep run state there{remedy}")


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner (this user) can write: made so if missing (with its parents
    under the state root), refused if it is a symlink, someone else's, or writable by others. Journals
    and reports written there cannot then be redirected by a planted link."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_private_dir(path)
    return path


def existing_private_dir(path: Path) -> Path | None:
    """The read side of ``private_dir``: ``path`` if it is a directory that only this user can change,
    None if there is none, and refused (``UnsafePath``) otherwise. Nothing is created."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(info.st_mode) and not stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{path} is not a directory: refusing to read run state from it")
    check_private_dir(path)
    return path


def write_atomically(path: Path, text: str, mode: int = 0o600, make_parent: bool = True) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file. Only a regular file, or
    nothing, is replaced: a device (`/dev/null`, as root), a directory, a FIFO or a link at ``path`` is
    refused (ConfigError), never replaced by a file of this tool's."""
    not_a_file = what_is_there(path)
    if not_a_file:
        raise ConfigError(repr(str(path))[:300], [f"is {not_a_file}, not a regular file: only a regular file, or "
                                                   "nothing, is replaced (to write no file, leave the option out)"])
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def what_is_there(path: Path) -> str | None:
    """What is at ``path`` when it is something other than a regular file (None: a regular file, or nothing)."""
    try:
        info = os.lstat(path)
    except (OSError, ValueError):  # nothing there, or not to be reached (a NUL byte): the write itself says why
        return None
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    return None if stat.S_ISREG(info.st_mode) else next((said for test, said in kinds if test(info.st_mode)),
                                                         "not a regular file")


def write_file_for_the_operator(path: Path, text: str, mode: int) -> None:
    """A file an operator named (a metrics textfile, a report page, an inventory, a snapshot), written
    atomically as `write_atomically` writes; whatever the system refuses (a name too long, a `/proc` path, no
    permission) is a ConfigError naming the path, never a traceback."""
    try:
        write_atomically(path, text, mode, make_parent=False)  # a directory named wrongly is not made
    except (OSError, ValueError) as exc:
        said = getattr(exc, "strerror", None) or exc
        raise ConfigError(repr(str(path))[:300], [f"cannot be written: {said}"]) from None


def inventory_dirs() -> list[Path]:
    """Where `--cluster NAME` looks for NAME.yaml, in order."""
    dirs = [Path(os.environ["ORCHESTRATOR_CONFIGS"])] if os.environ.get("ORCHESTRATOR_CONFIGS") else []
    return [*dirs, Path.cwd() / "configs", config_home() / "clusters"]


def known_clusters(incomplete: str = "") -> list[str]:
    """The cluster names `--cluster` finds (for shell completion): every NAME.yaml in the inventory dirs.
    Here, beside the paths, so that a TAB imports no configuration model."""
    names = {p.stem for d in inventory_dirs() if d.is_dir() for p in d.glob("*.yaml")}
    return sorted(n for n in names if n.startswith(incomplete))
