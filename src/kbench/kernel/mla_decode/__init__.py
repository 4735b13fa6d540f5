"""Absorbed MLA decode (DeepSeek-style multi-head latent attention): s new tokens attend to t cached latent rows."""

BASELINE = "base"
