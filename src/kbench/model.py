"""The one base of kbench's pydantic models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class Model(BaseModel):
    """A pydantic model whose validator is built on its first use, not at import: a command builds only the
    models it touches (`kbench analyze` of an .ncu-rep never builds the timeline's or the plan's)."""

    model_config = ConfigDict(defer_build=True)


def first_error(e: ValidationError) -> str:
    """A validation error's first complaint in one line: where (the field's path) and what."""
    first = e.errors()[0]
    return f"{'.'.join(map(str, first['loc'])) or 'the record'}: {first['msg']}"
