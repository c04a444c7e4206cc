"""Loading YAML into typed models, reporting every problem at once with its place in the file."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

import orjson
import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.errors import ConfigError
from orchestrator.paths import not_private

M = TypeVar("M", bound=BaseModel)
MAX_CONFIG_BYTES = 1_000_000


MAX_NESTING = 64  # deeper YAML is no configuration; libyaml's C parser can crash on extreme nesting


MAX_EXPANDED_VALUES = 200_000  # values a document holds once its aliases are expanded
# ... and its text: an alias of one long string repeated counts its length each time (a playbook of a few
# kilobytes aliasing a long string made a journal of hundreds of megabytes). Ten times a file's own limit.
MAX_EXPANDED_BYTES = 10 * MAX_CONFIG_BYTES


def expanded_size(node: yaml.Node, sizes: dict[int, int] | None = None) -> int:
    """How many values the document under ``node`` holds with every alias expanded (an alias shares its
    anchor's node: counted once per place it is used, each shared node measured once)."""
    sizes = {} if sizes is None else sizes
    if id(node) not in sizes:
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        sizes[id(node)] = 1 + sum(expanded_size(child, sizes) for child in children)
    return sizes[id(node)]


def expanded_bytes(node: yaml.Node, sizes: dict[int, int] | None = None) -> int:
    """About how many bytes the document under ``node`` holds with every alias expanded (each scalar's text,
    counted once per place it is used; each shared node measured once)."""
    sizes = {} if sizes is None else sizes
    if id(node) not in sizes:
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = len(str(node.value)) + 2
        else:
            children = list(node.value) if isinstance(node, yaml.SequenceNode) else \
                [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
            sizes[id(node)] = 2 + sum(expanded_bytes(child, sizes) for child in children)
    return sizes[id(node)]


class _UniqueKeys:
    """A YAML mapping with a key given twice is refused (the last one would win silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
            if isinstance(key, str | int | float | bool):
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice",
                                                            key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc, no-any-return]


# libyaml's loader when PyYAML was built with it: a large inventory parses many times faster.
FastLoader: Any = type("FastLoader", (_UniqueKeys, getattr(yaml, "CSafeLoader", yaml.SafeLoader)), {})


def read_bytes_of(path: Path, limit: int = MAX_CONFIG_BYTES, private: bool = False) -> bytes:
    """The file's bytes, if it is a regular file of reasonable size: never a device, a FIFO (which
    would hang) or a directory, and never more than ``limit`` read (a size can lie: /dev/zero).
    ``private``: the file must be this user's own and writable by no one else, and is not followed
    through a symbolic link (run state that another user could have planted); checked on the file
    opened, so it cannot be swapped between the check and the read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if private else 0))
    except FileNotFoundError:
        raise ConfigError(str(path), ["file not found"]) from None
    except OSError as exc:
        if private and exc.errno == errno.ELOOP:
            raise ConfigError(str(path), ["is a symbolic link; refusing to follow it"]) from None
        raise ConfigError(repr(str(path))[:300], [f"cannot open: {exc.strerror or exc}"]) from None
    except ValueError as exc:  # a NUL byte in the path
        raise ConfigError(repr(str(path))[:300], [f"cannot open: {exc}"]) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(str(path), ["not a regular file (a directory, device or pipe)"])
        problem = not_private(info) if private else None
        if problem:
            raise ConfigError(str(path), [f"{problem}; refusing to read it as run state"])
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read: {exc.strerror}"]) from None
    finally:
        os.close(fd)
    if size > limit:
        raise ConfigError(str(path), [f"file is larger than {limit // 1_000_000} MB; is this the right file?"])
    return b"".join(chunks)


def refuse_special_file(path: Path, label: str) -> None:
    """For a path another program or library will open (a key, a CA, a config): if it is there, it must be
    a regular file. A FIFO would hang the reader and /dev/zero never end."""
    try:
        mode = path.expanduser().stat().st_mode
    except (OSError, ValueError):
        return  # missing: whoever opens it says so
    if not stat.S_ISREG(mode):
        raise ConfigError(label, [f"{str(path)[:300]} is not a regular file (a directory, device or pipe)"])


def read_text(path: Path | Traversable) -> str:
    if not isinstance(path, Path):
        return path.read_text(encoding="utf-8")  # shipped with the package
    try:
        return read_bytes_of(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), [f"not UTF-8 text: {exc}"]) from None


def strict_json(data: bytes) -> Any:
    """JSON as this tool writes it: no NaN or Infinity, no number beyond a double (json.loads accepts them by
    default), at most 1,024 levels deep; each refused with a ValueError (orjson's JSONDecodeError). orjson
    rather than json.loads: a 5,000-node snapshot (124 MB) reads in about half the time."""
    return orjson.loads(data)


def nesting(text: str) -> int:
    """A cheap upper bound of the document's nesting: flow brackets open at once, or indentation levels."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    indents = {len(line) - len(line.lstrip(" -")) for line in text.splitlines() if line.strip()}
    return max(deepest, len(indents))


def parse(path: Path | Traversable, text: str) -> Any:
    if nesting(text) > MAX_NESTING:
        raise ConfigError(str(path), [f"nested more than {MAX_NESTING} levels deep; this is not a configuration"])
    loader = FastLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None and expanded_size(node) > MAX_EXPANDED_VALUES:
            # A "billion laughs": a few hundred bytes whose aliases become gigabytes in memory and the journal.
            raise ConfigError(str(path), [f"its YAML aliases expand it to more than {MAX_EXPANDED_VALUES:,} "
                                          "values: refused"])
        if node is not None and expanded_bytes(node) > MAX_EXPANDED_BYTES:
            raise ConfigError(str(path), [f"its YAML aliases expand it to more than {MAX_EXPANDED_BYTES // 1_000_000} "
                                          "MB of text: refused"])
        return None if node is None else loader.construct_document(node)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: said at its line and column
        line, column = text.count("\n", 0, exc.position) + 1, exc.position - text.rfind("\n", 0, exc.position)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise ConfigError(str(path), [f"line {line}, column {column}: not valid YAML (character #x{char:04x} is not "
                                      "allowed)"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(str(path), [f"{where}not valid YAML ({problem})"]) from None
    except RecursionError:
        raise ConfigError(str(path), ["YAML is nested too deeply"]) from None
    finally:
        loader.dispose()


def node_tree(text: str) -> yaml.Node | None:
    """The parsed node tree, for line numbers in error messages (only built when there are errors)."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return None


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the deepest node along ``loc`` that exists in the file."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            if match is None:
                # An unknown key: point at the key itself.
                key = next((k for k, _ in node.value if getattr(k, "value", None) == part), None)
                return key.start_mark.line + 1 if key is not None else line
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


def format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def problems_of(exc: ValidationError, node: yaml.Node | None) -> list[str]:
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        # Drop pydantic's internal tags (e.g. 'function-after[...]') from the location.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function"))))
        line = _line_of(node, loc)
        where = format_loc(loc) + (f" (line {line})" if line else "")
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (misspelt?)"
        problems.append(f"{where}: {msg}")
    return problems


def load_model(path: Path | Traversable, model: type[M],
               overrides: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> M:
    """The file, checked as ``model``; ``overrides``: what the caller puts over the file's keys first (a
    scheduler's connection gives the cluster's endpoints and secrets), checked with it."""
    text = read_text(path)
    data = parse(path, text)
    if not isinstance(data, dict):
        raise ConfigError(str(path), ["the file must be a YAML mapping (key: value) at the top level"])
    if overrides is not None:
        data = overrides(data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(str(path), problems_of(exc, node_tree(text))) from None
