"""File writing, the state folder and process liveness, shared by every layer."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from kbench.errors import ConfigError, UsageError
from kbench.inputs import TooLarge, read_limited


def safe(name: str) -> str:
    """A file or folder name made of letters, digits, '_', '.' and '-' (no separators, never '..')."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.")
    return re.sub(r"\.{2,}", ".", cleaned) or "unknown"


def checked_name(name: str, what: str) -> str:
    """``name`` when it is already a name ``safe`` gives, so that a name read back from a data file (result.json)
    names no other folder and holds no line break; UsageError naming ``what`` it is otherwise."""
    if safe(name) != name:
        raise UsageError(
            f"{what} {name!r}, which is not a name kbench gives (letters, digits, '_', '.' and '-', no '..' and no "
            "leading '.'): the file was altered; profile or analyze again"
        )
    return name


def _fresh_temp(folder: Path, name: str) -> tuple[int, Path]:
    """A new temp file beside ``name`` in ``folder``, created with mode 0666 so that the umask in force now applies,
    as to any file created plainly (mkstemp's 0600 would need a chmod to a umask read once: one process serves
    callers of several umasks, the resident)."""
    for _ in range(100):
        tmp = folder / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp name beside {folder / name}")


def write_atomic(path: Path, write: Callable[[IO[bytes]], object], mode: int | None = None) -> None:
    """Write a file through a temp file beside it and a rename: no reader (an agent, the next run) ever sees half a
    file, and a write that fails (disk full, a file-size limit) leaves nothing under the final name. ``mode``: set
    through the descriptor before the rename (a chmod by name after it would follow what stands there by then)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _fresh_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if mode is not None:
                os.fchmod(f.fileno(), mode)
        tmp.replace(path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:
            e.filename = str(path)  # a write to the descriptor names no file: the one the user asked for
        raise


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    write_atomic(path, lambda f: f.write(text.encode()), mode)


def write_json_atomic(path: Path, data: Any) -> None:
    """JSON, written atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def copy_atomic(src: Path, dst: Path) -> None:
    """A copy of ``src`` (its times kept) that appears whole or not at all."""

    def copy(f: IO[bytes]) -> None:
        with src.open("rb") as r:
            shutil.copyfileobj(r, f, 1 << 20)

    write_atomic(dst, copy)
    with contextlib.suppress(OSError):
        shutil.copystat(src, dst)


def kbench_tree() -> Path:
    """kbench's own files: the checkout it runs from (the repository whose src/ holds it), else its installed
    package folder."""
    package = Path(__file__).resolve().parent
    repo = package.parent.parent
    return repo if package.parent.name == "src" and (repo / "pyproject.toml").is_file() else package


def default_here(name: str, flag: str) -> Path:
    """The default folder ``name``, relative to the folder this process stands in, unless that folder is inside
    kbench's own checkout or installed package (its docs/kernels and kernels are kbench's, not the user's):
    UsageError naming ``flag`` to give instead (the same name given explicitly writes there)."""
    tree, here = kbench_tree(), Path.cwd().resolve()
    if here.is_relative_to(tree):
        what = "checkout" if (tree / "pyproject.toml").is_file() else "installed package"
        raise UsageError(
            f"this folder ({here}) is inside kbench's own {what} ({tree}), so {name} here is kbench's, not yours: "
            f"give {flag} <folder> (or {flag} {name} to write there anyway)"
        )
    return Path(name)


def write_target(path: Path, what: str) -> Path:
    """``path``, a folder kbench is about to write into, as named (``what`` names it in the message): refused
    (UsageError, one line) where it is itself a symbolic link, or where it is named below this folder but leads out
    of it through a link: a link a checked-out repository ships (docs/kernels -> ~/.claude, kernels -> ~/.config)
    never carries kbench's writes elsewhere. A path named outside this folder (absolute, or with ..) is the user's
    own choice above its last part."""
    here = Path.cwd().resolve()
    named = Path(os.path.normpath(Path.cwd() / path.expanduser()))  # .. taken as written, links not yet followed
    real = named.resolve()
    if named.is_symlink():
        raise UsageError(
            f"{what} {path} is a symbolic link (to {real}): kbench writes through no link; name the folder itself"
        )
    if named.is_relative_to(Path.cwd().absolute()) and not real.is_relative_to(here):
        raise UsageError(
            f"{what} {path} leads out of this folder ({here}) through a symbolic link, to {real}: kbench writes "
            "through no link; name that folder itself if it is meant"
        )
    return path


def me() -> int:
    """The user this process acts as (the one seam through which tests simulate another user's files)."""
    return os.geteuid()


def trusted_uids() -> frozenset[int]:
    """Whose files and folders shared with other users kbench believes: root's and this user's (tests replace it)."""
    return frozenset({0, me()})


def doubt(st: os.stat_result, folder: bool = False) -> str | None:
    """Why a folder (or a file in it) that other users may share cannot be trusted, from its lstat/fstat: a link,
    another kind of file, another owner, writable by others (a folder may be, with the sticky bit, like /tmp); None
    when it can."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not (stat.S_ISDIR if folder else stat.S_ISREG)(st.st_mode):
        return "is not a folder" if folder else "is not a plain file"
    if st.st_uid not in trusted_uids():
        return f"belongs to uid {st.st_uid}, neither you nor root"
    if st.st_mode & 0o022 and not (folder and st.st_mode & stat.S_ISVTX):
        return f"is writable by others{' without the sticky bit' if folder else ''} (mode {st.st_mode & 0o7777:o})"
    return None


def open_plain(path: Path, flags: int, mode: int = 0o666) -> int:
    """A descriptor of the plain file at ``path`` (made when ``flags`` has O_CREAT), never reached through a symbolic
    link and never a FIFO, device or a file with a second name (a hard link): what is written there lands in that
    file alone. ConfigError otherwise. An existing file is opened without O_CREAT, which Linux's protected_regular
    refuses for another user's file in a sticky folder."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # non-blocking: a planted FIFO cannot hang the open
    create = bool(flags & os.O_CREAT)
    for _ in range(8):  # the file may vanish or appear between tries
        try:
            fd = os.open(path, (flags | os.O_EXCL) if create else (flags & ~os.O_CREAT), mode)
            break
        except FileExistsError:
            create = False
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise
            create = True
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise
            raise ConfigError(f"{path} is not a plain file of its own ({e.strerror}): remove it") from None
    else:
        raise ConfigError(f"{path} keeps appearing and vanishing: something else is changing it")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        what = "it has other names (hard links)" if stat.S_ISREG(st.st_mode) else "a FIFO, socket or device"
        raise ConfigError(f"{path} is not a plain file of its own ({what}): remove it")
    return fd


def read_nofollow(path: Path, dir_fd: int | None = None) -> bytes:
    """A regular file's bytes, never through a symbolic link in its last component (kbench writes its files by
    rename, never as links: a link there was planted), never a FIFO or device (it would block or never end), and
    never more than its kind's size limit (kbench.inputs.TooLarge, before it is read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        return read_limited(f, path)  # inputs.TooLarge over the limit of its kind


_O_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_down(root: Path, parts: tuple[str, ...]) -> int:
    """A descriptor of the folder ``root/<parts>``, walked down from ``root`` one folder at a time without following
    any symbolic link below it (OSError, ELOOP or ENOTDIR, where one stands)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            below = os.open(part, _O_FOLDER, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_beneath(root: Path, path: Path) -> bytes:
    """``path`` (resolved, inside the resolved folder ``root``) read by walking down from ``root`` one folder at a
    time without following any symbolic link: a link swapped in after the path was checked is refused, not followed."""
    parts = path.relative_to(root).parts
    if not parts:
        raise OSError(f"{path} is a folder, not a file")
    fd = _open_down(root, parts[:-1])
    try:
        return read_nofollow(Path(parts[-1]), dir_fd=fd)
    finally:
        os.close(fd)


def plain_files(root: Path, folder: Path) -> Iterator[tuple[str, int]]:
    """Every regular file at any depth in ``folder`` (below ``root``), as its path relative to ``folder`` and a
    descriptor open for reading (closed when the caller asks for the next): walked down from ``root`` and through
    ``folder`` without following a symbolic link, so nothing outside ``folder`` is reached; links, FIFOs, devices
    and sockets are passed over."""
    top = _open_down(root, folder.relative_to(root).parts)
    try:
        for where, _, names, dir_fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            for name in names:
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
                except OSError:  # a link (ELOOP), or gone meanwhile
                    continue
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        yield PurePosixPath(where, name).as_posix(), fd
                finally:
                    os.close(fd)
    finally:
        os.close(top)


class NotPrivate(ConfigError):
    """A folder that should be this user's alone could be changed by another user: the message says which and why."""


def _check_above(fd: int, where: Path) -> None:
    """A folder above a private one: only root or this user may rename what is in it (else NotPrivate)."""
    why = doubt(os.fstat(fd), folder=True)
    if why is not None:
        raise NotPrivate(f"{where} {why}")


def _open_checked(path: Path) -> int:
    """A descriptor of folder ``path`` opened one component at a time from /, no symlink followed, each folder checked
    before the next is opened: what is checked is what is opened, whatever is swapped by name meanwhile."""
    fd = os.open("/", _O_FOLDER)
    walked = Path("/")
    try:
        for part in path.parts[1:]:
            _check_above(fd, walked)
            child = os.open(part, _O_FOLDER, dir_fd=fd)
            os.close(fd)
            fd, walked = child, walked / part
        _check_above(fd, walked)
    except BaseException:
        os.close(fd)
        raise
    return fd


def private_folder(where: Path) -> int:
    """A descriptor of the folder ``where``, this user's alone: made 0700 where missing (its parent must exist),
    never reached through a symbolic link, owned by this user with no access for others, and every folder above it
    owned by root or this user and writable by no one else (unless sticky, as /tmp), so that no one else can swap
    it or anything in it. NotPrivate (one line naming the folder and why) otherwise."""
    try:
        parent = _open_checked(Path(os.path.realpath(where.parent)))
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(where.name, 0o700, dir_fd=parent)
            fd = os.open(where.name, _O_FOLDER, dir_fd=parent)
        finally:
            os.close(parent)
    except OSError as e:
        why = "is a symbolic link" if e.errno == errno.ELOOP else f"cannot be used ({e.strerror})"
        raise NotPrivate(f"{where} {why}") from None
    st = os.fstat(fd)
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != me() or mode & 0o077:
        os.close(fd)
        raise NotPrivate(f"{where} is not private (owner uid {st.st_uid}, mode {mode:04o})")
    return fd


def user_folder() -> Path:
    """This user's own folder for what must not be shared with other users (the resident's socket, a GPU lock of
    one's own): $XDG_RUNTIME_DIR/kbench, else /tmp/kbench-<uid>; reached through ``private_folder``."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    return Path(base) / "kbench" if base else Path(f"/tmp/kbench-{os.getuid()}")


def json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object kbench wrote (params.json, predicted.json, a tiling record), read as ``read_nofollow`` does;
    None when it is missing, a link, unreadable, over its size limit, malformed, nested deeper than the parser goes,
    or not an object."""
    try:
        data = json.loads(read_nofollow(path))
    except (OSError, ValueError, RecursionError, TooLarge):
        return None
    return data if isinstance(data, dict) else None


def state_dir() -> Path:
    """Where lock state and per-GPU lock files live (shared with the scripts): $KBENCH_STATE_DIR or
    /tmp/kbench-state, world-writable with the sticky bit like /tmp, so a root script and a user run share it. It
    must be a real folder, owned by root or this user, and sticky where others may write it: anyone else could
    swap the lock files and clock records in it."""
    path = Path(os.environ.get("KBENCH_STATE_DIR", "/tmp/kbench-state"))
    if not path.exists() and not path.is_symlink():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir(0o700)  # never exist_ok: a link planted after the look fails it, and is never chmodded
        except FileExistsError:
            pass  # made (or planted) meanwhile: checked below like any folder found there
        except OSError as e:
            raise ConfigError(f"cannot create the state folder {path} (KBENCH_STATE_DIR): {e.strerror}") from None
        else:
            _share(path)
    try:
        why = doubt(path.lstat(), folder=True)
    except OSError as e:
        why = f"cannot be read ({e.strerror})"
    if why is not None:
        raise ConfigError(
            f"the state folder {path} {why}, so the GPU lock and clock records in it cannot be trusted: remove it "
            "(sudo install -d -m 1777 makes one to share) or set KBENCH_STATE_DIR to a folder of your own"
        )
    return path


def _share(path: Path) -> None:
    """Make the folder this process just created world-writable with the sticky bit, through a descriptor that
    reached no link (a folder renamed away and a link put in its place is left as it is)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_uid == me():
                os.fchmod(fd, 0o1777)
        finally:
            os.close(fd)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
