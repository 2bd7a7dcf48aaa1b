"""Writing user files safely: nothing is ever half-written, and nothing is replaced that is not the user's own file.

- A regular file is written through a temporary file in the same folder and renamed over the target when the
  block ends without an error; the temporary file is removed on any error, Ctrl-C and SIGTERM included (the CLI
  turns SIGTERM into KeyboardInterrupt). Before anything is written the target is opened for writing, so a file
  the user may not write (mode 0444, someone else's) is refused, never replaced.
- A character device or a FIFO (``/dev/null``, a named pipe, a terminal) and ``/dev/stdout``, ``/dev/stderr``,
  ``/dev/fd/N`` are streamed into: never renamed over.
- A symbolic link is never followed nor replaced (those device names apart); a block device, a socket or a
  folder is refused.
- A folder (``report.md``'s charts) is written as a temporary folder renamed into place: no half-written folder,
  no stale file left from an earlier run.

Every refusal is one KvplanError line naming the path.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Callable, Iterator

from kvplan.errors import KvplanError, clip_text

_STD_FD = re.compile(r"^/(?:dev/(?:std(in|out|err)|fd/(\d+))|proc/self/fd/(\d+))$")
_STD_NAMES = {"in": 0, "out": 1, "err": 2}
_ALLOWED = "allowed: a regular file, a new path, a character device or a FIFO"


def _shown(path: str | os.PathLike) -> str:
    return clip_text(os.fspath(path))


def _reason(exc: OSError) -> str:
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def write_atomic(path: str | os.PathLike, text: str, *, exclusive: bool = False) -> None:
    """Write ``text`` to ``path`` by the rules above: readers never see a half-written file.

    ``exclusive``: create only; an existing ``path`` (a dangling symlink too) is refused, and of several concurrent
    writers exactly one wins (a hard link is atomic). Otherwise the file is replaced and keeps its mode; a new file
    gets the default mode (0o666 less the umask).
    """
    with open_atomic(path, exclusive=exclusive) as f:
        f.write(text)


def check_writable(path: str | os.PathLike, *, exclusive: bool = False) -> None:
    """Refuse now what ``write_atomic(path)`` would refuse (a folder, a symbolic link, a file you may not write, a
    missing or read-only folder), writing nothing: a command that writes several files checks every path first,
    so bad input never leaves some written and others not."""
    target = Path(path)
    name = _shown(target)
    if _target(target, name, exclusive) is not None:
        return  # a device, a FIFO, /dev/stdout: streamed into
    folder = target.parent
    if not os.path.isdir(folder):
        raise KvplanError(f"{name}: cannot write in {_shown(folder)}: no such folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise KvplanError(f"{name}: cannot write in {_shown(folder)}: permission denied")


@contextmanager
def open_atomic(path: str | os.PathLike, *, exclusive: bool = False, newline: str | None = None) -> Iterator[IO[str]]:
    """A text file to stream into (``write_atomic``'s rules): it becomes ``path`` only when the block ends without an
    error, so a reader never sees a partial file, whatever stops the writer (an error, Ctrl-C, SIGTERM). A device
    or a FIFO is written directly."""
    target = Path(path)
    name = _shown(target)
    stream = _target(target, name, exclusive)
    if stream is not None:
        with _stream(stream, target, name, newline) as f:
            yield f
        return
    fd, tmp = _create_temp(target, name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            _create_exclusive(tmp, target, name)
        else:
            _keep_mode(target, tmp)
            os.replace(tmp, target)
    except OSError as exc:
        raise KvplanError(f"{name}: cannot write: {_reason(exc)}") from None
    finally:
        _remove(tmp)


def _target(target: Path, name: str, exclusive: bool) -> int | Path | None:
    """What ``target`` is: None (a new path or a regular file the user may write: write atomically), a file
    descriptor or a path to stream into; refused otherwise."""
    std = _STD_FD.match(os.path.abspath(target))
    if std:
        return _STD_NAMES[std[1]] if std[1] else int(std[2] or std[3])
    try:
        info = os.lstat(target)
    except (FileNotFoundError, NotADirectoryError):
        return None  # a new file (or a missing folder: the temporary file's creation names it)
    except (OSError, ValueError) as exc:
        raise KvplanError(f"{name}: cannot write: {_reason(exc) if isinstance(exc, OSError) else exc}") from None
    mode = info.st_mode
    if exclusive and not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        if stat.S_ISDIR(mode):
            raise KvplanError(f"{name}: is a directory; allowed: a file path")
        raise KvplanError(f"{name}: exists; pass --force to overwrite it")
    if stat.S_ISLNK(mode):
        kind = _followed(target)
        if kind is not None and (stat.S_ISCHR(kind) or stat.S_ISFIFO(kind)):
            return target
        raise KvplanError(f"{name}: a symbolic link; {_ALLOWED} (kvplan never writes through a link)")
    if stat.S_ISDIR(mode):
        raise KvplanError(f"{name}: is a directory; allowed: a file path")
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return target
    if not stat.S_ISREG(mode):
        kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise KvplanError(f"{name}: {kind}; {_ALLOWED}")
    _require_writable(target, name)
    return None


def _followed(target: Path) -> int | None:
    try:
        return os.stat(target).st_mode
    except (OSError, ValueError):
        return None


def _require_writable(target: Path, name: str) -> None:
    """Open the existing file for writing (nothing is written nor truncated): what the user may not write (mode 0444,
    another user's file, a read-only mount) is refused instead of replaced."""
    try:
        os.close(os.open(target, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                         | getattr(os, "O_CLOEXEC", 0)))
    except OSError as exc:
        raise KvplanError(f"{name}: cannot write: {_reason(exc)}; kvplan replaces only a file you may write") from None


@contextmanager
def _stream(where: int | Path, target: Path, name: str, newline: str | None) -> Iterator[IO[str]]:
    """Write straight into a device, a FIFO or an inherited file descriptor (/dev/stdout)."""
    try:
        if isinstance(where, int):
            for std in (sys.stdout, sys.stderr):  # what was printed before comes first
                if std is not None and not std.closed:
                    std.flush()
            f = os.fdopen(os.dup(where), "w", encoding="utf-8", newline=newline)
        else:
            f = open(where, "w", encoding="utf-8", newline=newline)
    except OSError as exc:
        raise KvplanError(f"{name}: cannot write: {_reason(exc)}") from None
    try:
        with f:
            yield f
            f.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise KvplanError(f"{name}: cannot write: {_reason(exc)}") from None


def _create_temp(target: Path, name: str) -> tuple[int, Path]:
    """A new empty file beside ``target``, created with mode 0o666 so the umask applies."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    folder = target.parent
    while True:
        tmp = folder / f".{target.name[:60]}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise KvplanError(f"{name}: cannot write in {_shown(folder)}: {_folder_reason(exc, folder)}") from None


def _folder_reason(exc: OSError, folder: Path) -> str:
    if isinstance(exc, FileNotFoundError) and not os.path.isdir(folder):
        return "no such folder"
    return _reason(exc)


def _create_exclusive(tmp: Path, target: Path, name: str) -> None:
    try:
        os.link(tmp, target)
        return
    except FileExistsError:
        raise KvplanError(f"{name}: exists; pass --force to overwrite it") from None
    except OSError:  # no hard links here (some network and FUSE file systems): claim the name, then replace it
        pass
    try:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        raise KvplanError(f"{name}: exists; pass --force to overwrite it") from None
    os.replace(tmp, target)


def _keep_mode(target: Path, tmp: Path) -> None:
    """An overwritten file keeps its permission bits (a 0644 card stays 0644)."""
    try:
        mode = stat.S_IMODE(os.lstat(target).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return
    os.chmod(tmp, mode)


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:  # gone already, or best effort: the original error matters more
        pass


# ---- folders ----------------------------------------------------------------------------------------------------

def write_folder_atomic(folder: str | os.PathLike, files: dict[str, str], owned: Callable[[str], bool]) -> None:
    """A folder holding exactly ``files`` ({file name: text}), written as a temporary folder beside it and renamed
    into place. An existing folder is replaced only when every entry in it is a regular file ``owned`` says kvplan
    writes there (old charts); a symlink, a file, or a folder holding anything else is refused."""
    target = Path(folder)
    name = _shown(target)
    old = _old_folder(target, name, owned)
    tmp = _temp_name(target, "tmp")
    try:
        os.mkdir(tmp, 0o777)
    except OSError as exc:
        raise KvplanError(f"{name}: cannot write in {_shown(target.parent)}: {_folder_reason(exc, target.parent)}"
                          ) from None
    stale = None
    try:
        for file, text in files.items():
            with open(tmp / file, "x", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        if old:
            stale = _temp_name(target, "old")
            os.rename(target, stale)
        try:
            os.rename(tmp, target)
        except OSError:
            if stale is not None:
                os.rename(stale, target)
                stale = None
            raise
    except OSError as exc:
        raise KvplanError(f"{name}: cannot write: {_reason(exc)}") from None
    finally:
        for leftover in (tmp, stale):
            if leftover is not None and os.path.lexists(leftover):
                shutil.rmtree(leftover, ignore_errors=True)


def _old_folder(target: Path, name: str, owned: Callable[[str], bool]) -> bool:
    try:
        info = os.lstat(target)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError) as exc:
        raise KvplanError(f"{name}: cannot write: {_reason(exc) if isinstance(exc, OSError) else exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        raise KvplanError(f"{name}: {kind}; allowed: a new path or a folder kvplan wrote (kvplan never writes "
                          "through a link)")
    try:
        entries = list(os.scandir(target))
    except OSError as exc:
        raise KvplanError(f"{name}: cannot write: {_reason(exc)}") from None
    foreign = [e.name for e in entries if not (e.is_file(follow_symlinks=False) and owned(e.name))]
    if foreign:
        raise KvplanError(f"{name}: holds {clip_text(foreign[0], 60)}, which kvplan did not write; allowed: a new "
                          "path or a folder of kvplan's own files (move it away)")
    return True


def _temp_name(target: Path, what: str) -> Path:
    return target.parent / f".{target.name[:60]}.{secrets.token_hex(6)}.{what}"
