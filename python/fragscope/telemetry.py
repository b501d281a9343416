"""Step telemetry as JSON lines: the fixtures' steps.jsonl schema plus the hook's own fields.

Schema (read by src/inputs/telemetry_reader): step, seq_len, mbs, optimizer_step,
data_wait_ms, compute_ms, t, the memory_stats keys in STAT_KEYS, and phase, rank, local_rank,
tokens, max_seq_len, h2d_ms, queue_depth, samples_per_s, tokens_per_s, step_time_ms,
device_total_bytes, hook_ms.
"""

import errno
import json
import os
import stat

# The memory_stats keys every line carries (the fixtures' recorder wrote the same ones).
STAT_KEYS = (
    "allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
    "inactive_split_bytes.all.current", "requested_bytes.all.current", "num_alloc_retries",
    "num_ooms", "segment.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
)


class TelemetryWriter:
    """Appends one JSON object per line and flushes it, so a crash loses at most the last line.

    Only a regular file is written: a FIFO or device there is refused at once (opened without
    blocking), with OSError, as is an unwritable path."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "is not a regular file", path)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        self._file = open(fd, "a", encoding="utf-8")

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record, separators=(", ", ": ")) + "\n")
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
