"""Point factories for the Ray executor's tests (tests/test_sweep_ray.py), importable by the test cluster's worker
processes (its PYTHONPATH holds the repository): each runs the sweep's real point code through the pipeline with the
replay backend of tests/test_pipeline.py on a stand-in H100 (tests/pipeline_fakes.py), and some misbehave on cue
(a worker that dies, a task that raises, a point that takes long) to exercise retries, failures and cancellation."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kbench import sweep


@contextmanager
def _offline() -> Iterator[None]:
    """The worker process as the replay tests see theirs, for one point (undone after it: the cluster's workers run
    other tests' points too, with the real pipeline)."""
    from kbench.modes import registry
    from tests.pipeline_fakes import offline_gpu
    from tests.test_pipeline import Replay

    patches = pytest.MonkeyPatch()
    offline_gpu(patches)
    registry.register(Replay())
    try:
        yield
    finally:
        registry.unregister("replay")
        patches.undo()


def replay(spec: dict[str, Any], kernel_path: list[str], progress: Callable[[str], None]) -> sweep.PointFn:
    """The sweep's own point code (``sweep.profiler``), each point in a worker set up for the replay backend."""
    inner = sweep.profiler(spec, kernel_path, progress)

    def point(version: str, params: dict[str, str]) -> Any:
        with _offline():
            return inner(version, params)

    return point


def misbehaving(marks: str) -> Callable[[dict[str, Any], list[str], Callable[[str], None]], sweep.PointFn]:
    """A replay factory whose point, by its --s value: 1 runs; 2 kills its worker process on its first try only;
    3 kills it on every try; 4 raises RuntimeError; 5 takes 60 s, then leaves ``<marks>/finished-5``. Each try
    leaves ``<marks>/try-<s>-<n>``."""
    return _Misbehaving(marks)


class _Misbehaving:
    def __init__(self, marks: str) -> None:
        self.marks = marks

    def __call__(self, spec: dict[str, Any], kernel_path: list[str], progress: Callable[[str], None]) -> sweep.PointFn:
        inner = replay(spec, kernel_path, progress)
        marks = Path(self.marks)

        def point(version: str, params: dict[str, str]) -> Any:
            s = params["s"]
            tries = len(list(marks.glob(f"try-{s}-*")))
            (marks / f"try-{s}-{tries + 1}").touch()
            if (s == "2" and tries == 0) or s == "3":
                os._exit(1)
            if s == "4":
                raise RuntimeError("a planted bug in the point code")
            if s == "5":
                time.sleep(60)
                (marks / "finished-5").touch()
            return inner(version, params)

        return point
