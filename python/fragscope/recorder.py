"""Turns one step's measurements into a telemetry line and the rank file's record.

Torch-free: fragscope.torch.Monitor measures, StepRecorder keeps the window, the totals, the
JSONL file, the rank file and its publisher thread. Tested on its own in tests/python.

The rank folder may sit on a file system that stalls (FRAGSCOPE_RANK_DIR on a hung NFS mount): a store
into the mapped rank file or an lstat of the checkpoint flag would then never return. So after start-up
the training thread does no I/O there: it changes the record in memory, under a lock held for nothing
else, and wakes the publisher, one daemon thread that writes the rank file and looks at the flag. A
stalled publisher holds up only itself; the changes made meanwhile are written together once it is back.
"""

import collections
import contextlib
import copy
import dataclasses
import os
import threading
import time
import weakref

from . import notices, shm
from .checkpoint import CheckpointRequests
from .notices import describe
from .telemetry import STAT_KEYS, TelemetryWriter


@dataclasses.dataclass
class StepSample:
    """What the hook measured for one (micro-)step. Times in seconds."""
    data_wait_s: float
    step_s: float
    compute_s: float
    h2d_s: float = 0.0
    samples: int = 0
    tokens: int = 0
    longest: int = 0
    queue_depth: int = -1
    optimizer_step: bool = True
    stats: dict = dataclasses.field(default_factory=dict)  # flat memory_stats keys
    largest_free_block: int = None
    end_unix_ns: int = 0


@dataclasses.dataclass
class RankIdentity:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    gpu: int = -1
    gpu_uuid: str = ""
    job: str = ""
    pid: int = dataclasses.field(default_factory=os.getpid)

    @classmethod
    def from_env(cls, **overrides):
        identity = cls(rank=_env_int("RANK", 0), local_rank=_env_int("LOCAL_RANK", 0),
                       world_size=_env_int("WORLD_SIZE", 1), job=os.environ.get("FRAGSCOPE_JOB", ""))
        return dataclasses.replace(identity, **overrides)


def _env_int(name: str, default: int) -> int:
    """The launcher's variable `name`; a malformed one (RANK= ) is the default and a notice, not a failed job."""
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        notices.warn("env:" + name, f"{name}={value!r} is not an integer: {default} used")
        return default


CLOSE_WAIT_S = 1.0  # what close() waits for the publisher; one stuck in a stalled file system never returns
# The publisher writes a change at most this long after the cycle before: the agent reads every 0.5 s, and each
# wake-up of the publisher takes the GIL from the training thread for a moment, however short the steps
# (bench/hook/publisher_ab.py and docs/PERFORMANCE.md: a wake-up every step cost 30 ms steps about 0.5 ms).
MIN_CYCLE_S = 0.1


class StepRecorder:
    """Window statistics, cumulative totals, JSONL and rank-file publishing for one rank.

    rank_dir=None disables the rank file, telemetry_path=None the JSONL. The publisher thread writes
    the rank file after a change (the changes of MIN_CYCLE_S together) and every heartbeat_s (<= 0: after
    changes only), so that long evals and checkpoints do not look dead, and looks at the checkpoint flag
    each time.
    """

    def __init__(self, identity: RankIdentity, *, rank_dir=None, telemetry_path=None, window=20,
                 heartbeat_s=5.0, device_total_bytes=0, checkpoint_signal=None):
        self.identity = identity
        self.phase = "train"
        self.steps = 0
        self.hook_s_total = 0.0
        self._window = collections.deque(maxlen=window)
        self._step_s_total = 0.0
        self._data_wait_s_total = 0.0
        self._start = time.perf_counter()
        self._record = shm.RankRecord(
            pid=identity.pid, rank=identity.rank, local_rank=identity.local_rank,
            world_size=identity.world_size, gpu=identity.gpu, gpu_uuid=identity.gpu_uuid,
            job=identity.job, device_total_bytes=device_total_bytes, update_unix_ns=time.time_ns())
        self._new_locks()
        self._cycles_asked = self._cycles_done = 0  # publisher cycles asked for; the count the last one answered
        self._flush_waiting = False  # flush() waits: the next cycle does not wait out MIN_CYCLE_S
        self._publisher_idle = False  # waiting for a change: the only wait a change wakes it from
        self._last_cycle = float("-inf")
        self._stopping = False
        self._publishing = False  # while the publisher thread serves: flush() waits for it
        self._publisher = self._telemetry = self._writer = self.checkpoints = None
        _recorders.add(self)
        try:  # a failure part-way (a signal outside the main thread) leaves no open file, no rank file
            self._telemetry = TelemetryWriter(telemetry_path) if telemetry_path else None
            self._writer = self._open_rank_file(rank_dir) if rank_dir else None
            if self._writer:
                self.checkpoints = CheckpointRequests(self._writer.folder, self._writer.checkpoint_name,
                                                      checkpoint_signal, wake=self._wake_publisher)
                self._publisher = threading.Thread(target=self._publish, args=(heartbeat_s,), daemon=True,
                                                   name="fragscope-publisher")
                self._publishing = True
                self._publisher.start()
            else:
                self.checkpoints = CheckpointRequests(signal_number=checkpoint_signal)
        except BaseException:
            self.close()
            raise

    def _new_locks(self):
        # The lock guards the record and the cycle counts, and is held for nothing else (no I/O, no wait).
        self._lock = threading.Lock()
        self._cycle = threading.Condition(self._lock)  # a cycle asked for, a cycle done, a stop

    # Nothing the hook writes may raise into the training loop: a failure turns that output off.
    def _open_rank_file(self, rank_dir):
        try:
            return shm.RankFileWriter(rank_dir, self._record)
        except Exception as error:
            notices.warn("rank-dir:" + rank_dir, f"rank file disabled: {describe(error)}")
            return None

    def _publish(self, heartbeat_s):
        """The publisher thread: one cycle (write the record, look at the checkpoint flag) each time one is
        asked for and every heartbeat_s; at close(), or when the rank file fails, it withdraws the file."""
        try:
            while self._publish_cycle(heartbeat_s if heartbeat_s > 0 else None):
                pass
        finally:
            self._withdraw_rank_file()
            with self._cycle:
                self._publishing = False
                self._cycle.notify_all()

    def _publish_cycle(self, heartbeat_s) -> bool:
        """One cycle; False when the publisher is to stop."""
        with self._cycle:
            while not self._stopping and not self._flush_waiting:  # changes coalesce for MIN_CYCLE_S
                left = self._last_cycle + MIN_CYCLE_S - time.monotonic()
                if left <= 0:
                    break
                self._cycle.wait(left)
            if self._cycles_done == self._cycles_asked and not self._stopping and not self._flush_waiting:
                self._publisher_idle = True
                self._cycle.wait(heartbeat_s)
                self._publisher_idle = False
            if self._stopping:
                return False
            self._flush_waiting = False
            self._last_cycle = time.monotonic()
            asked = self._cycles_asked
            self._record.update_unix_ns = time.time_ns()
            record = copy.copy(self._record)  # written outside the lock: a stalled write holds up no change
        try:
            self._writer.publish(record)
        except Exception as error:
            notices.warn("publish:" + self._writer.path, f"rank file disabled: {describe(error)}")
            return False
        self.checkpoints.look_at_flag()
        with self._cycle:
            self._cycles_done = asked
            self._cycle.notify_all()
        return True

    def _wake_publisher(self):
        # Only an idle publisher is woken: one waiting out MIN_CYCLE_S sees the change when it ends, and each
        # needless wake-up takes the GIL from the training thread (bench/hook/publisher_ab.py).
        with self._cycle:
            self._cycles_asked += 1
            if self._publisher_idle:
                self._cycle.notify_all()

    @contextlib.contextmanager
    def _changing(self):
        """Yields the record to change in memory, then has the publisher write it."""
        with self._lock:
            yield self._record
        self._wake_publisher()

    def flush(self, timeout: float) -> bool:
        """Waits until the publisher finished a cycle begun after this call: the record as it is now is
        written and the checkpoint flag looked at. True at once without a publisher; False when `timeout`
        seconds passed first (a stalled rank folder)."""
        deadline = time.monotonic() + timeout
        with self._cycle:
            self._cycles_asked += 1
            self._flush_waiting = True
            asked = self._cycles_asked
            self._cycle.notify_all()
            while self._publishing and self._cycles_done < asked:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cycle.wait(left)
        return True

    def _withdraw_rank_file(self):
        """Removes the rank file and stops watching its checkpoint flag. Call from the publisher thread, or
        where there is none: the folder's I/O is that thread's alone."""
        if self._writer is None:
            return
        if self.checkpoints:
            self.checkpoints.stop_watching_flag()
        try:
            self._writer.close()
        except Exception:
            pass  # already disabled; nothing more to report
        self._writer = None

    def set_phase(self, phase: str) -> None:
        if phase not in shm.PHASES:
            raise ValueError(f"phase must be one of {sorted(shm.PHASES)}, not {phase!r}")
        self.phase = phase
        with self._changing() as r:
            r.phase = phase

    def acknowledge_checkpoint(self) -> None:
        ack = self.checkpoints.acknowledge()
        with self._changing() as r:
            r.checkpoint_ack = ack

    def record(self, sample: StepSample) -> dict:
        """Adds one step; queues its telemetry line and has the rank file published. Returns the line."""
        self._window.append(sample)
        self._step_s_total += sample.step_s
        self._data_wait_s_total += sample.data_wait_s
        window_step_s = sum(s.step_s for s in self._window)
        window_wait_s = sum(s.data_wait_s for s in self._window)
        window_samples = sum(s.samples for s in self._window)
        window_tokens = sum(s.tokens for s in self._window)
        wait_ratio = window_wait_s / window_step_s if window_step_s > 0 else 0.0
        samples_per_s = window_samples / window_step_s if window_step_s > 0 else 0.0
        tokens_per_s = window_tokens / window_step_s if window_step_s > 0 else 0.0
        stats = sample.stats
        line = {"step": self.steps, "seq_len": sample.longest, "mbs": sample.samples,
                "optimizer_step": sample.optimizer_step, "data_wait_ms": sample.data_wait_s * 1e3,
                "compute_ms": sample.compute_s * 1e3, "t": time.perf_counter() - self._start}
        line.update({key: int(stats.get(key, 0)) for key in STAT_KEYS})
        line.update({"phase": self.phase, "rank": self.identity.rank, "local_rank": self.identity.local_rank,
                     "tokens": sample.tokens, "max_seq_len": sample.longest, "h2d_ms": sample.h2d_s * 1e3,
                     "queue_depth": sample.queue_depth, "samples_per_s": samples_per_s,
                     "tokens_per_s": tokens_per_s, "step_time_ms": sample.step_s * 1e3,
                     "device_total_bytes": self._record.device_total_bytes,
                     "hook_ms": self.hook_s_total * 1e3})
        self.steps += 1
        if self._telemetry:
            self._telemetry.write(line)
        with self._changing() as r:
            r.step = self.steps
            r.step_unix_ns = sample.end_unix_ns or time.time_ns()
            self._set_memory(stats)
            if sample.largest_free_block is not None:
                r.largest_free_known = True
                r.largest_free_block_bytes = int(sample.largest_free_block)
            r.batch_samples, r.batch_tokens = sample.samples, sample.tokens
            r.batch_longest_sequence, r.loader_queue_depth = sample.longest, sample.queue_depth
            r.step_seconds, r.data_wait_seconds = sample.step_s, sample.data_wait_s
            r.h2d_seconds, r.compute_seconds = sample.h2d_s, sample.compute_s
            r.data_wait_ratio, r.samples_per_second = wait_ratio, samples_per_s
            r.step_seconds_total, r.data_wait_seconds_total = self._step_s_total, self._data_wait_s_total
            r.hook_seconds_total = self.hook_s_total
        return line

    def update_memory(self, stats: dict) -> None:
        """Publishes memory_stats taken between steps (at an OOM) without counting a step."""
        with self._changing():
            self._set_memory(stats)

    def _set_memory(self, stats):
        r = self._record
        r.allocated_bytes = int(stats.get("allocated_bytes.all.current", 0))
        r.reserved_bytes = int(stats.get("reserved_bytes.all.current", 0))
        r.active_bytes = int(stats.get("active_bytes.all.current", 0))
        r.inactive_split_bytes = int(stats.get("inactive_split_bytes.all.current", 0))
        r.requested_bytes = int(stats.get("requested_bytes.all.current", 0))
        r.allocated_peak_bytes = int(stats.get("allocated_bytes.all.peak", 0))
        r.reserved_peak_bytes = int(stats.get("reserved_bytes.all.peak", 0))
        r.alloc_retries = int(stats.get("num_alloc_retries", 0))
        r.ooms = int(stats.get("num_ooms", 0))
        r.segments = int(stats.get("segment.all.current", 0))

    def close(self) -> None:
        """Never raises; also undoes a constructor that failed part-way. Waits at most CLOSE_WAIT_S for the
        publisher to withdraw the rank file; one stuck in a stalled folder does so if that comes back."""
        with self._cycle:
            self._stopping = True
            self._cycle.notify_all()
        publisher, writer = self._publisher, self._writer
        if publisher is not None and publisher.is_alive():
            publisher.join(CLOSE_WAIT_S)
            if publisher.is_alive() and writer is not None:
                notices.warn("close:" + writer.path, f"rank file not removed yet: {writer.path}: the rank folder "
                                                     f"did not answer in {CLOSE_WAIT_S:g} s")
        else:  # none started, it ended, or this is a forked child: the folder is this thread's
            self._withdraw_rank_file()
        if self.checkpoints:
            self.checkpoints.close()
        if self._telemetry:
            self._telemetry.close()
            self._telemetry = None


_recorders = weakref.WeakSet()  # the process's recorders, for _forget_publishers_in_child()


def _forget_publishers_in_child():
    """A child made by os.fork() (a DataLoader worker) has no publisher thread, only copies of the recorders.
    Their lock may have been held by a parent's publisher at the fork: each gets a fresh one. The rank file
    is the parent's: the child publishes nothing, and its close() leaves the file to the parent."""
    for recorder in list(_recorders):
        recorder._new_locks()
        recorder._publishing = False


os.register_at_fork(after_in_child=_forget_publishers_in_child)
