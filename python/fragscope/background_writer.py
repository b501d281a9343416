"""The hook's file writes, off the training thread: one daemon writer thread per process and a bounded queue.

A file system that stalls (a hard-mounted NFS server gone away) blocks open() and write() for as long as it
stalls, and nothing the hook ships may hang the job it observes. So steps.jsonl lines and OOM dumps are
handed to this writer (docs/hook.md, "Writes off the training thread"):

- submit() never blocks: the queue holds at most MAX_ITEMS pieces of work and MAX_BYTES of their data,
  plus one piece larger than MAX_BYTES (an OOM snapshot with a long history) at a time. Work that does
  not fit is dropped and counted; the writer thread names it in a notice once it gets going again.
- One thread does the work in submission order, so the lines of a file keep their order. It starts at
  the first submit(); a child made by os.fork() starts its own (the parent's thread does not exist there).
- At interpreter exit (an OOM that ends the process included) the queue gets EXIT_WAIT_S to drain; what
  is still not written then is named in one notice on stderr, and the process exits all the same.
"""

import atexit
import collections
import os
import threading
import time

from . import notices

MAX_ITEMS = 1024  # about 1 MiB of steps.jsonl lines: a thousand steps of a stalled file system
MAX_BYTES = 64 << 20  # OOM dumps without a long history; one larger snapshot is taken beside them
EXIT_WAIT_S = 10.0  # what an exiting process waits for its writes; a stalled file system never returns


class Work:
    """A piece of work for submit(): run() does the writing (what it raises becomes a notice), `size` is the
    bytes of data it holds while queued, `what` names what it writes for notices ("a line of PATH"). Other
    objects with the three attributes do too (an OOM dump's `what` names the files it has still to write)."""

    def __init__(self, run, size: int, what: str):
        self.run, self.size, self.what = run, size, what


class BackgroundWriter:
    """A queue of Work and the thread that does it, in submission order."""

    def __init__(self, max_items=MAX_ITEMS, max_bytes=MAX_BYTES):
        self._max_items, self._max_bytes = max_items, max_bytes
        self._queue = collections.deque()  # work not finished, the one being done first
        self._bytes = 0  # the data of the queued work of at most max_bytes
        self._large_queued = False  # whether the one piece over max_bytes is queued
        self._submitted = self._finished = 0
        self.dropped = 0
        self._unreported_drops = collections.Counter()  # what was dropped since the last notice
        self._changed = threading.Condition(threading.Lock())
        self._thread = None

    def submit(self, work) -> bool:
        """Queues `work`; False when the queue is full (it is dropped and counted). Never blocks on I/O."""
        with self._changed:
            if not self._fits(work.size) or not self._start():
                self.dropped += 1
                self._unreported_drops[work.what] += 1
                return False
            if work.size > self._max_bytes:
                self._large_queued = True
            else:
                self._bytes += work.size
            self._queue.append(work)
            self._submitted += 1
            self._changed.notify_all()
            return True

    def _fits(self, size) -> bool:
        if len(self._queue) >= self._max_items:
            return False
        if size > self._max_bytes:
            return not self._large_queued
        return self._bytes + size <= self._max_bytes

    def _start(self) -> bool:
        """Starts the thread at the first submit(); False when none can be started (too many threads)."""
        if self._thread is None:
            thread = threading.Thread(target=self._serve, name="fragscope-writer", daemon=True)
            try:
                thread.start()
            except RuntimeError:
                return False
            self._thread = thread
        return True

    def flush(self, timeout: float) -> bool:
        """Waits until the work submitted so far is done; False if `timeout` seconds passed first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            target = self._submitted
            while self._finished < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def unfinished(self) -> str:
        """What is queued or being written, and what was dropped, in a few words: "" when nothing."""
        with self._changed:
            pending = collections.Counter(work.what for work in self._queue)
            dropped = self.dropped
        parts = [_counted(what, count) for what, count in pending.items()]
        if dropped:
            parts.append(f"{dropped} writes dropped earlier (the queue was full)")
        return "; ".join(parts)

    def _serve(self):
        while True:
            with self._changed:
                while not self._queue:
                    self._changed.wait()
                work = self._queue[0]  # left queued while it runs: its bytes are still held, exit names it
            try:
                work.run()
            except Exception as error:  # the thread outlives any one write
                notices.warn("writer:" + work.what, f"not written: {work.what}: {notices.describe(error)}")
            with self._changed:
                drops, self._unreported_drops = self._unreported_drops, collections.Counter()
            for what, count in drops.items():  # before the work counts as done: flush() then sees the notices
                notices.warn("dropped:" + what, f"not written: {_counted(what, count)}: the writes queued for the "
                                                f"file system reached {self._max_items} or {self._max_bytes >> 20} MiB")
            with self._changed:
                self._queue.popleft()
                if work.size > self._max_bytes:
                    self._large_queued = False
                else:
                    self._bytes -= work.size
                self._finished += 1
                self._changed.notify_all()


def _counted(what: str, count: int) -> str:
    return what if count == 1 else f"{what} (x{count})"


_writer = None  # this process's, made at the first submit()
_writer_lock = threading.Lock()


def submit(work) -> bool:
    """Hands `work` to this process's writer thread; False when it was dropped (the queue is full)."""
    global _writer
    with _writer_lock:
        if _writer is None:
            _writer = BackgroundWriter()
        writer = _writer
    return writer.submit(work)


def flush(timeout: float) -> bool:
    """Waits at most `timeout` seconds for this process's writes submitted so far; True when all are done."""
    writer = _writer
    return writer is None or writer.flush(timeout)


def write_all(fd: int, data: bytes) -> None:
    """Writes all of `data` to `fd` (a regular file may take it in parts, e.g. up to a file size limit)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _flush_at_exit():
    writer = _writer
    if writer is None or writer.flush(EXIT_WAIT_S):
        return
    notices.warn("writer-exit", f"not written at exit, the file system took no more in {EXIT_WAIT_S:g} s: "
                                f"{writer.unfinished()}")


def _forget_in_child():
    """A forked child has no writer thread, only a copy of its queue (the parent writes that): it starts its own.
    The lock may have been held by another of the parent's threads at the fork: the child gets a fresh one."""
    global _writer, _writer_lock
    _writer, _writer_lock = None, threading.Lock()


# Registered at import, before the exit handlers of what uses the writer (the capture's stop()): run after them.
atexit.register(_flush_at_exit)
os.register_at_fork(after_in_child=_forget_in_child)
