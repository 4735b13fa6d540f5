"""What `pip install .` and its extras bring beside the user's torch: never a CUDA component. A CUDA build of torch
pins its own (PyPI's torch 2.11 to 2.14.1 for Linux x86_64 are CUDA 13.0 builds: nvidia-cuda-cupti==13.0.85 through
cuda-toolkit 13.0.x), and a requirement that disagrees makes pip replace torch: `cupti-python>=13.4` in the dev extra
needed nvidia-cuda-cupti~=13.4, and pip swapped torch 2.14.1+cu130 for another build. CI's dry run (.ci/run) shows
the resolver's plan for `.[dev]` beside torch 2.14.1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).parents[1]
# NVIDIA's wheels that torch's CUDA builds pin, and the CUPTI binding whose every release with PM sampling (13.3+)
# needs nvidia-cuda-cupti~=13.3; nvidia-ml-py (NVML's pure-Python binding) is pinned by no torch
CUDA_PART = re.compile(r"^(cupti-python|cuda-toolkit|cuda-bindings|nvidia-(?!ml-py$).+)$")


def requirements(project: dict[str, object]) -> dict[str, list[Requirement]]:
    """Each route's requirements: `.` (the base dependencies) and each extra, with the extras it names expanded."""
    deps = project["dependencies"]
    extras = project["optional-dependencies"]
    assert isinstance(deps, list) and isinstance(extras, dict)
    routes = {".": [Requirement(d) for d in deps]}

    def expand(extra: str) -> list[Requirement]:
        out = []
        for line in extras[extra]:
            r = Requirement(line)
            out += [x for e in sorted(r.extras) for x in expand(e)] if r.name == "kbench" else [r]
        return out

    routes |= {f".[{e}]": expand(e) for e in extras}
    return routes


def cuda_parts(routes: dict[str, list[Requirement]]) -> list[str]:
    return [f"{route}: {r}" for route, reqs in routes.items() for r in reqs if CUDA_PART.match(r.name.lower())]


def test_no_install_route_pins_a_cuda_component_that_torch_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cuda_parts(requirements(project)) == []


def test_a_cuda_component_is_found_through_an_extra_that_names_another() -> None:
    project: dict[str, object] = {
        "dependencies": ["torch>=2.4", "nvidia-ml-py>=12.535"],
        "optional-dependencies": {"cupti": ["cupti-python>=13.4; sys_platform == 'linux'"], "dev": ["kbench[cupti]"]},
    }
    assert cuda_parts(requirements(project)) == [
        '.[cupti]: cupti-python>=13.4; sys_platform == "linux"',
        '.[dev]: cupti-python>=13.4; sys_platform == "linux"',
    ]
