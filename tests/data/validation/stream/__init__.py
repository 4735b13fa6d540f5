"""y = 2x + 1 over an fp32 vector by a grid-stride kernel: 132 one-warp CTAs looping (too few bytes in flight), and
its twin with one 4096-element block per 8-warp CTA."""
