"""The writer thread (fragscope.background_writer): a stalled file system never blocks the caller, the queue
is bounded and counts what it drops, an exiting process waits for it at most EXIT_WAIT_S, order is kept,
and a forked child writes its own submissions. A real stalled NFS mount cannot run here: a write that
waits on a threading.Event stands in for it."""

import errno
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

from fragscope import background_writer
from fragscope.background_writer import BackgroundWriter, Work
from fragscope.rank_folder import RankFolder
from fragscope.recorder import RankIdentity, StepRecorder, StepSample
from fragscope.telemetry import TelemetryWriter
from hostile_folder_test import SOURCE, finishes_within

STEP = StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1)


class StalledFileSystem:
    """Writes that wait until release() (or 30 s, so that a failing test still ends); `entered` is set once a
    stalled call has begun waiting."""

    def __init__(self, test):
        self.entered = threading.Event()
        self._released = threading.Event()
        test.addCleanup(self._released.set)

    def work(self, what="a stalled write"):
        return Work(lambda: self._released.wait(30), 0, what)

    def stall(self, function):
        """`function`, waiting for release() first."""
        def stalled(*args):
            self.entered.set()
            self._released.wait(30)
            return function(*args)
        return stalled

    def release(self):
        self._released.set()


class BackgroundWriterTest(unittest.TestCase):
    def setUp(self):
        self.stalled = StalledFileSystem(self)
        self.done = []

    def recording(self, name, size=0):
        return Work(lambda: self.done.append(name), size, f"write {name}")

    def test_submit_never_waits_for_a_stalled_write(self):
        writer = BackgroundWriter()
        writer.submit(self.stalled.work())
        start = time.monotonic()
        taken = [writer.submit(self.recording(n)) for n in range(100)]
        self.assertLess(time.monotonic() - start, 0.5)
        self.assertEqual((taken, self.done), ([True] * 100, []), "nothing is written while the write is stalled")
        self.stalled.release()
        self.assertTrue(writer.flush(5.0))
        self.assertEqual(self.done, list(range(100)), "written in submission order")

    def test_a_full_queue_drops_and_counts_then_names_what_it_dropped(self):
        writer = BackgroundWriter(max_items=4)
        taken = [writer.submit(self.stalled.work())] + [writer.submit(self.recording(n)) for n in range(8)]
        self.assertEqual(taken, [True] * 4 + [False] * 5, "the stalled write counts until it is done")
        self.assertEqual(writer.dropped, 5)
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.stalled.release()
            self.assertTrue(writer.flush(5.0))
        self.assertEqual(self.done, [0, 1, 2])
        self.assertEqual(len(logs.output), 5, logs.output)
        self.assertIn("not written: write 3: the writes queued for the file system reached 4 or 64 MiB",
                      logs.output[0])

    def test_the_byte_bound_takes_one_larger_piece_at_a_time(self):
        writer = BackgroundWriter(max_bytes=100)
        writer.submit(self.stalled.work())
        sizes = [60, 50, 40, 1, 500, 500]
        taken = [writer.submit(self.recording(f"{size} bytes", size)) for size in sizes]
        self.assertEqual(taken, [True, False, True, False, True, False])
        self.assertEqual(writer.dropped, 3)
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.stalled.release()
            self.assertTrue(writer.flush(5.0))
        self.assertEqual(self.done, ["60 bytes", "40 bytes", "500 bytes"])
        self.assertEqual([line.split(": ")[2] for line in logs.output],
                         ["write 50 bytes", "write 1 bytes", "write 500 bytes"])
        self.assertTrue(writer.submit(self.recording("again", 500)), "a written piece gives its bytes back")

    def test_flush_waits_at_most_its_timeout(self):
        writer = BackgroundWriter()
        writer.submit(self.stalled.work("a line of /nfs/steps.jsonl"))
        writer.submit(self.stalled.work("a line of /nfs/steps.jsonl"))
        start = time.monotonic()
        self.assertFalse(writer.flush(0.3))
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertEqual(writer.unfinished(), "a line of /nfs/steps.jsonl (x2)")

    def test_a_failed_write_is_one_notice_and_the_thread_goes_on(self):
        def fail():
            raise OSError(errno.EIO, "Input/output error", "/nfs/run/rank0/meta.json")

        writer = BackgroundWriter()
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            writer.submit(Work(fail, 0, "/nfs/run/rank0: meta.json"))
            writer.submit(self.recording("next"))
            self.assertTrue(writer.flush(5.0))
        self.assertEqual(logs.output, ["WARNING:fragscope:fragscope: not written: /nfs/run/rank0: meta.json: "
                                       "/nfs/run/rank0/meta.json: Input/output error"])
        self.assertEqual(self.done, ["next"])


# Submits argv[2] pieces of work that each take argv[1] seconds (-1: forever, a stalled file system), the
# last one writing the file argv[3], and exits; EXIT_WAIT_S is 1 s.
EXITING = """
import sys, threading, time
from fragscope import background_writer
background_writer.EXIT_WAIT_S = 1.0
seconds, count, marker = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
write = threading.Event().wait if seconds < 0 else lambda: time.sleep(seconds)
for _ in range(count - 1):
    background_writer.submit(background_writer.Work(write, 0, "a line of /nfs/steps.jsonl"))
background_writer.submit(background_writer.Work(lambda: open(marker, "w").close(), 0, "the marker"))
"""


class ExitTest(unittest.TestCase):
    def run_exiting(self, seconds, count):
        """(exit status, stderr lines, seconds the process took, whether the marker was written)."""
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "marker")
            start = time.monotonic()
            result = subprocess.run([sys.executable, "-c", EXITING, str(seconds), str(count), marker],
                                    capture_output=True, text=True, timeout=60,
                                    env=dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(SOURCE), "python")))
            return result.returncode, result.stderr.splitlines(), time.monotonic() - start, os.path.exists(marker)

    def test_an_exiting_process_waits_for_slow_writes(self):
        status, stderr, _, written = self.run_exiting(0.2, 3)
        self.assertEqual((status, stderr, written), (0, [], True))

    def test_a_stalled_file_system_holds_the_exit_at_most_the_timeout_and_is_named(self):
        status, stderr, seconds, written = self.run_exiting(-1, 4)
        self.assertEqual((status, written), (0, False))
        self.assertGreaterEqual(seconds, 1.0)
        self.assertLess(seconds, 5.0)
        self.assertEqual(stderr, ["fragscope: not written at exit, the file system took no more in 1 s: "
                                  "a line of /nfs/steps.jsonl (x3); the marker"])


class TelemetryTest(unittest.TestCase):
    """steps.jsonl through the writer thread (the process's own, as the hook uses it)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.jsonl = os.path.join(self.tmp.name, "out", "rank0", "steps.jsonl")
        self.addCleanup(background_writer.flush, 5.0)  # written before the folder goes
        self.stalled = StalledFileSystem(self)  # released first

    def lines(self):
        self.assertTrue(background_writer.flush(5.0))
        with open(self.jsonl, encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def test_a_stalled_write_does_not_stall_the_caller_and_dropped_lines_are_counted(self):
        small_queue = BackgroundWriter(max_items=8)
        with mock.patch.object(background_writer, "_writer", small_queue), \
                mock.patch.object(background_writer, "write_all", self.stalled.stall(background_writer.write_all)):
            telemetry = TelemetryWriter(self.jsonl)
            # 0 is stalled in its write, 1-7 wait behind it, 8-19 find the queue full
            finished = finishes_within(2.0, lambda: [telemetry.write({"step": n}) for n in range(20)],
                                       self.stalled.release)
            self.assertTrue(finished, "write() waited for the stalled file system")
            with self.assertLogs("fragscope", logging.WARNING) as logs:
                self.stalled.release()
                self.assertTrue(small_queue.flush(5.0))
            self.assertEqual(logs.output, [f"WARNING:fragscope:fragscope: not written: a line of {self.jsonl} (x12): "
                                           "the writes queued for the file system reached 8 or 64 MiB"])
            telemetry.write({"step": 20})
            telemetry.close()
            self.assertTrue(small_queue.flush(5.0))
        with open(self.jsonl, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(lines, [{"step": n} for n in range(8)] + [{"step": 20, "dropped_lines": 12}])

    def test_opening_steps_jsonl_is_on_the_writer_thread(self):
        # An NFS mount that stalls the lookup: the recorder starts and records without waiting for it.
        stalled_open = self.stalled.stall(RankFolder.open_output)
        with mock.patch.object(RankFolder, "open_output", stalled_open):
            recorders = []

            def record_steps():
                recorders.append(StepRecorder(RankIdentity(pid=1), telemetry_path=self.jsonl, heartbeat_s=0))
                for _ in range(50):
                    recorders[0].record(STEP)

            finished = finishes_within(2.0, record_steps, self.stalled.release)
            self.assertTrue(finished, "the recorder waited for the stalled open")
            self.stalled.release()
            recorders[0].close()
            self.assertEqual([line["step"] for line in self.lines()], list(range(50)))

    def test_a_relative_path_stays_where_it_was_when_the_program_changes_its_folder(self):
        before, after = os.path.join(self.tmp.name, "before"), os.path.join(self.tmp.name, "after")
        os.mkdir(before)
        os.mkdir(after)
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(before)
        telemetry = TelemetryWriter(os.path.join("rank0", "steps.jsonl"))
        os.chdir(after)  # before the writer thread opens the file, at the first line
        telemetry.write({"step": 0})
        telemetry.close()
        self.assertTrue(background_writer.flush(5.0))
        self.assertEqual((os.listdir(before), os.listdir(after)), (["rank0"], []))

    def test_lines_of_a_file_keep_their_order(self):
        slow_write = background_writer.write_all

        def slow(fd, data):  # the caller runs ahead of the writer
            time.sleep(0.001)
            slow_write(fd, data)

        with mock.patch.object(background_writer, "write_all", slow):
            first, second = TelemetryWriter(self.jsonl), TelemetryWriter(self.jsonl)
            for n in range(300):
                (first if n % 2 else second).write({"step": n})
            self.assertEqual([line["step"] for line in self.lines()], list(range(300)))
            first.close()
            second.close()

    def test_a_forked_child_writes_its_own_submissions(self):
        # The parent's writer is stalled at the fork with work queued: the child neither waits behind it nor
        # writes the parent's work; it starts a writer thread of its own.
        parents = os.path.join(self.tmp.name, "parent")
        background_writer.submit(self.stalled.work())
        background_writer.submit(Work(lambda: _append_pid(parents), 0, "the parent's"))
        reading, writing = os.pipe()
        child = os.fork()
        if child == 0:
            try:
                os.close(reading)
                done = []
                taken = background_writer.submit(Work(lambda: done.append(os.getpid()), 0, "the child's"))
                flushed = background_writer.flush(5.0)
                os.write(writing, json.dumps({"taken": taken, "flushed": flushed, "done": done,
                                              "pid": os.getpid()}).encode())
            finally:
                os._exit(0)
        os.close(writing)
        with os.fdopen(reading, "rb") as pipe:
            report = json.loads(pipe.read() or b"null")
        os.waitpid(child, 0)
        self.assertEqual(report, {"taken": True, "flushed": True, "done": [child], "pid": child})
        self.stalled.release()
        self.assertTrue(background_writer.flush(5.0))
        with open(parents) as f:
            self.assertEqual(f.read().split(), [str(os.getpid())], "the parent's work is written once, by the parent")


def _append_pid(path):
    with open(path, "a") as f:
        f.write(f"{os.getpid()}\n")


if __name__ == "__main__":
    unittest.main()
