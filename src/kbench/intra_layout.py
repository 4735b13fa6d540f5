"""The intra-kernel profiler buffer's layout, shared by the kernel side that writes it (``kbench.plan.intra``), the
host that allocates and reads it (``kbench.capture.intra``) and the decoder (``kbench.analysis.intra``).

int64 words: ``HEADER`` words (``MAGIC``, the capacity in slots, the CTA count the kernel wrote, free), then one
region of ``capacity // ctas`` words per CTA in launch order (x fastest). A region's first word is the CTA's record
count (low 32 bits), its SM (bits 32..61) and ``WRITTEN``; each record after it is the timer's low ``TIME_BITS``
nanoseconds shifted left 16, the task type shifted left 1, and 1 for a start, 0 for an end.
"""

HEADER = 4
MAGIC = 0x6B62_656E_6368_0001  # "kbench", layout 1
TIME_BITS = 47  # 39 hours of nanoseconds before the low bits wrap (the decoder unwraps once)
TASK_BITS = 15  # task types 0..32767
WRITTEN = 1 << 62
