"""The one error hierarchy: the CLI prints ``str(error)`` as one line and exits with ``exit_code``."""

import errno

# errors of the machine, not of kbench: the disk is full, a file-size limit, a read-only or forbidden folder
WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


class KbenchError(Exception):
    """Something the user can act on; the message says what to do."""

    exit_code = 1


class WriteRefused(KbenchError):
    """The machine refused a write (exit 1): nothing truncated is left under the file's name."""


def refused_write(e: OSError) -> WriteRefused | None:
    """A write's OSError as the one line the user gets when the machine refused it (``WRITE_FAILURES``); None when
    it is of another kind."""
    if e.errno not in WRITE_FAILURES:
        return None
    return WriteRefused(f"cannot write{f' {e.filename}' if e.filename else ''}: {e.strerror}")


class UsageError(KbenchError):
    """Bad input: unknown kernel, version or parameter, a malformed option."""

    exit_code = 2


class NoGpuError(KbenchError):
    """The requested work needs a CUDA GPU and none is visible."""

    exit_code = 3


class ConfigError(KbenchError):
    """A configuration file (conf/devices.json, an autotune cache entry) is malformed."""

    exit_code = 4


class ToolMissing(KbenchError):
    """A tool or library the work needs is not installed (ncu, nsys, Ray, ncu_report): the message says what to
    install."""

    exit_code = 7


class KernelError(KbenchError):
    """The kernel under test crashed or computed a wrong result."""

    exit_code = 5


class SweepFailures(KbenchError):
    """A sweep finished with points that failed (exit 6), or with none that ran (exit 1); its table is written."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: raised (not an Exception, so no handler of plan code swallows it) so that every
    cleanup runs, as on Ctrl-C; the process then exits 128 + the signal's number (143, 129)."""

    def __init__(self, message: str, signum: int = 15) -> None:
        super().__init__(message)
        self.signum = signum


def bad_name(e: BaseException) -> UsageError | None:
    """A path given by a user or a client that no file system takes (a name too long, a NUL byte in it), as the bad
    input it is (exit 2), never a kbench bug; None for any other error."""
    if isinstance(e, OSError) and e.errno == errno.ENAMETOOLONG:
        name = str(e.filename or "a path")
        shown = name if len(name) <= 80 else f"{name[:60]}... ({len(name):,} characters)"
        return UsageError(f"{shown}: a name too long for the file system; give a shorter path")
    if isinstance(e, ValueError) and "embedded null byte" in str(e):
        return UsageError("a path holds a NUL byte, which no file name can; give it without")
    return None
