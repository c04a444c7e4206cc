"""The base of every configuration model: frozen, strict (an unknown key is an error), finite numbers."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# Lengths are checked by max_length, never by a counted repetition in a pattern: pydantic-core's
# regex engine builds an automaton of every Unicode character for `[^\x00\n\r]{0,4000}`, at a cost per
# field each time the command started (`bench_completion` measures a command's start).
ABSOLUTE_PATH = Annotated[str, Field(pattern=r"^/[^\x00\n\r]*$", max_length=4001)]  # never an option (-x),
# nor a relative or multi-line value
ONE_LINE = Annotated[str, Field(pattern=r"^[^\x00\n\r]+$", max_length=4000)]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
