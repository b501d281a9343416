"""StepRecorder: window statistics, the telemetry line schema, the rank file and checkpoints; a full
disk, a checkpoint signal's previous handler, a constructor that fails part-way; a stalled rank folder,
which a call that waits on a threading.Event stands in for (a hung NFS mount cannot run here), and a
fork while the publisher holds the recorder's lock."""

import json
import logging
import os
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from unittest import mock

from fragscope import background_writer
from fragscope.rank_folder import RankFolder
from fragscope.recorder import MIN_CYCLE_S, RankIdentity, StepRecorder, StepSample
from fragscope.telemetry import STAT_KEYS
from background_writer_test import StalledFileSystem

FIXTURES = os.environ.get("FRAGSCOPE_FIXTURES_DIR", "")
SOURCE_PYTHON = os.path.join(os.path.abspath(os.environ.get("FRAGSCOPE_SOURCE_DIR", ".")), "python")

# Records 200 steps into OUT/steps.jsonl; prints the steps counted, the descriptors still open on the file
# once the writer thread is done (before close()), whether the rank file is there and how many lines were written.
STEPS_ON_A_SMALL_DISK = textwrap.dedent("""
    import json, os, sys
    from fragscope import background_writer
    from fragscope.recorder import MIN_CYCLE_S, RankIdentity, StepRecorder, StepSample
    out, ranks = sys.argv[1], sys.argv[2]
    jsonl = os.path.join(out, "steps.jsonl")
    recorder = StepRecorder(RankIdentity(pid=1), rank_dir=ranks, telemetry_path=jsonl, heartbeat_s=0)
    for _ in range(200):
        recorder.record(StepSample(data_wait_s=0.01, step_s=0.1, compute_s=0.09))
    background_writer.flush(10)
    fds = [fd for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") == jsonl]
    published = os.path.exists(os.path.join(ranks, "rank0-pid1.fsr"))
    recorder.close()
    with open(jsonl, "rb") as f:
        lines = f.read().count(b"\\n")
    print(json.dumps({"steps": recorder.steps, "open": len(fds), "published": published, "lines": lines}))
""")


def can_mount_a_private_tmpfs():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0


def unpack(path, fmt, offset):
    with open(path, "rb") as f:
        return struct.unpack_from(fmt, f.read(), offset)[0]


def fixture_lines(name):
    with open(os.path.join(FIXTURES, name, "steps.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


class StepRecorderTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.rank_dir = os.path.join(self.dir.name, "shm")
        os.mkdir(self.rank_dir, 0o700)  # this user's own folder: the rank file goes straight in
        self.jsonl = os.path.join(self.dir.name, "out", "rank2", "steps.jsonl")
        identity = RankIdentity(rank=2, local_rank=2, world_size=4, gpu=2, job="unit", pid=999)
        self.recorder = StepRecorder(identity, rank_dir=self.rank_dir, telemetry_path=self.jsonl, window=3,
                                     heartbeat_s=0, device_total_bytes=150_754_820_096)
        self.rank_file = os.path.join(self.rank_dir, "rank2-pid999.fsr")

    def tearDown(self):
        self.recorder.close()
        background_writer.flush(5.0)  # its files are written before the folder goes
        self.dir.cleanup()

    def test_replaying_a_fixture_reproduces_its_data_wait_fraction(self):
        # input_bound's truth.json: data_wait_fraction over all steps = 0.9102229950859219.
        with open(os.path.join(FIXTURES, "input_bound", "truth.json"), encoding="utf-8") as f:
            truth = json.load(f)
        recorder = StepRecorder(RankIdentity(pid=1), window=10_000, heartbeat_s=0)
        try:
            for line in fixture_lines("input_bound"):
                wait, compute = line["data_wait_ms"] / 1e3, line["compute_ms"] / 1e3
                recorder.record(StepSample(data_wait_s=wait, step_s=wait + compute, compute_s=compute,
                                           samples=line["mbs"], tokens=line["mbs"] * line["seq_len"],
                                           longest=line["seq_len"], stats=line))
            self.assertAlmostEqual(recorder._record.data_wait_ratio, truth["data_wait_fraction"], places=12)
            self.assertEqual(recorder._record.reserved_bytes, truth["reserved_bytes_end"])
        finally:
            recorder.close()

    def test_window_keeps_only_the_last_steps(self):
        for wait in (0.9, 0.0, 0.1, 0.2):  # window 3: the 0.9 falls out
            self.recorder.record(StepSample(data_wait_s=wait, step_s=1.0, compute_s=1.0 - wait, samples=4))
        self.assertTrue(self.recorder.flush(5.0))
        self.assertAlmostEqual(unpack(self.rank_file, "<d", 256), 0.3 / 3.0)
        self.assertAlmostEqual(unpack(self.rank_file, "<d", 264), 4.0)   # samples/s
        self.assertAlmostEqual(unpack(self.rank_file, "<d", 280), 1.2)   # data wait total
        self.assertEqual(unpack(self.rank_file, "<Q", 80), 4)            # steps

    def test_lines_carry_the_fixture_schema_and_the_hook_fields(self):
        stats = fixture_lines("calib")[1]
        line = self.recorder.record(StepSample(data_wait_s=0.001, step_s=0.36, compute_s=0.357, h2d_s=0.002,
                                               samples=4, tokens=12928, longest=3232, queue_depth=2,
                                               optimizer_step=False, stats=stats))
        self.assertTrue(background_writer.flush(5.0))
        self.assertTrue(self.recorder.flush(5.0))
        with open(self.jsonl, encoding="utf-8") as f:
            written = [json.loads(x) for x in f]
        self.assertEqual(written, [line])
        self.assertLessEqual(set(stats), set(line), "every key the fixtures carry")
        for key in STAT_KEYS:
            self.assertEqual(line[key], stats[key])
        self.assertEqual((line["seq_len"], line["mbs"], line["max_seq_len"], line["tokens"]), (3232, 4, 3232, 12928))
        self.assertEqual((line["phase"], line["rank"], line["local_rank"]), ("train", 2, 2))
        self.assertAlmostEqual(line["step_time_ms"], 360.0)
        self.assertAlmostEqual(line["h2d_ms"], 2.0)
        self.assertEqual(line["device_total_bytes"], 150_754_820_096)
        self.assertEqual(unpack(self.rank_file, "<Q", 96), stats["reserved_bytes.all.current"])
        self.assertEqual(unpack(self.rank_file, "<Q", 112), stats["inactive_split_bytes.all.current"])
        self.assertEqual(unpack(self.rank_file, "<q", 216), 2)

    def test_phase_is_published_without_waiting_for_a_step(self):
        self.recorder.set_phase("eval")
        self.assertTrue(self.recorder.flush(5.0))
        self.assertEqual(unpack(self.rank_file, "<I", 56), 1)
        with self.assertRaises(ValueError):
            self.recorder.set_phase("warmup")

    def test_checkpoint_request_is_seen_and_acknowledged(self):
        self.assertFalse(self.recorder.checkpoints.poll())
        flag = self.rank_file + ".checkpoint"
        with open(flag + ".tmp", "w") as f:
            f.write("3\n")
        os.rename(flag + ".tmp", flag)
        self.assertTrue(self.recorder.flush(5.0), "the publisher did not look at the flag")
        self.assertTrue(self.recorder.checkpoints.poll(), "a request the publisher saw waits for no other look")
        self.recorder.acknowledge_checkpoint()
        self.assertFalse(self.recorder.checkpoints.poll())
        self.assertTrue(self.recorder.flush(5.0))
        self.assertEqual(unpack(self.rank_file, "<Q", 184), 3)

    def test_a_poll_asks_for_the_look_a_later_poll_answers_from(self):
        with open(self.rank_file + ".checkpoint", "w") as f:
            f.write("4\n")
        deadline = time.monotonic() + 5.0
        while not self.recorder.checkpoints.poll():  # heartbeat_s=0: only the polls have the flag looked at
            self.assertLess(time.monotonic(), deadline, "no poll saw the request")
            time.sleep(0.001)

    def test_changes_close_together_are_written_together_and_the_last_soon(self):
        writer, writes = self.recorder._writer, []
        publish = writer.publish
        writer.publish = lambda record: (writes.append(record.step), publish(record))
        start = time.monotonic()
        for n in range(300):  # steps of ~1 ms: at most one write per MIN_CYCLE_S, not two per step
            self.recorder.record(STEP)
            self.recorder.checkpoints.poll()
            time.sleep(0.001)
        elapsed = time.monotonic() - start
        deadline = time.monotonic() + 5.0
        while unpack(self.rank_file, "<Q", 80) != 300:  # the last step, without a flush
            self.assertLess(time.monotonic(), deadline, "the last step was never written")
            time.sleep(0.01)
        self.assertLessEqual(len(writes), elapsed / MIN_CYCLE_S + 3, writes)

    def test_steps_do_not_wake_a_publisher_that_waits_out_its_cycle(self):
        # Each wake-up takes the GIL from the training thread; the kernel counts them as the thread's voluntary
        # context switches.
        publisher = next(t for t in threading.enumerate() if t.name == "fragscope-publisher")

        def wakeups():
            with open(f"/proc/self/task/{publisher.native_id}/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))

        before, start = wakeups(), time.monotonic()
        for _ in range(300):
            self.recorder.record(STEP)
            self.recorder.checkpoints.poll()
            time.sleep(0.001)
        cycles = (time.monotonic() - start) / MIN_CYCLE_S + 3
        self.assertLessEqual(wakeups() - before, 4 * cycles, "woken by steps, not by its cycles")

    def test_garbage_in_the_flag_file_is_no_request(self):
        with open(self.rank_file + ".checkpoint", "w") as f:
            f.write("please\n")
        self.assertTrue(self.recorder.flush(5.0))
        self.assertFalse(self.recorder.checkpoints.poll())

    def test_a_flag_id_outside_the_ack_fields_range_is_no_request(self):
        flag = self.rank_file + ".checkpoint"
        for text, requested in ((str(2 ** 64), False), ("-3", False), ("5", True)):  # each a new size: a new look
            with open(flag, "w") as f:
                f.write(text + "\n")
            self.assertTrue(self.recorder.flush(5.0))
            self.assertEqual(self.recorder.checkpoints.poll(), requested, text)
        self.recorder.acknowledge_checkpoint()
        self.assertTrue(self.recorder.flush(5.0))
        self.assertEqual(unpack(self.rank_file, "<Q", 184), 5)

    def test_a_value_outside_its_fields_range_leaves_the_rank_file_published(self):
        # A float attention mask once summed to a negative token count, which the unsigned field cannot hold.
        self.recorder.record(StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1, samples=2, tokens=-30000))
        self.assertTrue(self.recorder.flush(5.0))
        self.assertEqual((unpack(self.rank_file, "<Q", 80), unpack(self.rank_file, "<Q", 200)), (1, 0))

    def test_heartbeat_refreshes_the_update_time(self):
        recorder = StepRecorder(RankIdentity(rank=7, pid=1234), rank_dir=self.rank_dir, heartbeat_s=0.05)
        path = os.path.join(self.rank_dir, "rank7-pid1234.fsr")
        try:
            first = unpack(path, "<Q", 64)
            time.sleep(0.3)
            self.assertGreater(unpack(path, "<Q", 64), first)
        finally:
            recorder.close()
        self.assertFalse(os.path.exists(path))


class RankIdentityTest(unittest.TestCase):
    def test_a_malformed_rank_variable_falls_back_to_its_default_with_a_notice(self):
        with mock.patch.dict(os.environ, {"RANK": "", "LOCAL_RANK": "one", "WORLD_SIZE": "4"}), \
                self.assertLogs("fragscope", logging.WARNING) as logs:
            identity = RankIdentity.from_env()
        self.assertEqual((identity.rank, identity.local_rank, identity.world_size), (0, 0, 4))
        self.assertEqual(logs.output, ["WARNING:fragscope:fragscope: RANK='' is not an integer: 0 used",
                                       "WARNING:fragscope:fragscope: LOCAL_RANK='one' is not an integer: 0 used"])


class FullDiskTest(unittest.TestCase):
    """A write that fails (the auditor's 16 KiB tmpfs died at step 24 with ENOSPC) turns telemetry off with
    one notice; the steps, the rank file and the training loop go on."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")
        self.ranks = os.path.join(self.tmp.name, "ranks")
        os.mkdir(self.out)
        os.mkdir(self.ranks, 0o700)

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, result, reason):
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertEqual((report["steps"], report["open"], report["published"]), (200, 0, True))
        self.assertGreater(report["lines"], 10, "the lines written before the disk filled up stay")
        self.assertEqual(result.stderr.splitlines(),
                         [f"fragscope: telemetry disabled: {self.out}/steps.jsonl: {reason}"])

    @unittest.skipUnless(can_mount_a_private_tmpfs(), "needs root to mount a tmpfs in a private mount namespace")
    def test_a_full_tmpfs(self):
        script = os.path.join(self.tmp.name, "steps.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(STEPS_ON_A_SMALL_DISK)
        mount_and_run = 'mount -t tmpfs -o size=16k,mode=0700 fragscope-test "$1" && exec "$3" "$4" "$1" "$2"'
        result = subprocess.run(["unshare", "--mount", "sh", "-c", mount_and_run, "sh", self.out, self.ranks,
                                 sys.executable, script], capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, PYTHONPATH=SOURCE_PYTHON))
        self.check(result, "No space left on device")

    def test_a_file_size_limit(self):  # the same failure without root: the kernel refuses the write past RLIMIT_FSIZE
        def limit_file_size():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
            resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))

        result = subprocess.run([sys.executable, "-c", STEPS_ON_A_SMALL_DISK, self.out, self.ranks],
                                capture_output=True, text=True, timeout=60, preexec_fn=limit_file_size,
                                env=dict(os.environ, PYTHONPATH=SOURCE_PYTHON))
        self.check(result, "File too large")


class CheckpointSignalTest(unittest.TestCase):
    def setUp(self):
        self.seen = []
        self.previous = signal.signal(signal.SIGUSR1, lambda signum, frame: self.seen.append("theirs"))

    def tearDown(self):
        signal.signal(signal.SIGUSR1, self.previous)

    def test_the_previous_handler_still_runs_and_is_back_after_close(self):
        theirs = signal.getsignal(signal.SIGUSR1)
        recorder = StepRecorder(RankIdentity(pid=1), heartbeat_s=0, checkpoint_signal=signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertTrue(recorder.checkpoints.poll())
        self.assertEqual(self.seen, ["theirs"])  # e.g. Lightning's SLURM requeue
        recorder.close()
        self.assertIs(signal.getsignal(signal.SIGUSR1), theirs)

    def test_a_handler_installed_later_is_not_replaced_at_close(self):
        recorder = StepRecorder(RankIdentity(pid=1), heartbeat_s=0, checkpoint_signal=signal.SIGUSR1)
        ours = signal.getsignal(signal.SIGUSR1)
        later = signal.signal(signal.SIGUSR1, lambda signum, frame: (self.seen.append("later"), ours(signum, frame)))
        recorder.close()
        self.assertIsNot(signal.getsignal(signal.SIGUSR1), later)
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertEqual(self.seen, ["later", "theirs"])

    def test_a_failed_constructor_leaves_no_rank_file_no_open_file_and_no_thread(self):
        with tempfile.TemporaryDirectory() as tmp:
            ranks, jsonl = os.path.join(tmp, "ranks"), os.path.join(tmp, "out", "steps.jsonl")
            os.mkdir(ranks, 0o700)
            failures = []

            def construct():  # signals can only be caught in the main thread: the recorder fails last
                try:
                    StepRecorder(RankIdentity(pid=1), rank_dir=ranks, telemetry_path=jsonl, heartbeat_s=0.05,
                                 checkpoint_signal=signal.SIGUSR1)
                except ValueError as error:
                    failures.append(error)

            thread = threading.Thread(target=construct)
            thread.start()
            thread.join()
            self.assertEqual(len(failures), 1)
            self.assertEqual(os.listdir(ranks), [])
            self.assertFalse([fd for fd in os.listdir("/proc/self/fd")
                              if os.path.realpath(f"/proc/self/fd/{fd}") == jsonl])
            self.assertFalse([t for t in threading.enumerate() if t.name == "fragscope-publisher"])


STEP = StepSample(data_wait_s=0.01, step_s=0.1, compute_s=0.09)


class StalledRankFolderTest(unittest.TestCase):
    """The training thread does no I/O in the rank folder: a publisher stuck in a store into the rank file or
    in the lstat of the checkpoint flag holds up neither record() nor poll() nor close()."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.rank_file = os.path.join(self.tmp.name, "rank3-pid31.fsr")
        self.recorder = StepRecorder(RankIdentity(rank=3, pid=31), rank_dir=self.tmp.name, heartbeat_s=0.01)
        self.addCleanup(self.recorder.close)
        self.stalled = StalledFileSystem(self)  # its cleanup runs first: the publisher is free before close()

    def stall_the_publisher(self, stalled_call):
        """Stalls the rank folder at `stalled_call` ("publish" or "lstat") and has the publisher walk into it."""
        if stalled_call == "publish":
            writer = self.recorder._writer
            writer.publish = self.stalled.stall(writer.publish)
        else:
            patch = mock.patch.object(RankFolder, "lstat", self.stalled.stall(RankFolder.lstat))
            patch.start()
            self.addCleanup(patch.stop)
        self.recorder.record(STEP)
        self.assertTrue(self.stalled.entered.wait(5.0), "the publisher never reached the stalled call")

    def check_steps_and_polls_go_on(self, stalled_call):
        self.stall_the_publisher(stalled_call)
        slowest = 0.0
        for n in range(200):
            start = time.monotonic()
            self.recorder.record(StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1, samples=n))
            self.assertFalse(self.recorder.checkpoints.poll())
            slowest = max(slowest, time.monotonic() - start)
        self.assertLess(slowest, 0.5, "a step waited for the stalled rank folder")
        self.assertFalse(self.recorder.flush(0.1), "the publisher was not stuck")
        self.stalled.release()
        self.assertTrue(self.recorder.flush(5.0))
        self.assertEqual(unpack(self.rank_file, "<Q", 80), 201, "the last step is published")
        self.assertEqual(unpack(self.rank_file, "<Q", 192), 199)  # its batch_samples

    def test_steps_and_polls_go_on_while_a_store_into_the_rank_file_is_stuck(self):
        self.check_steps_and_polls_go_on("publish")

    def test_steps_and_polls_go_on_while_the_lstat_of_the_flag_is_stuck(self):
        self.check_steps_and_polls_go_on("lstat")

    def test_close_gives_up_on_a_stuck_publisher_which_withdraws_the_file_once_free(self):
        self.stall_the_publisher("publish")
        start = time.monotonic()
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.recorder.close()
        self.assertLess(time.monotonic() - start, 2.0)
        self.assertEqual(logs.output, [f"WARNING:fragscope:fragscope: rank file not removed yet: {self.rank_file}: "
                                       "the rank folder did not answer in 1 s"])
        self.assertTrue(os.path.exists(self.rank_file))
        self.stalled.release()
        self.recorder._publisher.join(5.0)
        self.assertFalse(self.recorder._publisher.is_alive())
        self.assertFalse(os.path.exists(self.rank_file))

    def test_a_child_forked_while_the_publisher_holds_the_lock_does_not_wait_for_it(self):
        held, free = threading.Event(), threading.Event()

        def hold_the_lock():  # as the publisher does for a moment in each cycle
            with self.recorder._lock:
                held.set()
                free.wait(30)

        holder = threading.Thread(target=hold_the_lock, daemon=True)
        holder.start()
        self.assertTrue(held.wait(5.0))
        reading, writing = os.pipe()
        child = os.fork()
        if child == 0:
            try:
                os.close(reading)
                self.recorder.record(STEP)
                requested = self.recorder.checkpoints.poll()
                flushed = self.recorder.flush(1.0)  # no publisher in the child: nothing to wait for
                self.recorder.close()
                os.write(writing, json.dumps({"requested": requested, "flushed": flushed}).encode())
            finally:
                os._exit(0)
        os.close(writing)
        try:
            answered = select.select([reading], [], [], 10.0)[0]
            report = json.loads(os.read(reading, 4096) or b"null") if answered else "no answer: a deadlock"
        finally:
            os.close(reading)
            if not answered:
                os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            free.set()
        self.assertEqual(report, {"requested": False, "flushed": True})
        self.assertTrue(os.path.exists(self.rank_file), "the child's close() left the parent's file alone")
        self.recorder.record(STEP)
        self.assertTrue(self.recorder.flush(5.0))
        self.assertEqual(unpack(self.rank_file, "<Q", 80), 1)


if __name__ == "__main__":
    unittest.main()
