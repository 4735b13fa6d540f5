"""`python -m kbench`: the `kbench` command, with the working folder (which `python -m` puts first on sys.path)
taken off sys.path before anything else is imported: a typer.py planted there would run."""

from kbench import working_folder

working_folder.leave()

from kbench.cli.entry import main  # noqa: E402 - after the working folder left sys.path

main()
