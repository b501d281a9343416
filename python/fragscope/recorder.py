"""Turns one step's measurements into a telemetry line and the rank file's record.

Torch-free: fragscope.torch.Monitor measures, StepRecorder keeps the window, the totals, the
JSONL file, the rank file and its heartbeat. Tested on its own in tests/python.
"""

import collections
import dataclasses
import os
import threading
import time

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
        env = os.environ
        identity = cls(rank=int(env.get("RANK", 0)), local_rank=int(env.get("LOCAL_RANK", 0)),
                       world_size=int(env.get("WORLD_SIZE", 1)), job=env.get("FRAGSCOPE_JOB", ""))
        return dataclasses.replace(identity, **overrides)


class StepRecorder:
    """Window statistics, cumulative totals, JSONL and rank-file publishing for one rank.

    rank_dir=None disables the rank file, telemetry_path=None the JSONL. A heartbeat thread
    refreshes the rank file every heartbeat_s so long evals and checkpoints do not look dead.
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
        self._lock = threading.Lock()
        self._record = shm.RankRecord(
            pid=identity.pid, rank=identity.rank, local_rank=identity.local_rank,
            world_size=identity.world_size, gpu=identity.gpu, gpu_uuid=identity.gpu_uuid,
            job=identity.job, device_total_bytes=device_total_bytes, update_unix_ns=time.time_ns())
        self._stop = threading.Event()
        self._heartbeat = self._telemetry = self._writer = self.checkpoints = None
        try:  # a failure part-way (a signal outside the main thread) leaves no open file, no rank file
            self._telemetry = TelemetryWriter(telemetry_path) if telemetry_path else None
            self._writer = self._open_rank_file(rank_dir) if rank_dir else None
            if self._writer:
                self.checkpoints = CheckpointRequests(self._writer.folder, self._writer.checkpoint_name,
                                                      checkpoint_signal)
            else:
                self.checkpoints = CheckpointRequests(signal_number=checkpoint_signal)
            if self._writer and heartbeat_s > 0:
                heartbeat = threading.Thread(target=self._beat, args=(heartbeat_s,), daemon=True,
                                             name="fragscope-heartbeat")
                heartbeat.start()
                self._heartbeat = heartbeat
        except BaseException:
            self.close()
            raise

    def _beat(self, interval):
        while not self._stop.wait(interval):
            self._publish()

    # Nothing the hook writes may raise into the training loop: a failure turns that output off.
    def _open_rank_file(self, rank_dir):
        try:
            return shm.RankFileWriter(rank_dir, self._record)
        except Exception as error:
            notices.warn("rank-dir:" + rank_dir, f"rank file disabled: {describe(error)}")
            return None

    def _publish(self):
        with self._lock:
            if self._writer is None:
                return
            self._record.update_unix_ns = time.time_ns()
            try:
                self._writer.publish(self._record)
            except Exception as error:
                notices.warn("publish:" + self._writer.path, f"rank file disabled: {describe(error)}")
                self._withdraw_rank_file()

    def _withdraw_rank_file(self):
        """Removes the rank file and stops watching its checkpoint flag. Call with the lock held."""
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
        with self._lock:
            self._record.phase = phase
        self._publish()

    def acknowledge_checkpoint(self) -> None:
        ack = self.checkpoints.acknowledge()
        with self._lock:
            self._record.checkpoint_ack = ack
        self._publish()

    def record(self, sample: StepSample) -> dict:
        """Adds one step; writes its telemetry line and publishes the rank file. Returns the line."""
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
        with self._lock:
            r = self._record
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
        self._publish()
        return line

    def update_memory(self, stats: dict) -> None:
        """Publishes memory_stats taken between steps (at an OOM) without counting a step."""
        with self._lock:
            self._set_memory(stats)
        self._publish()

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
        """Never raises; also undoes a constructor that failed part-way."""
        self._stop.set()
        if self._heartbeat:
            self._heartbeat.join()
        with self._lock:
            if self._writer:
                self._withdraw_rank_file()
        if self.checkpoints:
            self.checkpoints.close()
        if self._telemetry:
            self._telemetry.close()
            self._telemetry = None
