"""fragscope.torch.Monitor: a few lines around a training loop.

    from fragscope.torch import Monitor

    with Monitor("telemetry/") as mon:
        for batch in mon.loader(train_loader):        # times the wait for each batch
            with mon.step(batch):                      # times the step, reads memory_stats
                ids = mon.to_device(batch)             # host-to-device copy, timed with CUDA events
                loss = model(ids).loss; loss.backward(); opt.step(); opt.zero_grad()
            if mon.checkpoint_requested:               # the node agent asked (or a signal)
                with mon.phase("checkpoint"):
                    save(model, opt)                   # leaving the phase acknowledges it
            if step % 500 == 0:
                with mon.phase("eval"):
                    evaluate(model)

Per step it writes `<out>/rank<R>/steps.jsonl` (the fixtures' schema plus the hook's fields)
and publishes the latest record to the node agent's rank file. On an OOM it writes
`meta.json` (the OOM message), `stats.json`, `summary.txt` and, when memory history is on,
`snapshot_at_oom.pickle` into the same folder, where `fragscope` reads them.

GPU times come from CUDA events read one step late, so the hook never synchronises the
device; the last step is completed by close().
"""

import contextlib
import os
import time

import torch

from .cuda import (batch_shape, device_index, enable_history, largest_free_block, memory_stats, rank_identity,
                   ready_batches)
from .oom import OomDump
from .recorder import StepRecorder, StepSample
from .shm import DEFAULT_DIR


class _PendingStep:
    """One step whose CUDA events may still be in flight."""

    def __init__(self, sample, start, end, h2d):
        self.sample, self.start, self.end, self.h2d = sample, start, end, h2d


class Monitor:
    """Per-rank step telemetry, rank-file publishing and OOM dumps around a training loop.

    out_dir: telemetry root (None: no files). rank_dir: the agent's directory (default
    $FRAGSCOPE_RANK_DIR or /dev/shm/fragscope; False: no rank file). history_max_entries:
    keep torch.cuda.memory history on with this ring size (snapshot on OOM). largest_free_every:
    sample the largest free block every N steps (0: never; skipped while history is on, where a
    snapshot would include the trace). checkpoint_signal: e.g. signal.SIGUSR1 also requests a
    checkpoint. max_dumps: OOMs dumped per process (later ones are not). Not thread-safe: use
    it from the training loop's thread.
    """

    def __init__(self, out_dir=None, *, job=None, rank_dir=None, device=None, window=20,
                 history_max_entries=None, largest_free_every=100, checkpoint_signal=None,
                 heartbeat_s=5.0, max_dumps=5):
        self.device = device_index(device)
        identity = rank_identity(self.device, job)
        if rank_dir is None:
            rank_dir = os.environ.get("FRAGSCOPE_RANK_DIR", DEFAULT_DIR)
        self.rank_out = os.path.join(out_dir, f"rank{identity.rank}") if out_dir else None
        self._recorder = StepRecorder(
            identity, rank_dir=rank_dir or None,
            telemetry_path=os.path.join(self.rank_out, "steps.jsonl") if self.rank_out else None,
            window=window, heartbeat_s=heartbeat_s,
            device_total_bytes=torch.cuda.mem_get_info(self.device)[1],
            checkpoint_signal=checkpoint_signal)
        self._history = history_max_entries is not None
        if self._history:
            enable_history(history_max_entries, stacks="python")
        self._largest_free_every = 0 if self._history else largest_free_every
        self._oom = None
        if self.rank_out:
            self._oom = OomDump(self.rank_out, device=self.device, history=self._history, max_dumps=max_dumps,
                                state=lambda: (self._recorder.steps, self._recorder.phase,
                                               self._recorder.identity.rank))
            self._oom.attach()
        self._wait_s = None  # loader wait of the batch the next step uses
        self._queue_depth = -1
        self._shape = (0, 0, 0)
        self._h2d = []
        self._last_end = None
        self._pending = None
        self._closed = False

    # -- the loop ---------------------------------------------------------------------------
    def loader(self, iterable):
        """Yields from `iterable`, timing each wait and noting the loader's ready batches."""
        iterator = iter(iterable)
        while True:
            depth = ready_batches(iterator)
            t0 = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            t1 = time.perf_counter()
            self._wait_s, self._queue_depth = t1 - t0, depth
            self._shape = batch_shape(batch)
            self._add_hook_time(t1)
            yield batch

    def to_device(self, batch, non_blocking=True):
        """Moves a tensor, or the tensors of a dict/list/tuple, to the monitored device."""
        t0 = time.perf_counter()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        moved = self._move(batch, non_blocking)
        end.record()
        self._h2d.append((start, end))
        self._add_hook_time(t0)
        return moved

    def _move(self, batch, non_blocking):
        if isinstance(batch, torch.Tensor):
            return batch.to(self.device, non_blocking=non_blocking)
        if isinstance(batch, dict):
            return {k: self._move(v, non_blocking) for k, v in batch.items()}
        if isinstance(batch, (list, tuple)):
            return type(batch)(self._move(v, non_blocking) for v in batch)
        return batch

    @contextlib.contextmanager
    def step(self, batch=None, *, samples=None, tokens=None, longest=None, optimizer_step=True):
        """Wraps one (micro-)step. Shape numbers default to what loader() saw in the batch."""
        t0 = time.perf_counter()
        if batch is not None and self._wait_s is None:
            self._shape = batch_shape(batch)
        if self._wait_s is not None:
            wait_s = self._wait_s
        else:  # no loader(): the time between steps is the wait
            wait_s = t0 - self._last_end if self._last_end is not None else 0.0
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        self._add_hook_time(t0)
        try:
            yield self
        except BaseException as error:
            self._h2d, self._wait_s, self._last_end = [], None, time.perf_counter()  # the step is void
            if self._oom:
                self._oom.on_error(error)
            raise
        t1 = time.perf_counter()
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        shape = self._shape
        step_s = (t1 - self._last_end) if self._last_end is not None else (t1 - t0 + wait_s)
        sample = StepSample(
            data_wait_s=wait_s, step_s=step_s, compute_s=0.0,
            samples=samples if samples is not None else shape[0],
            tokens=tokens if tokens is not None else shape[1],
            longest=longest if longest is not None else shape[2],
            queue_depth=self._queue_depth, optimizer_step=optimizer_step,
            stats=memory_stats(self.device), end_unix_ns=time.time_ns())
        if self._largest_free_every and self._recorder.steps % self._largest_free_every == 0:
            sample.largest_free_block = largest_free_block(self.device)
        pending, self._pending = self._pending, _PendingStep(sample, start, end, self._h2d)
        self._h2d, self._wait_s, self._last_end = [], None, t1
        if pending is not None:
            self._finish(pending)
        self._recorder.checkpoints.poll()
        self._add_hook_time(t1)

    def _finish(self, pending):
        """Reads a step's CUDA events (normally long complete) and records it."""
        pending.end.synchronize()
        pending.sample.compute_s = pending.start.elapsed_time(pending.end) / 1e3
        pending.sample.h2d_s = sum(s.elapsed_time(e) for s, e in pending.h2d) / 1e3
        self._recorder.record(pending.sample)

    @contextlib.contextmanager
    def phase(self, name):
        """Marks a phase ("eval", "checkpoint"); leaving "checkpoint" acknowledges requests.
        Time inside a phase is not counted as the next step's data wait."""
        previous = self._recorder.phase
        self._recorder.set_phase(name)
        try:
            yield self
        finally:
            if name == "checkpoint":
                self._recorder.acknowledge_checkpoint()
            self._recorder.set_phase(previous)
            self._restart_clock()

    @contextlib.contextmanager
    def pause(self):
        """Work between steps that is neither a step nor a wait for data (e.g. unmonitored steps
        or a profiler dump): its time is left out of the next step's wait and step time."""
        try:
            yield self
        finally:
            self._restart_clock()

    def _restart_clock(self):
        if self._last_end is not None:
            self._last_end = time.perf_counter()

    @property
    def checkpoint_requested(self) -> bool:
        return self._recorder.checkpoints.poll()

    # -- lifetime ---------------------------------------------------------------------------
    def _add_hook_time(self, since):
        self._recorder.hook_s_total += time.perf_counter() - since

    @property
    def steps(self) -> int:
        return self._recorder.steps

    def close(self):
        if self._closed:
            return
        self._closed = True
        if self._pending is not None:
            self._finish(self._pending)
            self._pending = None
        if self._oom:
            self._oom.stop()
        self._recorder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
