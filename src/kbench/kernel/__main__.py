"""`python -m kbench.kernel <kernel_package> [<version>] --<param>=<value> ... --prof_type=<mode>`: through the
resident kbench where there is one (kbench.cli.resident), else in this process. The working folder, which `python -m`
puts first on sys.path, is taken off it before anything else is imported (a typer.py planted there would run)."""

import sys

from kbench import working_folder

working_folder.leave()

from kbench.cli import resident  # noqa: E402 - after the working folder left sys.path

code = resident.forward(sys.argv[1:])
if code is not None:
    sys.exit(code)

from kbench.cli.kernel import main  # noqa: E402 - only when no resident ran the command

main()
