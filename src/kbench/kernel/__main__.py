"""`python -m kbench.kernel <kernel_package> [<version>] --<param>=<value> ... --prof_type=<mode>`: through the
resident kbench where there is one (kbench.cli.resident), else in this process."""

import sys

from kbench.cli import resident

code = resident.forward(sys.argv[1:])
if code is not None:
    sys.exit(code)

from kbench.cli.kernel import main  # noqa: E402 - only when no resident ran the command

main()
