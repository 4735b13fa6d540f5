"""fp16 C = tril(A @ B): every 128x128 tile computed and the upper triangle masked on store, and its twin whose
tiles entirely above the diagonal only store zeros."""
