"""Step telemetry as JSON lines: the fixtures' steps.jsonl schema plus the hook's own fields.

Schema (read by src/inputs/telemetry_reader): step, seq_len, mbs, optimizer_step,
data_wait_ms, compute_ms, t, the memory_stats keys in STAT_KEYS, and phase, rank, local_rank,
tokens, max_seq_len, h2d_ms, queue_depth, samples_per_s, tokens_per_s, step_time_ms,
device_total_bytes, hook_ms; dropped_lines on the first line written after lines the writer's
full queue dropped (how many; the reader keeps it as an extra field).
"""

import json
import os

from . import background_writer, notices
from .rank_folder import RankFolder

# The memory_stats keys every line carries (the fixtures' recorder wrote the same ones).
STAT_KEYS = (
    "allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
    "inactive_split_bytes.all.current", "requested_bytes.all.current", "num_alloc_retries",
    "num_ooms", "segment.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
)


class TelemetryWriter:
    """Appends one JSON object per line, each line one write(), so a crash loses at most the last line.

    The writer thread (background_writer.py) opens the file at the first line and writes it: a stalled
    file system stalls that thread, never the caller's. Opened as every file the hook writes
    (rank_folder.py): in a folder that is this user's and not writable by others, never through a link,
    never blocking on a FIFO or device, mode 0600. Anything else, or a failed write (a full disk), turns
    the telemetry off with one notice naming the path; the lines written so far stay."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)  # the writer thread opens it later, maybe after an os.chdir
        self.failed = False  # set by the writer thread: no more lines
        self._fd = None  # the writer thread's
        self._dropped = 0  # lines the full queue dropped since it last took one
        self._line = f"a line of {self.path}"

    def write(self, record: dict) -> None:
        """Queues the line; never blocks. The first line taken after dropped ones says how many."""
        if self.failed:
            return
        if self._dropped:
            record = dict(record, dropped_lines=self._dropped)
        data = (json.dumps(record, separators=(", ", ": ")) + "\n").encode("utf-8")
        taken = background_writer.submit(background_writer.Work(lambda: self._append(data), len(data), self._line))
        self._dropped = 0 if taken else self._dropped + 1

    def close(self) -> None:
        """Closes the file after the lines queued before. Should a full queue drop that too, the descriptor
        stays open until the process exits: closing on the caller's thread could stall with the file system."""
        background_writer.submit(background_writer.Work(self._close_file, 0, f"closing {self.path}"))

    # -- on the writer thread -----------------------------------------------------------------
    def _append(self, data: bytes) -> None:
        if self.failed:
            return
        try:
            if self._fd is None:
                self._fd = self._open()
        except OSError as error:
            self._fail(f"telemetry disabled: {notices.describe(error)}")
            return
        try:
            background_writer.write_all(self._fd, data)
        except OSError as error:
            self._fail(f"telemetry disabled: {self.path}: {error.strerror or error}")

    def _open(self) -> int:
        folder = RankFolder.open_output(os.path.dirname(self.path))
        try:
            return folder.open_append(os.path.basename(self.path))
        finally:
            folder.close()

    def _fail(self, message: str) -> None:
        self.failed = True
        notices.warn("telemetry:" + self.path, message)
        self._close_file()

    def _close_file(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass  # the lines were written or their failure reported; nothing is left to lose
