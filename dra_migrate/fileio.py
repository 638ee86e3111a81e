"""Writing files so that a crash or a refusal never leaves half of one (snapshots, plans, reports,
converted manifests); reading the text of a file a person may have saved (`text_of`)."""

from __future__ import annotations

import codecs
import errno
import io
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, cast

# macOS <sys/fcntl.h> `#define F_FULLFSYNC 51`; Python's fcntl module names it only from 3.12.
_DARWIN_F_FULLFSYNC = 51


def sync_to_media(fd: int) -> None:
    """fsync `fd`, so that what was written survives a power loss. On macOS fsync() only hands the data to the
    drive, which "may not physically write the data to the platters for quite some time and it may be written
    in an out-of-order sequence"; F_FULLFSYNC asks the drive to flush it (Apple fsync(2), fcntl(2); SQLite's
    `PRAGMA fullfsync`). A filesystem that refuses it (SMB, some FUSE mounts: ENOTSUP) gets fsync, as on Linux,
    where fsync(2) already reaches the device."""
    if sys.platform == "darwin":
        import fcntl

        try:
            fcntl.fcntl(fd, getattr(fcntl, "F_FULLFSYNC", _DARWIN_F_FULLFSYNC))
            return
        except OSError:
            pass
    os.fsync(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_writer(path: Path, *, private: bool = False) -> Iterator[IO[bytes]]:
    """Write beside `path`, fsync, then rename over it: readers see the old file or the new one.

    A replaced file keeps its permissions; a new one gets the usual 0666 less the umask (mkstemp's 0600 would
    hide plans and reports from the rest of a change-review team), or 0600 less the umask when it is `private`
    (what may hold credentials: `snapshot --keep-env` keeps container env values, where API keys live; client-go
    writes a kubeconfig 0600 for the same reason, tools/clientcmd/loader.go WriteToFile). A symlink stays a
    symlink: the file it names is what is replaced (a plan kept as `current.yaml -> plans/2026-12-06.yaml`). A
    device, FIFO or socket (`--out /dev/stdout`, `/dev/null`, a pipe) is written as a stream, as a shell
    redirection writes it: renaming over it would put a regular file where the device was (as root, `/dev/null`
    for every process on the machine), and it has no "old file" to keep."""
    if _is_special(path):
        with _named_errors(path), open(path, "wb") as fh:
            yield fh
        return
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o7777 if target.exists() else (0o600 if private else 0o666) & ~_umask()
    import tempfile  # here: commands that only read (show, status, diff) never load it

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            sync_to_media(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _is_special(path: Path) -> bool:
    """Whether `path` (its symlinks followed) is something other than a regular file that exists; a
    directory is refused by name (the temporary file's name, in the error, would only confuse)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:  # not there yet, or a symlink to a file not there yet: created
        return False
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    return not stat.S_ISREG(mode)


@contextmanager
def _named_errors(path: Path) -> Iterator[None]:
    """An OSError of writing a stream names the path it was written to (`/dev/full`: "No space left on
    device" alone would not say where)."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            e.filename = str(path)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text.encode("utf-8"))


# Byte order marks, longest first (UTF-32's little-endian mark begins with UTF-16's). YAML 1.2 reads UTF-8,
# 16 and 32 by their mark (YAML 1.2.2 §5.2); a JSON parser "MAY ignore" a UTF-8 one (RFC 8259 §8.1); Windows
# PowerShell 5.1 writes `kubectl ... > file` as UTF-16 with a mark, `Out-File -Encoding utf8` UTF-8 with one,
# and Windows editors save UTF-8 with one.
MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def mark_of(data: bytes) -> tuple[bytes, str] | None:
    """The byte order mark `data` begins with, and the codec that reads past it; None without one."""
    return next(((mark, codec) for mark, codec in MARKS if data.startswith(mark)), None)


def text_of(data: bytes) -> str:
    """A file's text: UTF-8, or UTF-8, 16 or 32 as its byte order mark says (the mark is no part of it).
    Raises UnicodeDecodeError (`encoding` names which) for bytes that are not that."""
    marked = mark_of(data)
    return data.decode(marked[1] if marked else "utf-8")


def not_text(e: UnicodeDecodeError) -> str:
    """What a refusal says of bytes `text_of` could not read: "not UTF-8 text", "not UTF-16-LE text"."""
    return f"not {e.encoding.upper()} text"


# gzip (RFC 1952 §2.3.1: ID1 ID2). A snapshot of 10,000 nodes is gigabytes of JSON that compresses some
# twentyfold: `fleet.jsonl.gz` is read and written as the file it holds.
GZIP_MAGIC = b"\x1f\x8b"
GZIP_SUFFIX = ".gz"


def format_suffix(path: Path) -> str:
    """What a file holds, by its name: `.jsonl` for both `fleet.jsonl` and `fleet.jsonl.gz`."""
    suffixes = path.suffixes
    return suffixes[-2] if path.suffix == GZIP_SUFFIX and len(suffixes) > 1 else path.suffix


def open_read(path: Path) -> IO[bytes]:
    """A file opened to read its bytes, decompressed as it is read if it is gzip (by its magic, whatever its
    name). A damaged or cut-short gzip file raises EOFError, gzip.BadGzipFile or zlib.error when read."""
    fh = path.open("rb")
    if fh.peek(2)[:2] != GZIP_MAGIC:
        return fh
    import gzip  # here: only a compressed file pays for it

    # The open file is decompressed, not the path opened again: a pipe (`show -`, `show <(gzip -c plan.yaml)`)
    # cannot be read twice, and the bytes `peek` buffered are only in `fh`. `myfileobj` is what GzipFile
    # closes with itself when it opened the file (CPython Lib/gzip.py `GzipFile.close`): it owns `fh` so.
    z = gzip.GzipFile(fileobj=fh, mode="rb")
    z.myfileobj = fh  # type: ignore[assignment]  # typeshed: FileIO; any binary file is closed the same
    return cast(IO[bytes], z)


def read_inflated(path: Path, limit: int) -> bytes | None:
    """A file's bytes, decompressed if it is gzip (as `open_read`); None when they come to more than `limit`
    (a gzip file that inflates without end stops there, not when the memory is gone). A plain file is read
    whole, at once, as `Path.read_bytes`; a compressed one a chunk at a time."""
    with open_read(path) as fh:
        if isinstance(fh, io.BufferedReader):
            if os.fstat(fh.fileno()).st_size > limit:
                return None  # a regular file's size says so before it is read (a pipe's is 0: read)
            data = fh.read()
            return data if len(data) <= limit else None
        chunks, total = [], 0
        while chunk := fh.read(1 << 22):
            total += len(chunk)
            if total > limit:
                return None
            chunks.append(chunk)
    return b"".join(chunks)


@contextmanager
def gzip_writer(out: IO[bytes], compress: bool) -> Iterator[IO[bytes]]:
    """`out` itself, or a gzip stream into it: no file name or time in its header (the name would be the
    temporary file's, and two writes of one fleet should be the same bytes), gzip's own default level."""
    if not compress:
        yield out
        return
    import gzip

    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=6, mtime=0) as z:
        yield z  # type: ignore[misc]
