"""What the hook reads from torch.cuda: the memory_stats keys it needs, the device's identity,
a batch's shape, and memory history switched on with a bounded ring."""

import collections.abc
import os

import torch

from .recorder import RankIdentity

HISTORY_STACKS = ("python", "all")

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


def memory_stats(device) -> dict:
    """The few memory_stats keys the doctor needs, without flattening the whole dict."""
    nested = torch.cuda.memory.memory_stats_as_nested_dict(device)
    out = {}
    for key, path in _NESTED_STATS.items():
        value = nested
        for part in path:
            value = value.get(part, 0) if isinstance(value, dict) else 0
        out[key] = int(value)
    return out


def largest_free_block(device) -> int:
    segments = torch.cuda.memory_snapshot()
    return max((b["size"] for s in segments if s.get("device", 0) == device
                for b in s["blocks"] if b["state"] == "inactive"), default=0)


def physical_index(logical: int) -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not visible:
        return logical
    ids = [v.strip() for v in visible.split(",")]
    if logical < len(ids) and ids[logical].isdigit():
        return int(ids[logical])
    return logical


def gpu_uuid(device) -> str:
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    return uuid if not uuid or uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid


def device_index(device=None) -> int:
    """The CUDA device index of `device` (an int, a torch.device, a string), else the current one."""
    if isinstance(device, int):
        return device
    index = torch.device(device).index if device is not None else None
    return torch.cuda.current_device() if index is None else index


def rank_identity(device: int, job=None) -> RankIdentity:
    overrides = {"gpu": physical_index(device), "gpu_uuid": gpu_uuid(device)}
    if job is not None:
        overrides["job"] = job
    return RankIdentity.from_env(**overrides)


def enable_history(max_entries: int, stacks: str = "python") -> None:
    """Memory history on with a ring of `max_entries` events (a snapshot then carries the trace)."""
    if stacks not in HISTORY_STACKS:
        raise ValueError(f"stacks must be one of {HISTORY_STACKS}, not {stacks!r}")
    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks=stacks)


def disable_history() -> None:
    torch.cuda.memory._record_memory_history(enabled=None)


def batch_shape(batch):
    """(samples, tokens, longest) of a CPU batch: a [B, L] tensor, a tuple/list whose first item is one,
    or a mapping (a dict, transformers' BatchEncoding) with input_ids (and a bool or integer attention_mask,
    which gives real token counts)."""
    ids, mask = batch, None
    if isinstance(batch, collections.abc.Mapping):
        ids, mask = batch.get("input_ids"), batch.get("attention_mask")
    elif isinstance(batch, (list, tuple)) and batch:
        ids = batch[0]
    if not isinstance(ids, torch.Tensor) or ids.dim() < 1:
        return 0, 0, 0
    samples = int(ids.shape[0])
    length = int(ids.shape[1]) if ids.dim() > 1 else 1
    # A float mask may be additive (0 keeps a position, -10000 or -inf drops it): its sum counts no tokens.
    if (isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.device.type == "cpu"
            and not mask.is_floating_point()):
        lengths = mask.sum(dim=1)
        return samples, int(lengths.sum()), int(lengths.max()) if samples else 0
    return samples, samples * length, length


def ready_batches(iterator) -> int:
    """Batches a DataLoader iterator has delivered and not yet handed out; -1 when unknown."""
    queue = getattr(iterator, "_data_queue", None)
    try:
        return int(queue.qsize()) if queue is not None else -1
    except (NotImplementedError, AttributeError):
        return -1
