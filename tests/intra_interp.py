"""Run under TRITON_INTERPRET=1 by tests/test_intra_record.py (the profiler decides at import whether Triton
interprets): a kernel that records two tasks per CTA into kbench's profiler buffer on the CPU, the trace exported.
argv: <trace path> <slots> [off]"""

import json
import sys

import torch
import triton
import triton.language as tl

from kbench.capture import intra as ic
from kbench.plan.intra import Profiler


@triton.jit  # type: ignore[untyped-decorator]
def two_tasks(x, buf, PROFILE: tl.constexpr):
    profiler = Profiler.create(buf, ENABLE_PROFILING=PROFILE)
    profiler = profiler.record(is_start=True, task_type=0)
    v = tl.load(x + tl.program_id(0))
    profiler = profiler.record(is_start=False, task_type=0)
    profiler = profiler.record(is_start=True, task_type=1)
    tl.store(x + tl.program_id(0), v + 1.0)
    profiler = profiler.record(is_start=False, task_type=1)


if __name__ == "__main__":
    path, slots = sys.argv[1], int(sys.argv[2])
    x = torch.zeros(5)
    if sys.argv[3:] == ["off"]:
        buf = ic.alloc_profiler_buffer(slots, device="cpu")
        before = buf.clone()
        two_tasks[(5,)](x, buf, False)
        print(json.dumps({"untouched": bool(torch.equal(before, buf)), "x": x.tolist()}))
    else:
        with ic.ProfilerBuffer(slots, path, ["load", "store"], kernel="two_tasks", device="cpu") as buf:
            two_tasks[(5,)](x, buf, True)
        print(json.dumps({"x": x.tolist()}))
