"""y = 2x + 1 in fp32 from a bf16 x: the x converted to fp32 by PyTorch before the kernel (an aten copy kernel the
plan does not declare), and its twin that converts inside the kernel's loads."""
