"""y = 2x + 1 over an fp32 vector in four chunk launches: with a device synchronization after each chunk (a
leftover debugging/progress check), and its twin without."""
