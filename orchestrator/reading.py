"""How text that a cluster or a host sent is read: numbers, paths and lines, one way everywhere.

What a cluster or a host says may be forged (a compromised node lies about itself) or broken (a proxy in
the cluster's place). Python's own readers are too kind for it: `str.isdigit` accepts `²` and `٣`, which
`int` then refuses or reads; `int` reads 4,300 digits before it refuses more, and any length it is allowed;
`str.splitlines` splits on `\\r`, `\\x1c`-`\\x1e`, `\\x85`, U+2028 and U+2029, so a value a host echoes
could add a line, a fact, of its own. Each reader here says None (or the caller's error) for what it does
not take; none raises.
"""

from __future__ import annotations

import re

MAX_DIGITS = 19  # what a signed 64-bit value needs: every count, size, time and id in an answer
_DIGITS = re.compile(r"[0-9]+")  # ASCII alone; the length is checked before it
# A path the tool may name in a host's shell or read there: absolute, of the characters paths of packages
# and installs are made of. No space, quote, `$`, backquote, glob, control character, NUL or `..` part.
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9._+@%,:=/-]{0,4095}")


def whole_number(text: object, max_digits: int = MAX_DIGITS) -> int | None:
    """``text`` (a str of ASCII digits, at most ``max_digits`` of them, or an int that is not a bool) as a
    number; None for anything else."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text if 0 <= text < 10**max_digits else None
    if isinstance(text, str) and len(text) <= max_digits and _DIGITS.fullmatch(text):
        return int(text)
    return None


def plain_path(text: object) -> str | None:
    """``text`` when it is a plain absolute path (see `_PLAIN_PATH`), without a trailing slash; else None."""
    if not isinstance(text, str) or not _PLAIN_PATH.fullmatch(text):
        return None
    if any(part in (".", "..") for part in text.split("/")):
        return None
    return text.rstrip("/") or "/"


def lines(text: str) -> list[str]:
    """``text``'s lines, split on `\\n` alone (a `\\r` or another separator stays inside its line)."""
    parts = text.split("\n")
    return parts[:-1] if parts and parts[-1] == "" else parts
