"""The diagnosis catalogue by family: what the measurements say of a stage, each entry a mechanism with its trigger,
its gain model and its change (docs/diagnosis.md's table). kbench.analysis.opportunities runs them and ranks.

- ``evidence``: what a mode measured of one stage (``Evidence``), the item it yields (``Opportunity``), the gain cap;
- ``exchange``: an intermediate two kernels of one stage pass through DRAM (one writes it, a later one reads it);
- ``memory``: DRAM traffic beyond the compulsory bytes, uncoalesced access, too few bytes in flight;
- ``atomics``: atomics meeting at one address, counted as they execute (programs x atomics per program);
- ``compute``: tensor cores idle, tensor work in a lower precision, warp-level MMA, narrow tensor tiles, unpipelined
  operand loads, measured work beyond the model, FP64 arithmetic, too few warps to hide arithmetic latency;
- ``launch``: register spills, an underfilled grid, a partial last wave, launch-bound stages;
- ``stalls``: the dominant warp stall reason (counters), each reason mapped to its mechanism;
- ``pipeline``: warps waiting at an mbarrier for the asynchronous copies (TMA) that fill their next stage (Gluon);
- ``issue``: the issue roof (warp instructions issued against what the SMs issue) and the issue-bound item;
- ``programs``: how evenly a stage's programs share its work, and the uneven-programs item.
"""
