"""Step telemetry as JSON lines: the fixtures' steps.jsonl schema plus the hook's own fields.

Schema (read by src/inputs/telemetry_reader): step, seq_len, mbs, optimizer_step,
data_wait_ms, compute_ms, t, the memory_stats keys in STAT_KEYS, and phase, rank, local_rank,
tokens, max_seq_len, h2d_ms, queue_depth, samples_per_s, tokens_per_s, step_time_ms,
device_total_bytes, hook_ms.
"""

import json
import os

from .rank_folder import RankFolder

# The memory_stats keys every line carries (the fixtures' recorder wrote the same ones).
STAT_KEYS = (
    "allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
    "inactive_split_bytes.all.current", "requested_bytes.all.current", "num_alloc_retries",
    "num_ooms", "segment.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
)


class TelemetryWriter:
    """Appends one JSON object per line and flushes it, so a crash loses at most the last line.

    Opened as every file the hook writes (rank_folder.py): in a folder that is this user's and
    not writable by others, never through a link, never blocking on a FIFO or device, mode 0600.
    Anything else raises OSError naming the path."""

    def __init__(self, path: str):
        self.path = path
        folder = RankFolder.open_output(os.path.dirname(os.path.abspath(path)))
        try:
            fd = folder.open_append(os.path.basename(path))
        finally:
            folder.close()
        self._file = open(fd, "a", encoding="utf-8")

    def write(self, record: dict) -> None:
        self._file.write(json.dumps(record, separators=(", ", ": ")) + "\n")
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
