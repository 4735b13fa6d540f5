"""A row sum whose grid leaves most SMs idle, and its split twin."""
