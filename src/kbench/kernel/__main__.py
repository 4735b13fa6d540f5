"""`python -m kbench.kernel <kernel_package> [<version>] --<param>=<value> ... --prof_type=<mode>`."""

from kbench.cli.kernel import main

main()
