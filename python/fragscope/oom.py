"""What the hook leaves in the rank's folder when the caching allocator runs out of memory.

PyTorch's OOM observer (torch._C._cuda_attach_out_of_memory_observer) runs inside the failing
allocation, before the exception exists: it writes the state at that moment, `stats.json`
(memory_stats), `summary.txt` (memory_summary), `snapshot_at_oom.pickle` (with its trace when
memory history is on) and `meta.json` (outcome, step, phase, the observer's numbers). The
exception's text, the OOM message the doctor parses, is added to meta.json when the error is
seen: by the hook that owns the loop, a framework's exception callback, or the process's
uncaught-exception hooks. Each file is written to a temporary name and renamed, and at most
`max_dumps` OOMs per process are dumped (a loop that catches OOMs does not write snapshots on
every step). `fragscope doctor <folder>` reads the result.
"""

import json
import os
import sys
import threading

import torch

from . import notices
from .recorder import describe

_hooked = []  # OomDumps told about uncaught OutOfMemoryErrors
_install_lock = threading.Lock()
_installed = False


class OomDump:
    """Dumps for one rank into `folder` (created on the first OOM). `state()` returns the step,
    phase and rank to record; `history` says whether memory history is on (the snapshot then has
    its trace)."""

    def __init__(self, folder: str, *, device, state, history: bool, max_dumps: int = 5, after_dump=None):
        self.folder = folder
        self.device = device  # None: the current device when an OOM needs one
        self._state = state
        self._after_dump = after_dump  # called with the OOM's device once the files are written
        self._history = history
        self._max_dumps = max_dumps
        self.dumps = 0
        self._meta = None
        self._described = None  # the exception already written into meta.json
        self._observed = 0  # observer calls so far, and as many as the last error had seen
        self._observed_at_error = 0
        self._awaiting_message = False  # the last observer call dumped: its error's text goes in meta

    # -- the moment of the OOM --------------------------------------------------------------
    def attach(self) -> None:
        """Registers the observer with the allocator (there is no detaching: see stop())."""
        if hasattr(torch._C, "_cuda_attach_out_of_memory_observer"):
            torch._C._cuda_attach_out_of_memory_observer(self.on_observer)
        _watch_uncaught(self)

    def stop(self) -> None:
        self._max_dumps = 0
        with _install_lock:
            if self in _hooked:
                _hooked.remove(self)

    def on_observer(self, device, alloc, device_allocated, device_free) -> None:
        """Called by the allocator; never raises back into it."""
        self._observed += 1
        self._awaiting_message = False
        try:
            self._awaiting_message = self._dump({"device": device, "alloc": alloc, "device_allocated": device_allocated,
                                                 "device_free": device_free}, device)
        except Exception as error:
            notices.warn("oom-dump:" + self.folder, f"OOM dump failed: {describe(error)}")

    def _dump(self, observer, device) -> bool:
        """Writes the files of one OOM; False when the limit was reached (nothing written)."""
        if self.dumps >= self._max_dumps:
            notices.warn("oom-dumps:" + self.folder, f"{self.folder}: {self.dumps} OOMs dumped, later ones are not")
            return False
        self.dumps += 1
        os.makedirs(self.folder, exist_ok=True)
        step, phase, rank = self._state()
        self._meta = {"outcome": "oom", "oom_message": None, "oom_step": step, "oom_phase": phase, "rank": rank,
                      "oom_number": self.dumps, "memory_history": self._history, "torch": torch.__version__,
                      "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "observer": observer,
                      "mem_get_info": list(torch.cuda.mem_get_info(device))}
        self._write("stats.json", lambda f: json.dump(torch.cuda.memory_stats(device), f, indent=1,
                                                      sort_keys=True))
        self._write("summary.txt", lambda f: f.write(torch.cuda.memory_summary(device)))
        self._write_meta()
        snapshot = os.path.join(self.folder, "snapshot_at_oom.pickle")
        tmp = os.path.join(self.folder, f".snapshot_at_oom.pickle.{os.getpid()}.tmp")
        torch.cuda.memory._dump_snapshot(tmp)
        os.replace(tmp, snapshot)
        if self._after_dump:
            self._after_dump(device)
        return True

    # -- the exception ----------------------------------------------------------------------
    def on_error(self, error: BaseException) -> None:
        """Adds the OOM message to the dump of the same OOM (dumping now when no observer ran for
        it, e.g. an allocator backend without observers). Never raises."""
        error = _out_of_memory_in(error)
        if error is None or error is self._described:
            return
        self._described = error
        observed, self._observed_at_error = self._observed > self._observed_at_error, self._observed
        try:
            if not observed:
                device = torch.cuda.current_device() if self.device is None else self.device
                self._awaiting_message = self._dump(None, device)
            if self._awaiting_message:
                self._awaiting_message = False
                self._meta["oom_message"] = str(error)
                self._write_meta()
        except Exception as failure:
            notices.warn("oom-dump:" + self.folder, f"OOM dump failed: {describe(failure)}")

    # -- files ------------------------------------------------------------------------------
    def _write_meta(self):
        self._write("meta.json", lambda f: json.dump(self._meta, f, indent=1))

    def _write(self, name, fill):
        tmp = os.path.join(self.folder, f".{name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            fill(f)
        os.replace(tmp, os.path.join(self.folder, name))


def _out_of_memory_in(error):
    """The OutOfMemoryError that `error` is or was raised from (a framework may wrap it), or None."""
    for _ in range(8):
        if error is None or isinstance(error, torch.cuda.OutOfMemoryError):
            return error
        error = error.__cause__ or error.__context__
    return None


def _watch_uncaught(dump: OomDump) -> None:
    """Chains sys.excepthook and threading.excepthook (once per process) so an OutOfMemoryError
    that ends the process or a thread still gets its message into meta.json."""
    global _installed
    with _install_lock:
        if dump not in _hooked:
            _hooked.append(dump)
        if _installed:
            return
        _installed = True
        previous_sys, previous_thread = sys.excepthook, threading.excepthook

        def sys_hook(kind, value, traceback):
            _tell(value)
            previous_sys(kind, value, traceback)

        def thread_hook(args):
            _tell(args.exc_value)
            previous_thread(args)

        sys.excepthook, threading.excepthook = sys_hook, thread_hook


def _tell(error):
    for dump in list(_hooked):
        dump.on_error(error)


def report(error: BaseException) -> None:
    """Tells every hook in this process about an exception the program caught itself (an OOM's
    message then reaches meta.json, as it would had the exception ended the process)."""
    _tell(error)
