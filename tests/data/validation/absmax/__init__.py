"""max |x| of an fp32 vector (an fp8 scale's amax): |x| taken by PyTorch before the kernel (an aten kernel writing a
whole temporary), and its twin taking it in the kernel. Both end with one scalar tl.atomic_max per program: a healthy
use of atomics (4096 of them), which no item may blame."""
