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
import json
import os
import time

import torch

from .recorder import RankIdentity, StepRecorder, StepSample
from .shm import DEFAULT_DIR

_NESTED_STATS = {  # flat memory_stats key -> path in memory_stats_as_nested_dict
    "allocated_bytes.all.current": ("allocated_bytes", "all", "current"),
    "reserved_bytes.all.current": ("reserved_bytes", "all", "current"),
    "active_bytes.all.current": ("active_bytes", "all", "current"),
    "inactive_split_bytes.all.current": ("inactive_split_bytes", "all", "current"),
    "requested_bytes.all.current": ("requested_bytes", "all", "current"),
    "segment.all.current": ("segment", "all", "current"),
    "allocated_bytes.all.peak": ("allocated_bytes", "all", "peak"),
    "reserved_bytes.all.peak": ("reserved_bytes", "all", "peak"),
    "num_alloc_retries": ("num_alloc_retries",),
    "num_ooms": ("num_ooms",),
}


def _memory_stats(device) -> dict:
    """The few memory_stats keys the doctor needs, without flattening the whole dict."""
    nested = torch.cuda.memory.memory_stats_as_nested_dict(device)
    out = {}
    for key, path in _NESTED_STATS.items():
        value = nested
        for part in path:
            value = value.get(part, 0) if isinstance(value, dict) else 0
        out[key] = int(value)
    return out


def _largest_free_block(device) -> int:
    segments = torch.cuda.memory_snapshot()
    return max((b["size"] for s in segments if s.get("device", 0) == device
                for b in s["blocks"] if b["state"] == "inactive"), default=0)


def _physical_index(logical: int) -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not visible:
        return logical
    ids = [v.strip() for v in visible.split(",")]
    if logical < len(ids) and ids[logical].isdigit():
        return int(ids[logical])
    return logical


def _gpu_uuid(device) -> str:
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    return uuid if not uuid or uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid


def _batch_shape(batch):
    """(samples, tokens, longest) of a CPU batch: a [B, L] tensor or a dict with input_ids."""
    ids, mask = batch, None
    if isinstance(batch, dict):
        ids, mask = batch.get("input_ids"), batch.get("attention_mask")
    elif isinstance(batch, (list, tuple)) and batch:
        ids = batch[0]
    if not isinstance(ids, torch.Tensor) or ids.dim() < 1:
        return 0, 0, 0
    samples = int(ids.shape[0])
    length = int(ids.shape[1]) if ids.dim() > 1 else 1
    if isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.device.type == "cpu":
        lengths = mask.sum(dim=1)
        return samples, int(lengths.sum()), int(lengths.max()) if samples else 0
    return samples, samples * length, length


def _ready_batches(iterator) -> int:
    """Batches a DataLoader has delivered and not yet handed out; -1 when unknown."""
    queue = getattr(iterator, "_data_queue", None)
    try:
        return int(queue.qsize()) if queue is not None else -1
    except (NotImplementedError, AttributeError):
        return -1


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
    checkpoint. Not thread-safe: use it from the training loop's thread.
    """

    def __init__(self, out_dir=None, *, job=None, rank_dir=None, device=None, window=20,
                 history_max_entries=None, largest_free_every=100, checkpoint_signal=None,
                 heartbeat_s=5.0):
        if isinstance(device, int):
            device = torch.device("cuda", device)
        index = torch.device(device).index if device is not None else None
        self.device = torch.cuda.current_device() if index is None else index
        overrides = {"gpu": _physical_index(self.device), "gpu_uuid": _gpu_uuid(self.device)}
        if job is not None:
            overrides["job"] = job
        identity = RankIdentity.from_env(**overrides)
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
            torch.cuda.memory._record_memory_history(max_entries=history_max_entries, stacks="python")
        self._largest_free_every = 0 if self._history else largest_free_every
        self._oom_observed = None
        if hasattr(torch._C, "_cuda_attach_out_of_memory_observer"):
            torch._C._cuda_attach_out_of_memory_observer(self._on_oom)
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
            depth = _ready_batches(iterator)
            t0 = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            t1 = time.perf_counter()
            self._wait_s, self._queue_depth = t1 - t0, depth
            self._shape = _batch_shape(batch)
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
            self._shape = _batch_shape(batch)
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
            if isinstance(error, torch.cuda.OutOfMemoryError):
                self._dump_oom(error)
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
            stats=_memory_stats(self.device), end_unix_ns=time.time_ns())
        if self._largest_free_every and self._recorder.steps % self._largest_free_every == 0:
            sample.largest_free_block = _largest_free_block(self.device)
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

    # -- OOM --------------------------------------------------------------------------------
    def _on_oom(self, device, alloc, device_allocated, device_free):
        self._oom_observed = {"device": device, "alloc": alloc, "device_allocated": device_allocated,
                              "device_free": device_free}
        if self.rank_out and self._history:
            os.makedirs(self.rank_out, exist_ok=True)
            torch.cuda.memory._dump_snapshot(os.path.join(self.rank_out, "snapshot_at_oom.pickle"))

    def _dump_oom(self, error):
        if not self.rank_out:
            return
        os.makedirs(self.rank_out, exist_ok=True)
        meta = {"outcome": "oom", "oom_message": str(error), "oom_step": self._recorder.steps,
                "oom_phase": self._recorder.phase, "rank": self._recorder.identity.rank,
                "torch": torch.__version__, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                "observer": self._oom_observed, "mem_get_info": list(torch.cuda.mem_get_info(self.device))}
        with open(os.path.join(self.rank_out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        with open(os.path.join(self.rank_out, "stats.json"), "w") as f:
            json.dump(torch.cuda.memory_stats(self.device), f, indent=1, sort_keys=True)
        with open(os.path.join(self.rank_out, "summary.txt"), "w") as f:
            f.write(torch.cuda.memory_summary(self.device))

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
        self._recorder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
