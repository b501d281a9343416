"""Times every batch a torch DataLoader hands out, for loops the hook does not own.

Wraps `_BaseDataLoaderIter.__next__` (the single- and multi-process iterators both inherit it;
Accelerate's and Lightning's loaders iterate one) once per process: two clock reads and a call
per batch. Listeners get (seconds waited, the batch, batches the loader had ready before).
"""

import threading
import time

from torch.utils.data import dataloader

from .cuda import ready_batches

_listeners = []
_lock = threading.Lock()
_original_next = None


def listen(listener) -> bool:
    """Calls listener(wait_s, batch, ready) for each batch from now on; False when this torch's
    DataLoader has no iterator to wrap (waits are then taken from the framework's events)."""
    global _original_next
    iterator_class = getattr(dataloader, "_BaseDataLoaderIter", None)
    if iterator_class is None or not hasattr(iterator_class, "__next__"):
        return False
    with _lock:
        if _original_next is None:
            _original_next = iterator_class.__next__
            iterator_class.__next__ = _timed_next
        if listener not in _listeners:
            _listeners.append(listener)
    return True


def stop_listening(listener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def _timed_next(iterator):
    ready = ready_batches(iterator) if _listeners else -1
    start = time.perf_counter()
    batch = _original_next(iterator)
    waited = time.perf_counter() - start
    for listener in _listeners:
        listener(waited, batch, ready)
    return batch
