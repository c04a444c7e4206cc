"""Figures as people read them: durations and byte counts."""

from __future__ import annotations


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`1 batch`, `3 batches`: a count with its word, singular or plural."""
    return f"{n} {word if n == 1 else plural or word + ('es' if word.endswith(('s', 'x', 'ch', 'sh')) else 's')}"


def human_duration(seconds: float | None, fine: bool = False) -> str:
    """`2m06s`; ``fine``: a short phase to the tenth or hundredth (`0.24s`, `3.1s`), not `0s`."""
    if seconds is None:
        return "-"
    if fine and seconds < 10:
        return f"{seconds:.2f}s" if seconds < 1 else f"{seconds:.1f}s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{s:02d}s"
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m"


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


BYTE_UNITS = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4, "pb": 1024**5}


def parse_size(size: str) -> int:
    """Bytes in an Elasticsearch byte size (`100mb`, `1.5gb`, `512`); ValueError when it is not one."""
    text = size.strip().lower()
    for suffix in ("kb", "mb", "gb", "tb", "pb", "b"):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * BYTE_UNITS[suffix])
    return int(text)
