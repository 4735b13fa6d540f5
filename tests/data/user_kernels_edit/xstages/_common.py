"""What the versions of xstages share."""

FACTOR = 2.0  # the reference's scale
