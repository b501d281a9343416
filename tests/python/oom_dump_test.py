"""The OOM dump (fragscope.oom) against a stand-in torch, since torch is not installed where this runs.

Its files are written like steps.jsonl (output_folder_test.py): never through a link, never blocking on
a FIFO, only into a folder of this user's, 0600. And the folder always ends up holding the latest OOM,
however many OOMs the program caught before it (cuDNN retries, autotuning, a batch-size search), with
snapshots bounded in number per window and marked uncaught when it ended the process or a thread."""

import importlib.util
import json
import logging
import os
import pickle
import stat
import subprocess
import sys
import tempfile
import threading
import types
import unittest
from unittest import mock

from fragscope import background_writer
from hostile_folder_test import (OTHER_UID, SOURCE, finishes_within, needs_root, open_fifo_other_end,
                                 process_umask, run_as_other_user)

# The parts of torch that fragscope.oom calls. out_of_memory() does what the caching allocator does at an
# OOM: calls the observers inside the failing allocation, then raises.
STAND_IN_TORCH = '''
import types

__version__ = "0+stand-in"
observers = []
snapshots = 0


class OutOfMemoryError(RuntimeError):
    pass


def _snapshot():
    global snapshots
    snapshots += 1
    return {"segments": [], "device_traces": [], "snapshot_number": snapshots}


def out_of_memory(mib=1):
    for observer in observers:
        observer(0, mib << 20, 1 << 34, 1 << 20)
    return OutOfMemoryError(f"CUDA out of memory. Tried to allocate {mib}.00 MiB.")


_C = types.SimpleNamespace(_cuda_attach_out_of_memory_observer=observers.append)
cuda = types.SimpleNamespace(
    OutOfMemoryError=OutOfMemoryError, current_device=lambda: 0, mem_get_info=lambda device=None: (1 << 20, 1 << 34),
    memory_stats=lambda device=None: {"num_ooms": 1}, memory_summary=lambda device=None: "memory summary\\n",
    memory=types.SimpleNamespace(_snapshot=_snapshot))
'''
VICTIM_TEXT = "export PATH=/usr/bin\n"
FILES = ["meta.json", "snapshot_at_oom.pickle", "stats.json", "summary.txt"]


def load_oom_module():
    """(fragscope.oom, its stand-in torch), outside sys.modules: no other test sees either."""
    torch = types.ModuleType("torch")
    exec(STAND_IN_TORCH, torch.__dict__)
    spec = importlib.util.find_spec("fragscope.oom")
    oom = importlib.util.module_from_spec(spec)
    with mock.patch.dict(sys.modules, {"torch": torch}):
        spec.loader.exec_module(oom)
    return oom, torch


class OomDumpTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.addCleanup(background_writer.flush, 5.0)  # the dumps are written before the folder goes
        os.chmod(self.tmp.name, 0o755)  # lets the second user reach the folders below
        self.folder = os.path.join(self.tmp.name, "out", "rank0")
        self.victim = os.path.join(self.tmp.name, "bashrc")  # the user's own file an attacker aims at
        with open(self.victim, "w") as f:
            f.write(VICTIM_TEXT)
        for patch in (mock.patch.object(sys, "excepthook", lambda *args: None),  # attach() chains both:
                      mock.patch.object(threading, "excepthook", lambda args: None)):  # they come back afterwards
            patch.start()
            self.addCleanup(patch.stop)
        self.oom, self.torch = load_oom_module()

    def dump(self, folder=None, max_dumps=5):
        dump = self.oom.OomDump(folder or self.folder, device=0, state=lambda: (3, "train", 0), history=True,
                                max_dumps=max_dumps)
        dump.attach()
        self.addCleanup(dump.stop)
        return dump

    def caught_ooms(self, count, written=True):
        for _ in range(count):
            try:
                raise self.torch.out_of_memory()
            except self.torch.cuda.OutOfMemoryError:
                pass
        if written:
            self.written()

    def written(self):
        """The writer thread writes the files: waits for it (it never blocks the OOM's thread)."""
        self.assertTrue(background_writer.flush(5.0), "the writer thread did not finish the dump")

    def oom_ending_a_thread(self, mib):
        def fail():
            raise self.torch.out_of_memory(mib)

        thread = threading.Thread(target=fail)
        thread.start()
        thread.join()
        self.written()

    def meta(self):
        with open(os.path.join(self.folder, "meta.json")) as f:
            return json.load(f)

    def assert_victim_untouched(self):
        with open(self.victim) as f:
            self.assertEqual(f.read(), VICTIM_TEXT)

    # -- the files ------------------------------------------------------------------------------
    def test_links_at_the_temporary_and_final_names_are_not_followed(self):
        os.makedirs(self.folder)
        pid = os.getpid()
        for name in (f".snapshot_at_oom.pickle.{pid}.tmp", f".meta.json.{pid}.tmp", "stats.json"):
            os.symlink(self.victim, os.path.join(self.folder, name))
        self.dump()
        self.caught_ooms(1)
        self.assert_victim_untouched()
        self.assertEqual(sorted(os.listdir(self.folder)), FILES)
        for name in FILES:
            self.assertTrue(stat.S_ISREG(os.lstat(os.path.join(self.folder, name)).st_mode), name)
        with open(os.path.join(self.folder, "snapshot_at_oom.pickle"), "rb") as f:
            self.assertEqual(pickle.load(f)["snapshot_number"], 1)

    def test_a_fifo_at_a_temporary_name_does_not_block_the_allocation(self):
        os.makedirs(self.folder)
        fifo = os.path.join(self.folder, f".stats.json.{os.getpid()}.tmp")
        os.mkfifo(fifo)
        os.chmod(fifo, 0o666)
        self.dump()
        finished = finishes_within(2.0, lambda: self.caught_ooms(1), lambda: open_fifo_other_end(fifo))
        self.assertTrue(finished, "the OOM observer blocked on a FIFO at a temporary name")
        self.assertEqual(sorted(os.listdir(self.folder)), FILES)

    def test_files_are_0600_and_created_folders_0700(self):
        with process_umask(0o022):
            self.dump()
            self.caught_ooms(1)
        modes = {name: stat.S_IMODE(os.stat(os.path.join(self.folder, name)).st_mode) for name in FILES}
        self.assertEqual(modes, dict.fromkeys(FILES, 0o600))
        for folder in (self.folder, os.path.dirname(self.folder)):
            self.assertEqual(stat.S_IMODE(os.stat(folder).st_mode), 0o700)

    def test_a_folder_others_can_write_is_refused_with_one_notice(self):
        os.makedirs(self.folder)
        os.chmod(self.folder, 0o777)
        self.dump()
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.caught_ooms(3)
        self.assertEqual(len(logs.output), 1, logs.output)
        self.assertIn(f"OOM dump failed: {self.folder}: can be written by anyone", logs.output[0])
        self.assertEqual(os.listdir(self.folder), [])

    @needs_root
    def test_a_folder_another_user_planted_is_refused(self):
        # The audit's case: another user made the folder, world-writable, with a link and a FIFO at the
        # temporary names the hook used to open with a plain open().
        public = os.path.join(self.tmp.name, "public")  # like /tmp
        os.mkdir(public)
        os.chmod(public, 0o1777)
        folder, pid = os.path.join(public, "run", "rank0"), os.getpid()
        planted = run_as_other_user(
            f"import os\nos.makedirs({folder!r})\nos.chmod({folder!r}, 0o777)\n"
            f"os.symlink({self.victim!r}, {folder!r} + '/.snapshot_at_oom.pickle.{pid}.tmp')\n"
            f"os.mkfifo({folder!r} + '/.stats.json.{pid}.tmp', 0o666)\n", cwd=self.tmp.name)
        self.assertEqual(planted.returncode, 0, planted.stderr)
        self.dump(folder)
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            finished = finishes_within(2.0, lambda: self.caught_ooms(1),
                                       lambda: open_fifo_other_end(f"{folder}/.stats.json.{pid}.tmp"))
        self.assertTrue(finished, "the OOM observer blocked on another user's FIFO")
        self.assertIn(f"OOM dump failed: {folder}: is owned by uid {OTHER_UID}", logs.output[0])
        self.assert_victim_untouched()

    def test_a_relative_folder_stays_where_it_was_when_the_program_changes_its_folder(self):
        before, after = os.path.join(self.tmp.name, "before"), os.path.join(self.tmp.name, "after")
        os.mkdir(before)
        os.mkdir(after)
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(before)
        self.dump(os.path.join("out", "rank0"))
        os.chdir(after)
        self.caught_ooms(1)
        self.assertEqual((sorted(os.listdir(os.path.join(before, "out", "rank0"))), os.listdir(after)), (FILES, []))

    # -- which OOM the folder holds --------------------------------------------------------------
    def test_the_oom_after_many_caught_ones_is_the_one_in_the_folder(self):
        self.dump(max_dumps=5)
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.caught_ooms(20)
            self.oom_ending_a_thread(mib=99)
        meta = self.meta()
        self.assertEqual((meta["oom_number"], meta["uncaught"], meta["observer"]["alloc"]), (21, True, 99 << 20))
        self.assertIn("Tried to allocate 99.00 MiB", meta["oom_message"])
        self.assertEqual(self.torch.snapshots, 5, "snapshots taken: at most 5 in 10 minutes")
        self.assertFalse(meta["snapshot"])
        self.assertNotIn("snapshot_at_oom.pickle", os.listdir(self.folder), "an earlier OOM's snapshot was left")
        self.assertEqual(len(logs.output), 1, logs.output)
        self.assertIn(f"{self.folder}: OOM 6 has no snapshot: 5 were taken in the last 10 minutes", logs.output[0])

    def test_snapshots_come_back_once_the_window_has_passed(self):
        self.dump(max_dumps=2)
        with mock.patch.object(self.oom, "SNAPSHOT_WINDOW_S", 0.0):
            self.caught_ooms(3)
            self.oom_ending_a_thread(mib=7)
        self.assertEqual(self.torch.snapshots, 4)
        with open(os.path.join(self.folder, "snapshot_at_oom.pickle"), "rb") as f:
            self.assertEqual(pickle.load(f)["snapshot_number"], 4)
        self.assertEqual((self.meta()["oom_number"], self.meta()["snapshot"]), (4, True))

    def test_a_dump_the_full_queue_dropped_takes_no_snapshot_of_the_budget(self):
        self.dump(max_dumps=1)
        with mock.patch.object(background_writer, "submit", lambda work: False):  # the writer fell behind
            self.caught_ooms(1, written=False)
        self.assertEqual(self.torch.snapshots, 0)
        self.caught_ooms(1)
        self.assertEqual(self.torch.snapshots, 1)
        self.assertEqual((self.meta()["oom_number"], self.meta()["snapshot"]), (2, True))

    def test_a_caught_oom_the_program_reports_is_not_uncaught(self):
        self.dump()
        try:
            raise self.torch.out_of_memory(3)
        except self.torch.cuda.OutOfMemoryError as error:
            self.oom.report(error)
        self.written()
        meta = self.meta()
        self.assertEqual((meta["uncaught"], meta["oom_number"], meta["snapshot"]), (False, 1, True))
        self.assertIn("Tried to allocate 3.00 MiB", meta["oom_message"])

    def test_an_oom_dump_waiting_for_a_stalled_file_system_does_not_block_the_allocation(self):
        released, write = threading.Event(), background_writer.write_all
        self.addCleanup(released.set)

        def stalled_write(fd, data):
            released.wait(30)
            write(fd, data)

        self.dump()
        with mock.patch.object(background_writer, "write_all", stalled_write):
            finished = finishes_within(2.0, lambda: self.caught_ooms(2, written=False), released.set)
            self.assertTrue(finished, "the OOM observer waited for the stalled file system")
            self.assertFalse(os.path.exists(os.path.join(self.folder, "meta.json")))
            released.set()
            self.written()
        self.assertEqual((self.meta()["oom_number"], sorted(os.listdir(self.folder))), (2, FILES))

    def run_ending_in_an_oom(self, slow_disk=""):
        """Runs a program whose 4th OOM ends it (after `slow_disk`, code that may slow down the writes);
        returns the CompletedProcess."""
        stand_in = os.path.join(self.tmp.name, "stand-in")
        os.makedirs(os.path.join(stand_in, "torch"), exist_ok=True)
        with open(os.path.join(stand_in, "torch", "__init__.py"), "w") as f:
            f.write(STAND_IN_TORCH)
        program = ("import threading, time\nimport torch\nfrom fragscope import background_writer\n"
                   "from fragscope.oom import OomDump\n" + slow_disk +
                   f"OomDump({self.folder!r}, device=0, state=lambda: (9, 'eval', 0), history=False).attach()\n"
                   "for _ in range(3):\n    try:\n        raise torch.out_of_memory()\n"
                   "    except torch.cuda.OutOfMemoryError:\n        pass\n"
                   "raise torch.out_of_memory(64)\n")
        python_path = os.pathsep.join([stand_in, os.path.join(os.path.abspath(SOURCE), "python")])
        return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=python_path))

    def test_an_oom_that_ends_the_process_is_marked_uncaught(self):
        result = self.run_ending_in_an_oom()
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("Tried to allocate 64.00 MiB", result.stderr.splitlines()[-1])
        meta = self.meta()
        self.assertEqual((meta["oom_number"], meta["uncaught"], meta["snapshot"], meta["oom_phase"]),
                         (4, True, True, "eval"))
        self.assertIn("Tried to allocate 64.00 MiB", meta["oom_message"])
        with open(os.path.join(self.folder, "snapshot_at_oom.pickle"), "rb") as f:
            self.assertEqual(pickle.load(f)["snapshot_number"], 4)

    def test_an_exiting_process_waits_for_its_dump_on_a_slow_disk(self):
        # 14 files of 0.05 s each: the writer is still at the first OOMs when the last one ends the process.
        result = self.run_ending_in_an_oom(
            "write = background_writer.write_all\n"
            "background_writer.write_all = lambda fd, data: (time.sleep(0.1), write(fd, data))\n")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("Tried to allocate 64.00 MiB", result.stderr.splitlines()[-1])
        meta = self.meta()
        self.assertEqual((meta["oom_number"], meta["uncaught"], meta["snapshot"]), (4, True, True))
        self.assertIn("Tried to allocate 64.00 MiB", meta["oom_message"])
        self.assertEqual(sorted(os.listdir(self.folder)), FILES)

    def test_an_exiting_process_names_the_dump_a_stalled_disk_did_not_take(self):
        result = self.run_ending_in_an_oom("background_writer.EXIT_WAIT_S = 0.5\n"
                                           "background_writer.write_all = lambda fd, data: threading.Event().wait()\n")
        self.assertEqual(result.returncode, 1, result.stderr)
        folder = self.folder
        self.assertEqual(result.stderr.splitlines()[-1],
                         "fragscope: not written at exit, the file system took no more in 0.5 s: "
                         f"{folder}: stats.json, summary.txt, meta.json (x4); {folder}: snapshot_at_oom.pickle (x4); "
                         f"{folder}: meta.json")


if __name__ == "__main__":
    unittest.main()
