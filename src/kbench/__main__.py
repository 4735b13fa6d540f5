"""`python -m kbench`: the `kbench` command."""

from kbench.cli.app import main

main()
