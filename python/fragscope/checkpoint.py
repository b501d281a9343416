"""Checkpoint requests from the node agent: a flag file beside the rank file, or a signal.

The agent writes `<rank file>.checkpoint` holding a request id (docs/rank-file.md); the hook
looks at it (one lstat in its open rank folder) and reads it only when it changed, only if it is a
small regular file owned by this user or root, without blocking and without following links. That
look is the recorder's publisher thread's: an lstat on a hung NFS server never returns, so the
training loop's poll() only reads what the last look found, and asks for the next one. The training
loop checkpoints when asked; the handled id goes back to the agent through the rank file's
`checkpoint_ack` field.
"""

import signal

from . import notices
from .rank_folder import RankFolder, UntrustedFile

FLAG_MAX_BYTES = 4096


class CheckpointRequests:
    """Tracks pending checkpoint requests. The training loop polls and acknowledges; one other thread,
    the one that owns `folder`, calls look_at_flag(). `wake` asks that thread for a look."""

    def __init__(self, folder: RankFolder = None, flag_name: str = "", signal_number: int = None, wake=None):
        self._folder = folder
        self._wake = wake
        self.flag_name = flag_name
        self.flag_path = folder.join(flag_name) if folder else None
        self.acknowledged = 0  # last request id handled
        self._requested = 0  # highest id in the flag file so far; written by look_at_flag() only
        self._flag_seen = None
        self._signalled = False
        self._signal = None
        self._previous_handler = None
        if signal_number is not None:
            self._catch(signal_number)

    def _catch(self, number):
        """Requests on signal `number`, chained to the handler it had (Lightning's SLURM requeue on
        SIGUSR1 still runs), which close() puts back."""
        number = int(number)
        if signal.getsignal(number) is None:  # set outside Python (faulthandler): it could not be put back
            notices.warn(f"signal:{number}",
                         f"checkpoint signal {number} not caught: a handler installed outside Python has it")
            return
        self._previous_handler = signal.signal(number, self._on_signal)
        self._signal = number

    def _on_signal(self, signum, frame):  # only sets a flag: the loop decides when to act
        self._signalled = True
        if callable(self._previous_handler):  # not SIG_DFL or SIG_IGN, which this handler replaces
            self._previous_handler(signum, frame)

    def close(self) -> None:
        """Puts the signal's previous handler back, unless one installed since replaced this one (it may
        chain to it: restoring would drop it). Never raises."""
        number, self._signal = self._signal, None
        if number is None:
            return
        try:
            if signal.getsignal(number) == self._on_signal:
                signal.signal(number, self._previous_handler)
        except ValueError as error:  # close() outside the main thread
            notices.warn(f"signal:{number}", f"signal {number} handler not restored: {error}")

    def stop_watching_flag(self) -> None:
        """The rank folder is going away (the rank file was withdrawn): signals only from now."""
        self._folder = None

    def poll(self) -> bool:
        """True while a request is pending (flag id above the last acknowledged, or a signal). Never touches
        the folder: it answers from the last look at the flag and asks for the next one, so a new flag is
        seen at a poll after the look that found it."""
        if self._folder is not None and self._wake is not None:
            self._wake()
        return self._signalled or self._requested > self.acknowledged

    def look_at_flag(self) -> None:
        """Reads the flag file when an lstat shows it changed. Blocks as long as the folder's file system does:
        call it from the thread that owns the folder, never the training loop's."""
        if self._folder is None:
            return
        try:
            info = self._folder.lstat(self.flag_name)
        except OSError as error:
            notices.warn("flag:" + self.flag_path, f"{self.flag_path}: cannot look at it ({error.strerror})")
            info = None
        seen = (info.st_ino, info.st_mtime_ns, info.st_size, info.st_mode) if info else None
        if seen is not None and seen != self._flag_seen:
            self._requested = max(self._requested, self._read_flag())
        self._flag_seen = seen

    def _read_flag(self) -> int:
        try:
            text = self._folder.read_small_file(self.flag_name, FLAG_MAX_BYTES)
            request = int(text.decode("ascii").strip() or 0)
            # The id goes back in the rank file's u64 checkpoint_ack; a larger one would also hide every later request.
            return request if 0 <= request < 2 ** 64 else 0
        except FileNotFoundError:
            return 0  # replaced between the lstat and the read: the next look sees the new one
        except UntrustedFile as problem:
            notices.warn("flag:" + self.flag_path, f"{self.flag_path}: ignored, it {problem}")
        except (OSError, ValueError):
            pass  # an unreadable or half-written id is no request
        return 0

    def acknowledge(self) -> int:
        """Marks every pending request handled; returns the id now acknowledged."""
        self._signalled = False
        self.acknowledged = max(self.acknowledged, self._requested)
        return self.acknowledged
