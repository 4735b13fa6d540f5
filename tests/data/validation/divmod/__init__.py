"""A periodic window sum y_i = sum_{t<T} x[(i + t) mod n]: the wrap taken with an integer modulo by the runtime n on
every tap, and its twin wrapping with one compare and subtract."""
