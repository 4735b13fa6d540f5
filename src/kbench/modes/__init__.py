"""Profiling modes, each one backend module behind ``base.Backend``, found through ``registry``."""
