# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An HTTP body into a file without passing through Python: os.splice moves the bytes from the
socket through a pipe into the file inside the kernel, while a thread of its own hashes the file
from the page cache as it grows. A read loop copies every byte twice through the process and
hashes it from there; on a node whose cores are busy this is what sets the fetch rate.

Linux (Python 3.10+) and plain HTTP only: `usable` says whether a response qualifies, and the
caller falls back to its read loop otherwise (TLS, a chunked body, another platform)."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import select
import threading
import urllib.parse
from collections.abc import Callable
from typing import Protocol

# Bytes moved per splice call; the pipe is grown to hold them (F_SETPIPE_SZ, Linux 2.6.35+).
PIPE_BYTES = 1024 * 1024
F_SETPIPE_SZ = 1031
# How often the hashing thread and the progress callback hear of new bytes.
REPORT_BYTES = 4 * 1024 * 1024


class Feed(Protocol):
    def update(self, chunk: bytes | memoryview) -> None: ...


def usable(resp: object) -> bool:
    """Whether resp's body can be spliced: an http.client response of plain HTTP with a length,
    not chunked, whose buffered reader sits on the socket."""
    if not hasattr(os, "splice"):
        return False
    geturl = getattr(resp, "geturl", None)
    url = geturl() if callable(geturl) else ""
    return (
        urllib.parse.urlsplit(url).scheme == "http"
        and not getattr(resp, "chunked", True)
        and getattr(resp, "length", None) is not None
        and isinstance(getattr(resp, "fp", None), io.BufferedReader)
    )


class FileHasher:
    """Feeds `feed` with a file's bytes from offset 0, as far as the writer says it has written
    (`written`), from a thread of its own; `close` waits for the last byte and raises what the
    thread met."""

    def __init__(self, path: str, feed: Feed | None, written: int = 0) -> None:
        self.path = path
        self.feed = feed
        self.end = written
        self.done = False
        self.error: BaseException | None = None
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self.run, daemon=True)
        if feed is not None:
            self.thread.start()

    def run(self) -> None:
        feed = self.feed
        if feed is None:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                offset = 0
                while True:
                    with self.cond:
                        while self.end == offset and not self.done:
                            self.cond.wait()
                        end, done = self.end, self.done
                    while offset < end:
                        chunk = os.pread(fd, min(REPORT_BYTES, end - offset), offset)
                        if not chunk:
                            raise OSError(f"{self.path} is shorter than the {end} bytes written to it")
                        feed.update(chunk)
                        offset += len(chunk)
                    if done and offset == self.end:
                        return
            finally:
                os.close(fd)
        except BaseException as err:  # handed to the caller by close()
            self.error = err

    def written(self, end: int) -> None:
        with self.cond:
            self.end = end
            self.cond.notify()

    def close(self, end: int | None = None, *, check: bool = True) -> None:
        """Wait until the thread has hashed up to `end` (or what it was told last); with check,
        raise what it met."""
        if self.feed is None:
            return
        with self.cond:
            if end is not None:
                self.end = end
            self.done = True
            self.cond.notify()
        self.thread.join()
        if check and self.error is not None:
            raise self.error


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def splice_body(
    resp: io.BufferedIOBase | object,
    out_fd: int,
    count: int,
    timeout: float,
    on_written: Callable[[int], None],
) -> int:
    """Move up to `count` bytes of resp's body into out_fd at its position; returns the bytes
    moved, fewer when the peer closes early. `on_written(total)` hears of progress every few MiB
    and at the end. A wait longer than `timeout` for the next byte raises TimeoutError."""
    reader = resp.fp  # type: ignore[attr-defined]
    # What http.client's reader already holds past the headers goes first; read1 returns only
    # buffered bytes when there are any, so the reader is empty afterwards.
    head = reader.read1(count) if count else b""
    write_all(out_fd, head)
    moved = len(head)
    sock = resp.fileno()  # type: ignore[attr-defined]
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    rpipe, wpipe = os.pipe()
    try:
        with contextlib.suppress(OSError):  # the default pipe size still works, in smaller steps
            fcntl.fcntl(wpipe, F_SETPIPE_SZ, PIPE_BYTES)
        reported = moved
        while moved < count:
            try:
                n = os.splice(sock, wpipe, min(PIPE_BYTES, count - moved), flags=os.SPLICE_F_MOVE)
            except BlockingIOError:  # the socket has a timeout, so it is non-blocking
                if not poller.poll(timeout * 1000):
                    raise TimeoutError(f"no data for {timeout} s") from None
                continue
            if n == 0:
                break  # the peer closed
            while n:
                m = os.splice(rpipe, out_fd, n, flags=os.SPLICE_F_MOVE)
                n -= m
                moved += m
            if moved - reported >= REPORT_BYTES:
                on_written(moved)
                reported = moved
    finally:
        os.close(rpipe)
        os.close(wpipe)
    on_written(moved)
    return moved
