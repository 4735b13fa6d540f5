"""Pure analysis: device peaks, roofline arithmetic, bottleneck classification, run summaries."""
