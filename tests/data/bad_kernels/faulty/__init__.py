"""Plans that are themselves wrong (not their kernels): each version breaks one part of the plan contract."""
