"""Thin command-line layer: parse, call the API, print. Heavy imports happen inside commands."""
