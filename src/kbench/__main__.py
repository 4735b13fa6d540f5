"""`python -m kbench`: the `kbench` command."""

from kbench.cli.entry import main

main()
