"""Checkpoint requests from the node agent: a flag file beside the rank file, or a signal.

The agent writes `<rank file>.checkpoint` holding a request id (docs/rank-file.md); the hook
polls its modification time (one stat per step) and the training loop checkpoints when asked.
The handled id goes back to the agent through the rank file's `checkpoint_ack` field.
"""

import os
import signal


class CheckpointRequests:
    """Tracks pending checkpoint requests. Not thread-safe: the training loop polls it."""

    def __init__(self, flag_path: str, signal_number: int = None):
        self.flag_path = flag_path
        self.acknowledged = 0  # last request id handled
        self._requested = 0
        self._flag_mtime = None
        self._signalled = False
        if signal_number is not None:
            signal.signal(signal_number, self._on_signal)

    def _on_signal(self, signum, frame):  # only sets a flag: the loop decides when to act
        self._signalled = True

    def poll(self) -> bool:
        """True while a request is pending (flag id above the last acknowledged, or a signal)."""
        try:
            mtime = os.stat(self.flag_path).st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime is not None and mtime != self._flag_mtime:
            self._flag_mtime = mtime
            try:
                with open(self.flag_path, encoding="ascii") as f:
                    self._requested = max(self._requested, int(f.read().strip() or 0))
            except (OSError, ValueError):
                pass  # a foreign or half-written file is no request
        return self._signalled or self._requested > self.acknowledged

    def acknowledge(self) -> int:
        """Marks every pending request handled; returns the id now acknowledged."""
        self._signalled = False
        self.acknowledged = max(self.acknowledged, self._requested)
        return self.acknowledged
