"""fp16 y = 3x over vectors that start 2 bytes into their buffers (no 16-byte alignment: 2-byte loads and stores),
and its twin on the aligned starts of the same buffers."""
