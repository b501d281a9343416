"""StepWatch: the hook for loops it does not own (HF Trainer, Lightning, `fragscope.run`).

The framework (or an optimizer hook) says when a step begins and ends; the DataLoader reports
each batch's wait and shape (loader_wait.py); memory_stats is read at each step end. Per step
it writes `<out>/rank<R>/steps.jsonl` and publishes the rank file; on an OOM it dumps into the
same folder (oom.py). Times are wall-clock: `compute_ms` is the step's time minus its wait (the
Monitor, which owns its loop, measures GPU time with CUDA events instead).

Nothing here raises into the training loop: a failure turns the affected output off with one
warning on the `fragscope` logger. The exception is any_rank(), a collective, whose failure must
reach the framework on every rank alike.
"""

import contextlib
import os
import time

import torch

from . import cuda, loader_wait, notices
from .notices import describe
from .oom import OomDump
from .recorder import RankIdentity, StepRecorder, StepSample
from .shm import DEFAULT_DIR
from .step_clock import StepClock


def snapshots_available() -> bool:
    """Whether the CUDA allocator keeps memory history, calls an OOM observer and takes snapshots. The
    cudaMallocAsync backend (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) raises on all three: one
    notice says what the hook leaves off."""
    get_backend = getattr(torch.cuda, "get_allocator_backend", None)  # PyTorch >= 2.0, which added the backend
    backend = get_backend() if get_backend else "native"
    if backend == "native":
        return True
    notices.warn("backend", f"memory history, OOM snapshots and the largest free block are off: the {backend} "
                            "allocator backend keeps no history or snapshot and calls no OOM observer (an OOM "
                            "still writes stats.json, summary.txt and meta.json)")
    return False


def start_history(max_entries: int, stacks: str) -> bool:
    """Memory history on; False, with a notice, when this torch or its allocator refuses."""
    try:
        cuda.enable_history(max_entries, stacks)
        return True
    except Exception as error:
        notices.warn("history", f"memory history not recorded: {describe(error)}")
        return False


def attach_oom(dump: OomDump):
    """The dump, attached to the allocator; None, with a notice, when the allocator refuses the observer."""
    try:
        dump.attach()
        return dump
    except Exception as error:
        dump.stop()
        notices.warn("oom-observer", f"OOM dumps off: {describe(error)}")
        return None


def any_rank(flag: bool, device) -> bool:
    """`flag` or'ed over all ranks once torch.distributed is initialised (an all_reduce MAX on `device`,
    this rank's CUDA device, under NCCL). A collective: every rank calls it at the same step, and what
    it does depends on the process group alone, never on this rank's state (a hook that failed to start
    here), so no rank takes another path and leaves the others blocked."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return flag
    total = torch.tensor([int(flag)], device=device if "nccl" in str(dist.get_backend()) else "cpu")
    dist.all_reduce(total, op=dist.ReduceOp.MAX)
    return bool(total.item())


class StepWatch:
    """out_dir: where rank<R>/ goes (None: no files). rank_dir: the agent's folder (default
    $FRAGSCOPE_RANK_DIR or /dev/shm/fragscope; False: none). history_max_entries: memory history
    ring (None: off). device: CUDA device (default: the current one at the first step or OOM).
    `history` says whether this watch turned memory history on. Not thread-safe: call it from the
    training thread."""

    def __init__(self, out_dir=None, *, job=None, rank_dir=None, device=None, history_max_entries=None,
                 stacks="python", window=20, heartbeat_s=5.0, max_dumps=5):
        if rank_dir is None:
            rank_dir = os.environ.get("FRAGSCOPE_RANK_DIR", DEFAULT_DIR)
        self._settings = dict(out_dir=out_dir, job=job, rank_dir=rank_dir or None, window=window,
                              heartbeat_s=heartbeat_s)
        self._device = device
        self.clock = StepClock()
        self.recorder = None
        self.oom = None
        self._shape = [0, 0, 0]
        self._queue_depth = -1
        self._closed = self._failed = False
        self.device = None
        self.rank = RankIdentity.from_env().rank
        self.rank_out = os.path.join(out_dir, f"rank{self.rank}") if out_dir else None
        snapshots = snapshots_available()
        wants_history = history_max_entries is not None and history_max_entries > 0
        self.history = snapshots and wants_history and start_history(history_max_entries, stacks)
        if self.rank_out:  # attached now: an OOM may come before the first step ends
            self.oom = attach_oom(OomDump(self.rank_out, device=device, state=self._oom_state, history=self.history,
                                          max_dumps=max_dumps, after_dump=self._after_oom_dump, snapshots=snapshots))
        self._start_quietly()
        # Last, so that no failure above leaves a listener behind (without one, waits come from step_begin()).
        loader_wait.listen(self.on_batch)

    # -- lifetime ---------------------------------------------------------------------------
    def _ensure_started(self) -> bool:
        """Creates the recorder (the rank file, steps.jsonl) once CUDA can name the device."""
        if self.recorder is not None or self._closed or self._failed:
            return self.recorder is not None
        if not torch.cuda.is_initialized() and self._device is None:
            return False
        device = cuda.device_index(self._device)
        identity = cuda.rank_identity(device, self._settings["job"])
        self.recorder = StepRecorder(
            identity, rank_dir=self._settings["rank_dir"],
            telemetry_path=os.path.join(self.rank_out, "steps.jsonl") if self.rank_out else None,
            window=self._settings["window"], heartbeat_s=self._settings["heartbeat_s"],
            device_total_bytes=torch.cuda.mem_get_info(device)[1])
        self.device = device
        if self.oom:
            self.oom.device = device
        return True

    def _start_quietly(self) -> bool:
        try:
            return self._ensure_started()
        except Exception as error:
            notices.warn("start", f"hook not started: {describe(error)}")
            self._failed = True
            return False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loader_wait.stop_listening(self.on_batch)
        if self.oom:
            self.oom.stop()
        if self.recorder:
            self.recorder.close()

    # -- events -----------------------------------------------------------------------------
    def on_batch(self, wait_s, batch, ready) -> None:
        """The DataLoader handed out `batch` after `wait_s` (called by loader_wait)."""
        try:
            self.clock.add_wait(wait_s)
            samples, tokens, longest = cuda.batch_shape(batch)
            self._shape = [self._shape[0] + samples, self._shape[1] + tokens, max(self._shape[2], longest)]
            self._queue_depth = ready
        except Exception as error:  # an exotic batch: its shape stays unknown
            notices.warn("batch", f"batch shape not read: {describe(error)}")

    def step_begin(self) -> None:
        self.clock.begin()

    def step_end(self, *, optimizer_step=True, samples=None, tokens=None, longest=None) -> None:
        """Ends a step: reads memory_stats, writes the telemetry line, publishes the rank file."""
        hook_start = time.perf_counter()
        wait_s, step_s = self.clock.end()
        shape, self._shape = self._shape, [0, 0, 0]
        if not self._start_quietly():
            return
        try:
            sample = StepSample(
                data_wait_s=wait_s, step_s=step_s, compute_s=step_s - wait_s,
                samples=samples if samples is not None else shape[0],
                tokens=tokens if tokens is not None else shape[1],
                longest=longest if longest is not None else shape[2],
                queue_depth=self._queue_depth, optimizer_step=optimizer_step,
                stats=cuda.memory_stats(self.device), end_unix_ns=time.time_ns())
            self.recorder.record(sample)
            self.recorder.hook_s_total += time.perf_counter() - hook_start
        except Exception as error:
            notices.warn("step", f"step not recorded: {describe(error)}")

    def restart_clock(self) -> None:
        """Time until now (evaluation, a checkpoint save) belongs to no step."""
        self.clock.restart()

    @contextlib.contextmanager
    def phase(self, name):
        self.set_phase(name)
        try:
            yield self
        finally:
            self.set_phase("train")
            self.clock.restart()

    def set_phase(self, name) -> None:
        if self.recorder is not None and self.recorder.phase != name:
            self.recorder.set_phase(name)

    def on_error(self, error) -> None:
        """An exception left the training loop: an OOM gets its message into the dump."""
        self._start_quietly()
        if self.oom:
            self.oom.on_error(error)

    def _oom_state(self):
        if self.recorder is None:
            return 0, "train", self.rank
        return self.recorder.steps, self.recorder.phase, self.recorder.identity.rank

    def _after_oom_dump(self, device):
        """The rank file shows the OOM at once (it may come before the first step ends)."""
        if self._device is None and self.recorder is None:
            self._device = device
        if self._start_quietly():
            self.recorder.update_memory(cuda.memory_stats(self.device))

    # -- checkpoint requests ----------------------------------------------------------------
    def checkpoint_requested(self) -> bool:
        """Whether the node agent (or a signal) asked this rank for a checkpoint; never raises. Ranks
        agree with any_rank(), which every rank calls, with a watch or without."""
        return bool(self.recorder and self.recorder.checkpoints.poll())

    def acknowledge_checkpoint(self) -> None:
        if self.recorder is not None:
            self.recorder.acknowledge_checkpoint()
