"""A number of report.json with where it comes from (measured, analytic, derived, n/a): the one shape report_json.py
and kernels_json.py write every number in."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kbench.model import Model

Source = Literal["measured", "interpreter", "analytic", "derived", "n/a"]


class Value(Model):
    value: float | None
    unit: str
    source: Source
    by: str = ""  # the tool and metric or timer; the plan's model; or the formula
    inputs: dict[str, float] = Field(default_factory=dict)  # a derived value's operands


def _measured(value: float | None, unit: str, by: str) -> Value:
    return Value(value=value, unit=unit, source="measured" if value is not None else "n/a", by=by)


def _derived(value: float | None, unit: str, formula: str, **inputs: float | None) -> Value:
    if value is None or any(v is None for v in inputs.values()):
        return Value(value=value, unit=unit, source="n/a" if value is None else "derived", by=formula)
    return Value(value=value, unit=unit, source="derived", by=formula, inputs={k: v for k, v in inputs.items() if v})
