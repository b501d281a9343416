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

import collections.abc
import contextlib
import os
import time

import torch

from . import notices
from .cuda import batch_shape, device_index, largest_free_block, memory_stats, rank_identity, ready_batches
from .notices import describe
from .oom import OomDump
from .recorder import StepRecorder, StepSample
from .shm import DEFAULT_DIR
from .watch import attach_oom, snapshots_available, start_history

COPIES_KEPT = 64  # copies between two steps whose CUDA events wait for the next step; older ones are read early


class _NotRebuilt(Exception):
    """A container of the batch could not be made again with its tensors moved."""


class _PendingStep:
    """One step whose CUDA events may still be in flight; copies_s: its copies read early."""

    def __init__(self, sample, start, end, copies, copies_s):
        self.sample, self.start, self.end, self.copies, self.copies_s = sample, start, end, copies, copies_s


class Monitor:
    """Per-rank step telemetry, rank-file publishing and OOM dumps around a training loop.

    out_dir: telemetry root (None: no files). rank_dir: the agent's directory (default
    $FRAGSCOPE_RANK_DIR or /dev/shm/fragscope; False: no rank file). history_max_entries:
    keep torch.cuda.memory history on with this ring size (snapshot on OOM). largest_free_every:
    sample the largest free block every N steps (0: never; skipped while history is on, where a
    snapshot would include the trace). checkpoint_signal: e.g. signal.SIGUSR1 also requests a
    checkpoint (the signal's previous handler still runs, and is back after close()). max_dumps:
    OOM snapshots in any 10 minutes (every OOM still rewrites meta.json, stats.json and
    summary.txt). Not thread-safe: use it from the training loop's thread. A failure of the hook's
    own bookkeeping never leaves its methods: it is one notice on the `fragscope` logger and turns
    the affected output off (or costs that step's record).
    """

    def __init__(self, out_dir=None, *, job=None, rank_dir=None, device=None, window=20,
                 history_max_entries=None, largest_free_every=100, checkpoint_signal=None,
                 heartbeat_s=5.0, max_dumps=5):
        self.device = device_index(device)
        identity = rank_identity(self.device, job)
        device_total_bytes = torch.cuda.mem_get_info(self.device)[1]
        if rank_dir is None:
            rank_dir = os.environ.get("FRAGSCOPE_RANK_DIR", DEFAULT_DIR)
        self.rank_out = os.path.join(out_dir, f"rank{identity.rank}") if out_dir else None
        self._wait_s = None  # loader wait of the batch the next step uses
        self._queue_depth = -1
        self._shape = (0, 0, 0)
        self._copies = []  # (start, end) events of the copies since the last step
        self._copies_s = 0.0  # and the seconds of those already read
        self._last_end = None
        self._pending = None
        self._closed = False
        self._recorder = self._oom = None
        try:  # what started is undone when a later part fails
            self._recorder = StepRecorder(
                identity, rank_dir=rank_dir or None,
                telemetry_path=os.path.join(self.rank_out, "steps.jsonl") if self.rank_out else None,
                window=window, heartbeat_s=heartbeat_s, device_total_bytes=device_total_bytes,
                checkpoint_signal=checkpoint_signal)
            snapshots = snapshots_available()
            wants_history = history_max_entries is not None
            self._history = snapshots and wants_history and start_history(history_max_entries, "python")
            self._largest_free_every = largest_free_every if snapshots and not self._history else 0
            if self.rank_out:
                self._oom = attach_oom(OomDump(
                    self.rank_out, device=self.device, history=self._history, max_dumps=max_dumps, snapshots=snapshots,
                    state=lambda: (self._recorder.steps, self._recorder.phase, self._recorder.identity.rank)))
        except BaseException:
            self.close()
            raise

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
            self._shape = self._batch_shape(batch)
            self._add_hook_time(t1)
            yield batch

    def to_device(self, batch, non_blocking=True):
        """Moves a tensor, or the tensors of a mapping/list/tuple, to the monitored device. A container the
        hook cannot rebuild with the moved tensors comes back as it was (one notice): the program moves it."""
        t0 = time.perf_counter()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        try:
            moved = self._move(batch, non_blocking)
        except _NotRebuilt as problem:
            notices.warn("to-device", f"batch not moved: {problem}")
            moved = batch
        end.record()
        self._copies.append((start, end))
        if len(self._copies) > COPIES_KEPT:
            self._read_early_copies()
        self._add_hook_time(t0)
        return moved

    def _read_early_copies(self):
        """Copies without steps (an eval loop that never calls step()) would hold their events until the
        next step: the older half is read now; one still in flight there is not counted."""
        early, self._copies = self._copies[:COPIES_KEPT // 2], self._copies[COPIES_KEPT // 2:]
        self._copies_s += sum(s.elapsed_time(e) for s, e in early if e.query()) / 1e3

    def _move(self, batch, non_blocking):
        """A failed copy (an OOM) is raised, as the program's own copy raises it; a container of a type the hook
        cannot rebuild raises _NotRebuilt."""
        if isinstance(batch, torch.Tensor):
            return batch.to(self.device, non_blocking=non_blocking)
        if isinstance(batch, collections.abc.Mapping):
            if callable(getattr(batch, "to", None)):  # transformers' BatchEncoding: keeps the tokenizer's encodings
                return self._rebuilt(lambda: batch.to(self.device))
            moved = {k: self._move(v, non_blocking) for k, v in batch.items()}
            if type(batch) is dict:
                return moved
            try:
                return type(batch)(moved)
            except Exception as error:  # its constructor takes no dict; the model takes a dict's keywords as well
                notices.warn("to-device-dict", f"batch moved as a dict: {type(batch).__name__}: {describe(error)}")
                return moved
        if isinstance(batch, (list, tuple)):
            moved = [self._move(v, non_blocking) for v in batch]
            if hasattr(batch, "_fields"):  # a namedtuple, which torch's default collate keeps
                return self._rebuilt(lambda: type(batch)(*moved))
            return self._rebuilt(lambda: type(batch)(moved))
        return batch

    @staticmethod
    def _rebuilt(make):
        """make(): its failure is the container type's (_NotRebuilt), but for an OOM, the copy's."""
        try:
            return make()
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as error:
            raise _NotRebuilt(describe(error)) from error

    @contextlib.contextmanager
    def step(self, batch=None, *, samples=None, tokens=None, longest=None, optimizer_step=True):
        """Wraps one (micro-)step. Shape numbers default to what loader() saw in the batch."""
        t0 = time.perf_counter()
        if batch is not None and self._wait_s is None:
            self._shape = self._batch_shape(batch)
        if self._wait_s is not None:
            wait_s = self._wait_s
        else:  # no loader(): the time between steps is the wait
            wait_s = t0 - self._last_end if self._last_end is not None else 0.0
        start = self._quietly(self._record_event)
        self._add_hook_time(t0)
        try:
            yield self
        except BaseException as error:
            self._between_steps(time.perf_counter())  # the step is void
            if self._oom:
                self._oom.on_error(error)
            raise
        t1 = time.perf_counter()
        end = self._quietly(self._record_event) if start is not None else None
        shape = self._shape
        step_s = (t1 - self._last_end) if self._last_end is not None else (t1 - t0 + wait_s)
        sample = StepSample(
            data_wait_s=wait_s, step_s=step_s, compute_s=0.0,
            samples=samples if samples is not None else shape[0],
            tokens=tokens if tokens is not None else shape[1],
            longest=longest if longest is not None else shape[2],
            queue_depth=self._queue_depth, optimizer_step=optimizer_step)
        copies, copies_s = self._copies, self._copies_s
        self._between_steps(t1)
        if end is not None:
            self._quietly(self._end_step, _PendingStep(sample, start, end, copies, copies_s))
        self._add_hook_time(t1)

    def _between_steps(self, now):
        self._copies, self._copies_s, self._wait_s, self._last_end = [], 0.0, None, now

    @staticmethod
    def _record_event():
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _end_step(self, step):
        """Reads the step's memory; records the previous step, whose events are done by now."""
        step.sample.stats, step.sample.end_unix_ns = memory_stats(self.device), time.time_ns()
        if self._largest_free_every and self._recorder.steps % self._largest_free_every == 0:
            step.sample.largest_free_block = self._largest_free_block()
        pending, self._pending = self._pending, step
        if pending is not None:
            self._finish(pending)
        self._recorder.checkpoints.poll()

    def _finish(self, pending):
        """Reads a step's CUDA events (normally long complete) and records it."""
        pending.end.synchronize()
        pending.sample.compute_s = pending.start.elapsed_time(pending.end) / 1e3
        pending.sample.h2d_s = pending.copies_s + sum(s.elapsed_time(e) for s, e in pending.copies) / 1e3
        self._recorder.record(pending.sample)

    def _largest_free_block(self):
        try:
            return largest_free_block(self.device)
        except Exception as error:  # an allocator without snapshots: asking again would fail again
            self._largest_free_every = 0
            notices.warn("largest-free", f"largest free block not sampled: {describe(error)}")
            return None

    @staticmethod
    def _batch_shape(batch):
        try:
            return batch_shape(batch)
        except Exception as error:  # an exotic batch: its shape stays unknown
            notices.warn("batch", f"batch shape not read: {describe(error)}")
            return 0, 0, 0

    @staticmethod
    def _quietly(work, *args):
        """The hook's own bookkeeping: a failure costs this step's record and one notice, never the step."""
        try:
            return work(*args)
        except Exception as error:
            notices.warn("step", f"step not recorded: {describe(error)}")
            return None

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
        """Records the last step and withdraws the rank file; never raises."""
        if self._closed:
            return
        self._closed = True
        if self._pending is not None:
            self._quietly(self._finish, self._pending)
            self._pending = None
        if self._oom:
            self._oom.stop()
        if self._recorder:
            self._recorder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
