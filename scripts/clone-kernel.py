#!/usr/bin/env python3
"""Clone a kernel version: `scripts/clone-kernel.py <pkg> <from> <to> [--kernel-path DIR]` (= `kbench clone`)."""

import sys

from kbench.cli.app import main

if __name__ == "__main__":
    main(["clone", *sys.argv[1:]])
