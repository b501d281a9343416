"""The hook in a rank folder other users can write (issue 16, item 2): it never blocks on a special
file, never reads an unbounded file, never follows a planted link, never touches another user's
file and never raises into the training job it observes."""

import contextlib
import json
import logging
import os
import stat
import subprocess
import tempfile
import threading
import time
import tracemalloc
import unittest

from fragscope import background_writer, shm
from fragscope.recorder import RankIdentity, StepRecorder, StepSample

SOURCE = os.environ.get("FRAGSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
OTHER_UID = 65534  # nobody
AGENT_UID = 2001  # the agent's user and group (numeric ids need no name)
STRANGER_UID = 2002  # a user in neither this test's group nor the agent's
SYSTEM_PYTHON = "/usr/bin/python3"  # an interpreter any user may run (the test's own may sit under /root)


def as_other_user(uid=OTHER_UID, umask=-1):
    """subprocess arguments that run [SYSTEM_PYTHON, "-c", code] as `uid` (its gid the same) with the hook
    on its path."""
    env = {"PYTHONPATH": os.path.join(os.path.abspath(SOURCE), "python"), "PATH": "/usr/bin:/bin"}
    return dict(user=uid, group=uid, extra_groups=[], umask=umask, env=env, text=True)


def run_as_other_user(code, cwd, **user):
    """Runs `code` as another user (uid 65534 unless told otherwise); returns the CompletedProcess."""
    return subprocess.run([SYSTEM_PYTHON, "-c", code], cwd=cwd, capture_output=True, timeout=30,
                          **as_other_user(**user))


def read_attempt(path):
    """Code that prints whether its user may open `path` for reading."""
    return (f"try:\n    open({path!r}, 'rb').close(); print('allowed')\n"
            "except PermissionError:\n    print('denied')\n")


# Publishes a rank file under the root in argv[1], prints [its path, the notices], holds it until stdin closes.
PUBLISH = (
    "import io, json, logging, sys\n"
    "from fragscope.recorder import RankIdentity, StepRecorder\n"
    "seen = io.StringIO()\n"
    "logging.getLogger('fragscope').addHandler(logging.StreamHandler(seen))\n"
    "recorder = StepRecorder(RankIdentity(rank=1, pid=777), rank_dir=sys.argv[1], heartbeat_s=0)\n"
    "print(json.dumps([recorder._writer.path, seen.getvalue()]), flush=True)\n"
    "sys.stdin.read()\n"
    "recorder.close()\n")


@contextlib.contextmanager
def process_umask(mask):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def finishes_within(seconds, work, unblock):
    """Runs work() on a thread; True when it returned in time. unblock() frees a stuck thread."""
    done = threading.Event()
    thread = threading.Thread(target=lambda: (work(), done.set()), daemon=True)
    thread.start()
    finished = done.wait(seconds)
    if not finished:
        unblock()
        thread.join(5)
    return finished


def open_fifo_other_end(path):
    with open(os.open(path, os.O_RDWR | os.O_NONBLOCK), "wb", closefd=True):
        pass


needs_root = unittest.skipUnless(os.geteuid() == 0 and os.path.exists(SYSTEM_PYTHON),
                                 "needs root to act as a second user")


class HostileFolderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        os.chmod(self.tmp.name, 0o755)  # lets the second user reach the folders below
        self.rank_dir = os.path.join(self.tmp.name, "ranks")
        os.mkdir(self.rank_dir, 0o700)
        self.recorders = []

    def tearDown(self):
        for recorder in self.recorders:
            recorder.close()
        background_writer.flush(5.0)  # their files are written before the folder goes
        self.tmp.cleanup()

    def recorder(self, rank_dir=None, **identity):
        identity.setdefault("pid", 4242)
        recorder = StepRecorder(RankIdentity(**identity), rank_dir=rank_dir or self.rank_dir, heartbeat_s=0)
        self.recorders.append(recorder)
        return recorder

    def flag_path(self, recorder):
        return recorder.checkpoints.flag_path

    def looked_at_flag(self, recorder):
        """Whether the publisher thread, which looks at the checkpoint flag, went through a cycle in time."""
        return recorder.flush(5.0)

    # -- (a) the checkpoint flag ---------------------------------------------------------------
    def test_fifo_as_checkpoint_flag_does_not_block_the_step(self):
        recorder = self.recorder()
        os.mkfifo(self.flag_path(recorder))
        looked = []
        finished = finishes_within(2.0, lambda: looked.append(self.looked_at_flag(recorder)),
                                   lambda: open_fifo_other_end(self.flag_path(recorder)))
        self.assertTrue(finished and looked == [True], "the look at the flag blocked on a FIFO planted there")
        self.assertFalse(recorder.checkpoints.poll())

    def test_huge_sparse_flag_is_not_read(self):
        recorder = self.recorder()
        with open(self.flag_path(recorder), "wb") as f:
            f.truncate(300 * 2 ** 20)  # 300 MiB of holes
        tracemalloc.start()
        start = time.perf_counter()
        self.assertTrue(self.looked_at_flag(recorder))
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        self.assertFalse(recorder.checkpoints.poll())
        # The peak below shows it was not read; the time bound leaves room for a loaded CI machine.
        self.assertLess(seconds, 0.25, "a 300 MiB flag file cost the publisher this long")
        self.assertLess(peak, 1 << 20, "bytes allocated to read a 300 MiB flag file")

    def test_symlink_as_checkpoint_flag_is_not_followed(self):
        recorder = self.recorder()
        target = os.path.join(self.tmp.name, "elsewhere")
        with open(target, "w") as f:
            f.write("5\n")
        os.symlink(target, self.flag_path(recorder))
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.assertTrue(self.looked_at_flag(recorder))
            self.assertFalse(recorder.checkpoints.poll())
        self.assertIn("symbolic link", "\n".join(logs.output))

    @needs_root
    def test_flag_owned_by_another_user_is_ignored(self):
        recorder = self.recorder()
        with open(self.flag_path(recorder), "w") as f:
            f.write("7\n")
        os.chown(self.flag_path(recorder), OTHER_UID, OTHER_UID)
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.assertTrue(self.looked_at_flag(recorder))
            self.assertFalse(recorder.checkpoints.poll())
        self.assertIn(f"owned by uid {OTHER_UID}", "\n".join(logs.output))

    def test_warnings_are_rate_limited(self):
        recorder = self.recorder()
        os.symlink("/dev/null", self.flag_path(recorder))
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            for _ in range(3):
                os.utime(self.flag_path(recorder), ns=(time.time_ns(), time.time_ns()), follow_symlinks=False)
                self.assertTrue(self.looked_at_flag(recorder))
                time.sleep(0.01)
        self.assertEqual(len(logs.output), 1, logs.output)

    # -- (b) the rank file ---------------------------------------------------------------------
    def test_planted_symlink_at_the_temporary_name_is_not_followed(self):
        victim = os.path.join(self.tmp.name, "victim.txt")
        with open(victim, "w") as f:
            f.write("another user's data\n")
        os.symlink(victim, os.path.join(self.rank_dir, shm.rank_file_name(3, 4242) + ".tmp"))
        recorder = self.recorder(rank=3)
        with open(victim) as f:
            self.assertEqual(f.read(), "another user's data\n")
        info = os.lstat(recorder._writer.path)
        self.assertTrue(stat.S_ISREG(info.st_mode))
        self.assertEqual(info.st_size, shm.SIZE)

    def test_rank_file_is_private_to_its_user(self):
        recorder = self.recorder()
        mode = stat.S_IMODE(os.stat(recorder._writer.path).st_mode)
        self.assertEqual(mode, 0o600)

    def test_undecodable_job_name_does_not_raise(self):
        # An environment variable with invalid UTF-8 arrives as a lone surrogate.
        recorder = self.recorder(job="llama\udcff")
        recorder.record(StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1))
        self.assertTrue(recorder.flush(5.0))
        with open(recorder._writer.path, "rb") as f:
            self.assertEqual(f.read()[296:360].rstrip(b"\0"), b"llama?")

    # -- (c) the folder ------------------------------------------------------------------------
    def test_unusable_rank_folder_disables_publishing_without_raising(self):
        blocker = os.path.join(self.tmp.name, "a-file")
        open(blocker, "w").close()
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            recorder = self.recorder(rank_dir=os.path.join(blocker, "ranks"))
            line = recorder.record(StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1))
        self.assertEqual(line["step"], 0)
        self.assertEqual(len(logs.output), 1, logs.output)
        self.assertIn("rank file disabled", logs.output[0])

    def test_fifo_as_telemetry_file_does_not_block(self):
        jsonl = os.path.join(self.tmp.name, "steps.jsonl")
        os.mkfifo(jsonl)
        made = []

        def record_a_step():  # the writer thread opens steps.jsonl: neither it nor the caller may block there
            made.append(StepRecorder(RankIdentity(pid=1), telemetry_path=jsonl, heartbeat_s=0))
            made[0].record(StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1))
            background_writer.flush(10.0)

        with self.assertLogs("fragscope", logging.WARNING) as logs:
            finished = finishes_within(2.0, record_a_step, lambda: open_fifo_other_end(jsonl))
        self.recorders.extend(made)
        self.assertTrue(finished, "opening a FIFO as steps.jsonl blocked")
        self.assertIn(f"telemetry disabled: {jsonl}: is not a regular file", logs.output[0])

    @needs_root
    def test_missing_shared_folder_is_created_sticky_and_every_user_publishes(self):
        root = os.path.join(self.tmp.name, "shm", "fragscope")
        mine = self.recorder(rank_dir=root, rank=0)
        self.assertEqual(stat.S_IMODE(os.stat(root).st_mode), 0o1777)
        theirs = run_as_other_user(
            "import sys\nfrom fragscope.recorder import *\n"
            f"r = StepRecorder(RankIdentity(rank=1, pid=777), rank_dir={root!r}, heartbeat_s=0)\n"
            "r.record(StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1))\n"
            "print(r._writer.path)\n", cwd=self.tmp.name)
        self.assertEqual(theirs.returncode, 0, theirs.stderr)
        self.assertEqual(theirs.stdout.strip(), os.path.join(root, str(OTHER_UID), "rank1-pid777.fsr"))
        own_folder = os.path.dirname(mine._writer.path)
        self.assertEqual(own_folder, os.path.join(root, str(os.geteuid())))
        info = os.lstat(own_folder)
        self.assertEqual((stat.S_IMODE(info.st_mode), info.st_uid), (0o700, os.geteuid()))

    @needs_root
    def test_second_user_cannot_read_or_replace_the_rank_file(self):
        root = os.path.join(self.tmp.name, "shm", "fragscope")
        mine = self.recorder(rank_dir=root, rank=0)
        attempt = run_as_other_user(
            "import os\n"
            f"path = {mine._writer.path!r}\n"
            "for action in (lambda: open(path, 'rb'), lambda: os.rename(path, path + '.x'),\n"
            "               lambda: os.symlink('/etc/passwd', path + '.tmp')):\n"
            "    try:\n        action(); print('allowed')\n"
            "    except PermissionError:\n        print('denied')\n", cwd=self.tmp.name)
        self.assertEqual(attempt.stdout.split(), ["denied"] * 3, attempt.stderr)

    @needs_root
    def test_subfolder_squatted_by_another_user_is_refused(self):
        root = os.path.join(self.tmp.name, "shared")
        os.mkdir(root)
        os.chmod(root, 0o1777)
        squat = os.path.join(root, str(os.geteuid()))
        os.mkdir(squat, 0o777)
        os.chown(squat, OTHER_UID, OTHER_UID)
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            recorder = self.recorder(rank_dir=root)
            recorder.record(StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1))
        self.assertEqual(os.listdir(squat), [])
        self.assertIn(f"owned by uid {OTHER_UID}", logs.output[0])

    # -- (d) the agent's group -----------------------------------------------------------------
    def shared_root(self, owner, group):
        """A shared root 03777 (set-group-ID) owned by `owner` in `group`, as the DaemonSet makes it."""
        root = os.path.join(self.tmp.name, "shared")
        os.mkdir(root)
        os.chown(root, owner, group)
        os.chmod(root, 0o3777)  # after chown, which clears the set-group-ID bit
        return root

    @contextlib.contextmanager
    def publishing_as_other_user(self, root, umask):
        """Yields (rank file path, notices) of a recorder that uid 65534 holds open under `root`."""
        with subprocess.Popen([SYSTEM_PYTHON, "-c", PUBLISH, root], cwd=self.tmp.name, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, **as_other_user(umask=umask)) as other:
            try:
                line = other.stdout.readline()
                self.assertTrue(line, "the publisher failed")
                yield json.loads(line)
            finally:
                other.stdin.close()
                other.wait(30)

    @needs_root
    def test_the_group_of_another_users_set_group_id_root_reads_nothing(self):
        root = self.shared_root(OTHER_UID, OTHER_UID)  # its owner chose the group: their own
        mine = self.recorder(rank_dir=root)
        own_folder = os.path.dirname(mine._writer.path)
        self.assertEqual(stat.S_IMODE(os.stat(own_folder).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(mine._writer.path).st_mode), 0o600)
        attempt = run_as_other_user(read_attempt(mine._writer.path), cwd=self.tmp.name)
        self.assertEqual(attempt.stdout.split(), ["denied"], attempt.stderr)

    def test_a_umask_of_077_still_gives_the_roots_group_its_access(self):
        root = self.shared_root(os.geteuid(), os.getegid())  # this user's own root: its group is this user's choice
        with process_umask(0o077):
            mine = self.recorder(rank_dir=root)
        own_folder, rank_file = os.stat(os.path.dirname(mine._writer.path)), os.stat(mine._writer.path)
        self.assertEqual((stat.S_IMODE(own_folder.st_mode), own_folder.st_gid), (0o2750, os.getegid()))
        self.assertEqual((stat.S_IMODE(rank_file.st_mode), rank_file.st_gid), (0o640, os.getegid()))

    @needs_root
    def test_the_agents_group_reads_the_rank_file_of_a_user_outside_it(self):
        root = self.shared_root(0, AGENT_UID)
        with self.publishing_as_other_user(root, umask=0o022) as (path, notices):
            self.assertEqual(notices, "")
            for uid, expected in ((AGENT_UID, "allowed"), (STRANGER_UID, "denied")):
                attempt = run_as_other_user(read_attempt(path), cwd=self.tmp.name, uid=uid)
                self.assertEqual(attempt.stdout.split(), [expected], (uid, attempt.stderr))

    @needs_root
    def test_a_user_outside_the_agents_group_with_umask_077_publishes_privately_and_says_so(self):
        # Only root or a member of the group can chmod the folder 02750: the kernel drops the bit for anyone else,
        # and rank files would then take the user's group instead of the agent's.
        root = self.shared_root(0, AGENT_UID)
        with self.publishing_as_other_user(root, umask=0o077) as (path, notices):
            self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode), 0o700)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
            self.assertIn(f"rank files private: {os.path.dirname(path)}: only root or a member", notices)


if __name__ == "__main__":
    unittest.main()
