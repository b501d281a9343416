"""What the hook leaves in the rank's folder when the caching allocator runs out of memory.

PyTorch's OOM observer (torch._C._cuda_attach_out_of_memory_observer) runs inside the failing
allocation, before the exception exists, also for the OOMs that PyTorch or the program catch
(cuDNN retrying with a smaller workspace, autotuning, a batch-size search). So the folder holds
one dump, always the latest OOM's: `meta.json` (outcome, step, phase, the observer's numbers),
`stats.json` (memory_stats) and `summary.txt` (memory_summary), rewritten at every OOM
(milliseconds), and `snapshot_at_oom.pickle` (with its trace when memory history is on; seconds),
taken at most `max_dumps` times in any SNAPSHOT_WINDOW_S and never left beside a later OOM's
files. The exception's text, the OOM message the doctor parses, is added to meta.json when the
error is seen: by the hook that owns the loop, a framework's exception callback, or the process's
uncaught-exception hooks, which also mark it `uncaught`. The torch calls run on the OOM's thread
(they read the allocator's memory, milliseconds, and the snapshot); the writer thread writes the files
(background_writer.py: a stalled file system never stalls the job; an exiting process waits for them,
boundedly), each as every file of the hook (rank_folder.py): in a folder only this user can write,
through an O_EXCL temporary renamed into place, mode 0600. `fragscope doctor <folder>` reads the result.
"""

import collections
import contextlib
import json
import os
import pickle
import sys
import threading
import time

import torch

from . import background_writer, notices
from .notices import describe
from .rank_folder import RankFolder

SNAPSHOT = "snapshot_at_oom.pickle"
SNAPSHOT_WINDOW_S = 600.0

_hooked = []  # OomDumps told about uncaught OutOfMemoryErrors
_install_lock = threading.Lock()
_installed = False


class OomDump:
    """Dumps for one rank into `folder` (created on the first OOM). `state()` returns the step,
    phase and rank to record; `history` says whether memory history is on (the snapshot then has
    its trace); `max_dumps` snapshots at most are taken in any SNAPSHOT_WINDOW_S. `snapshots`: whether
    the allocator takes snapshots and calls an OOM observer; without (the cudaMallocAsync backend) the
    OOM's error alone dumps stats.json, summary.txt and meta.json."""

    def __init__(self, folder: str, *, device, state, history: bool, max_dumps: int = 5, after_dump=None,
                 snapshots: bool = True):
        self.folder = os.path.abspath(folder)  # the writer thread writes there later, maybe after an os.chdir
        self.device = device  # None: the current device when an OOM needs one
        self._state = state
        self._after_dump = after_dump  # called with the OOM's device once its meta.json is queued
        self._history = history
        self._snapshots = snapshots
        self._snapshot_times = collections.deque(maxlen=max_dumps)  # when the latest snapshots were taken
        self.ooms = 0  # OOMs so far (observer calls, errors no observer reported): the latest's oom_number
        self._meta = None  # meta.json of the OOM in the folder; None when the writer did not take its dump
        self._dump_files = None  # the writer's work for that dump, which the meta.json rewrites amend
        self._error = None  # the last OutOfMemoryError seen, the meta it went into, the OOM count then
        self._error_meta = None
        self._ooms_at_error = 0
        self._stopped = False
        self._lock = threading.RLock()  # one dump at a time (OOMs on two threads); never a deadlock

    # -- the moment of the OOM --------------------------------------------------------------
    def attach(self) -> None:
        """Registers the observer with the allocator (there is no detaching: see stop()), where it has one."""
        if self._snapshots and hasattr(torch._C, "_cuda_attach_out_of_memory_observer"):
            torch._C._cuda_attach_out_of_memory_observer(self.on_observer)
        _watch_uncaught(self)

    def stop(self) -> None:
        """No more dumps; what was queued is still written."""
        with self._lock:
            self._stopped = True
        with _install_lock:
            if self in _hooked:
                _hooked.remove(self)

    def on_observer(self, device, alloc, device_allocated, device_free) -> None:
        """Called by the allocator at every OOM, caught later or not; never raises back into it."""
        with self._lock:
            if self._stopped:
                return
            try:
                self._dump({"device": device, "alloc": alloc, "device_allocated": device_allocated,
                            "device_free": device_free}, device)
            except Exception as error:
                notices.warn("oom-dump:" + self.folder, f"OOM dump failed: {describe(error)}")

    def _dump(self, observer, device) -> None:
        """Makes the folder this OOM's: stats.json, summary.txt and meta.json (self._meta, None unless the
        writer took them), then the snapshot when the rate allows."""
        self.ooms += 1
        self._meta = self._dump_files = None
        snapshot = self._snapshots and self._may_snapshot()  # counted once taken, below
        step, phase, rank = self._state()
        meta = {"outcome": "oom", "oom_message": None, "uncaught": False, "oom_step": step, "oom_phase": phase,
                "rank": rank, "oom_number": self.ooms, "snapshot": snapshot, "memory_history": self._history,
                "torch": torch.__version__, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                "observer": observer, "mem_get_info": list(torch.cuda.mem_get_info(device))}
        files = _OomFiles(self.folder, [
            ("stats.json", json.dumps(torch.cuda.memory_stats(device), indent=1, sort_keys=True).encode("utf-8")),
            ("summary.txt", torch.cuda.memory_summary(device).encode("utf-8")),
            ("meta.json", _meta_json(meta))], stale=SNAPSHOT)  # an earlier OOM's snapshot never stays
        if not background_writer.submit(files):
            return  # the writer named what it dropped
        self._meta, self._dump_files = meta, files
        if self._after_dump:
            self._after_dump(device)
        if not snapshot:
            if not self._snapshots:
                return  # the backend's notice said so
            notices.warn("oom-snapshot:" + self.folder,
                         f"{self.folder}: OOM {self.ooms} has no snapshot: {self._snapshot_times.maxlen} were "
                         f"taken in the last {SNAPSHOT_WINDOW_S / 60:.0f} minutes (its other files are written)")
            return
        self._snapshot_times.append(time.monotonic())  # a dump the full queue dropped above took none
        pickled = pickle.dumps(torch.cuda.memory._snapshot())
        if not background_writer.submit(_OomFiles(self.folder, [(SNAPSHOT, pickled)], amends=files)):
            meta["snapshot"] = False  # the writer dropped it (and names it): meta.json says so
            self._write_meta()

    def _may_snapshot(self) -> bool:
        """Whether this OOM may get a snapshot: at most max_dumps taken in any SNAPSHOT_WINDOW_S, so however
        many OOMs the program catches, the time and disk they cost are bounded."""
        times = self._snapshot_times
        return len(times) < times.maxlen or (bool(times) and time.monotonic() - times[0] >= SNAPSHOT_WINDOW_S)

    # -- the exception ----------------------------------------------------------------------
    def on_error(self, error: BaseException, *, uncaught: bool = False) -> None:
        """Adds the OOM message to the dump of the same OOM (dumping now when no observer ran for it,
        e.g. an allocator backend without observers); `uncaught`: the error ended the process or a
        thread. Never raises."""
        error = _out_of_memory_in(error)
        if error is None:
            return
        with self._lock:
            if self._stopped:
                return
            try:
                if error is not self._error:  # first seen: the latest OOM's error
                    if self.ooms == self._ooms_at_error:  # no OOM dumped since the last error
                        self._dump(None, torch.cuda.current_device() if self.device is None else self.device)
                    self._error, self._error_meta, self._ooms_at_error = error, self._meta, self.ooms
                meta = self._error_meta
                if meta is None or meta is not self._meta:  # its dump failed, or a later OOM's replaced it
                    return
                if meta["oom_message"] is None or (uncaught and not meta["uncaught"]):
                    meta.update(oom_message=str(error), uncaught=meta["uncaught"] or uncaught)
                    self._write_meta()
            except Exception as failure:
                notices.warn("oom-dump:" + self.folder, f"OOM dump failed: {describe(failure)}")

    # -- files ------------------------------------------------------------------------------
    def _write_meta(self):
        background_writer.submit(_OomFiles(self.folder, [("meta.json", _meta_json(self._meta))],
                                            amends=self._dump_files))


def _meta_json(meta) -> bytes:
    return json.dumps(meta, indent=1).encode("utf-8")  # as it is now: the message is added to the dict later


class _OomFiles:
    """background_writer work: files of a dump written in order, each through an O_EXCL temporary renamed
    into place, after removing `stale` (an earlier OOM's file). Nothing when the dump it `amends` failed: a
    meta.json or snapshot would then sit beside another OOM's files. `what` names the files not yet written."""

    def __init__(self, folder, files, *, stale=None, amends=None):
        self.folder, self._files, self._stale, self._amends = folder, files, stale, amends
        self.size = sum(len(data) for _, data in files)
        self.failed = False
        self.what = self._describe()

    def _describe(self):
        return f"{self.folder}: {', '.join(name for name, _ in self._files)}"

    def run(self):
        if self._amends is not None and self._amends.failed:
            return
        try:
            folder = RankFolder.open_output(self.folder)
            try:
                if self._stale:
                    folder.remove(self._stale)
                while self._files:
                    _write(folder, *self._files[0])
                    self._files.pop(0)
                    self.what = self._describe()
            finally:
                folder.close()
        except OSError as error:
            self.failed = True
            notices.warn("oom-dump:" + self.folder, f"OOM dump failed: {describe(error)}")


def _write(folder, name, data):
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        fd = folder.create_exclusive(tmp)
        try:
            background_writer.write_all(fd, data)
        finally:
            os.close(fd)
        folder.rename(tmp, name)
    except BaseException:
        with contextlib.suppress(OSError):
            folder.remove(tmp)  # a half-written snapshot may be large
        raise


def _out_of_memory_in(error):
    """The OutOfMemoryError that `error` is or was raised from (a framework may wrap it), or None."""
    for _ in range(8):
        if error is None or isinstance(error, torch.cuda.OutOfMemoryError):
            return error
        error = error.__cause__ or error.__context__
    return None


def _watch_uncaught(dump: OomDump) -> None:
    """Chains sys.excepthook and threading.excepthook (once per process) so an OutOfMemoryError
    that ends the process or a thread still gets its message into meta.json, marked uncaught."""
    global _installed
    with _install_lock:
        if dump not in _hooked:
            _hooked.append(dump)
        if _installed:
            return
        _installed = True
        previous_sys, previous_thread = sys.excepthook, threading.excepthook

        def sys_hook(kind, value, traceback):
            _tell(value, uncaught=True)
            previous_sys(kind, value, traceback)

        def thread_hook(args):
            _tell(args.exc_value, uncaught=True)
            previous_thread(args)

        sys.excepthook, threading.excepthook = sys_hook, thread_hook


def _tell(error, uncaught=False):
    for dump in list(_hooked):
        dump.on_error(error, uncaught=uncaught)


def report(error: BaseException) -> None:
    """Tells every hook in this process about an exception the program caught itself (an OOM's
    message then reaches meta.json, as it would had the exception ended the process)."""
    _tell(error)
