"""The one base of kbench's pydantic models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """A pydantic model whose validator is built on its first use, not at import: a command builds only the
    models it touches (`kbench analyze` of an .ncu-rep never builds the timeline's or the plan's)."""

    model_config = ConfigDict(defer_build=True)
