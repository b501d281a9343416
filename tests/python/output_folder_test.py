"""A rank's output folder (`<out>/rank<R>/`, steps.jsonl here; the OOM dump in oom_dump_test.py) under
a path other users can reach: the hook writes only into a folder of its user's that nobody else can
write, never through a link, and leaves what it writes readable by its user alone."""

import logging
import os
import stat
import tempfile
import unittest

from fragscope import background_writer
from fragscope.recorder import RankIdentity, StepRecorder, StepSample
from hostile_folder_test import OTHER_UID, needs_root, process_umask, read_attempt, run_as_other_user

STEP = StepSample(data_wait_s=0.0, step_s=0.1, compute_s=0.1)
VICTIM_TEXT = "export PATH=/usr/bin\n"


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


class OutputFolderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        os.chmod(self.tmp.name, 0o755)  # lets the second user reach the folders below
        self.public = os.path.join(self.tmp.name, "public")  # like /tmp: anyone creates, only owners remove
        os.mkdir(self.public)
        os.chmod(self.public, 0o1777)
        self.victim = os.path.join(self.tmp.name, "bashrc")  # the user's own file an attacker aims at
        with open(self.victim, "w") as f:
            f.write(VICTIM_TEXT)
        self.recorders = []

    def tearDown(self):
        for recorder in self.recorders:
            recorder.close()
        background_writer.flush(5.0)  # their files are written before the folder goes
        self.tmp.cleanup()

    def record_a_step(self, jsonl):
        recorder = StepRecorder(RankIdentity(pid=1), telemetry_path=jsonl, heartbeat_s=0)
        self.recorders.append(recorder)
        recorder.record(STEP)
        self.assertTrue(background_writer.flush(5.0), "the writer thread did not write the line")
        return recorder

    def assert_victim_untouched(self):
        with open(self.victim) as f:
            self.assertEqual(f.read(), VICTIM_TEXT)

    def test_a_link_at_steps_jsonl_is_not_followed(self):
        folder = os.path.join(self.tmp.name, "out", "rank0")
        os.makedirs(folder)
        os.symlink(self.victim, os.path.join(folder, "steps.jsonl"))
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.record_a_step(os.path.join(folder, "steps.jsonl"))
        self.assertEqual(logs.output, [f"WARNING:fragscope:fragscope: telemetry disabled: {folder}/steps.jsonl: "
                                       "is a symbolic link"])
        self.assert_victim_untouched()

    def test_a_folder_others_can_write_is_refused(self):
        folder = os.path.join(self.tmp.name, "out", "rank0")
        os.makedirs(folder)
        os.chmod(folder, 0o777)
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.record_a_step(os.path.join(folder, "steps.jsonl"))
        self.assertIn(f"telemetry disabled: {folder}: can be written by anyone", logs.output[0])
        self.assertEqual(os.listdir(folder), [])

    def test_a_folder_its_project_group_can_write_is_used(self):
        folder = os.path.join(self.tmp.name, "project", "rank0")
        os.makedirs(folder)
        os.chmod(folder, 0o2770)  # a cluster's shared project folder (umask 002, set-group-ID)
        self.record_a_step(os.path.join(folder, "steps.jsonl"))
        self.assertEqual(os.listdir(folder), ["steps.jsonl"])
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(folder, "steps.jsonl")).st_mode), 0o600)

    def test_a_hard_link_at_steps_jsonl_is_not_appended_to(self):
        # A project-group member links the user's group-writable file (theirs to link, since they may write it).
        folder = os.path.join(self.tmp.name, "project", "rank0")
        os.makedirs(folder)
        os.chmod(folder, 0o2770)
        os.chmod(self.victim, 0o660)
        os.link(self.victim, os.path.join(folder, "steps.jsonl"))
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.record_a_step(os.path.join(folder, "steps.jsonl"))
        self.assertEqual(logs.output, [f"WARNING:fragscope:fragscope: telemetry disabled: {folder}/steps.jsonl: "
                                       "has 2 hard links, not 1"])
        self.assert_victim_untouched()
        self.assertEqual(mode(self.victim), 0o660)

    def test_created_folders_are_0700_and_steps_jsonl_0600(self):
        out = os.path.join(self.tmp.name, "runs", "7")
        with process_umask(0o022):
            self.record_a_step(os.path.join(out, "rank0", "steps.jsonl"))
        created = [os.path.join(self.tmp.name, "runs"), out, os.path.join(out, "rank0")]
        self.assertEqual([mode(folder) for folder in created], [0o700] * 3)
        self.assertEqual(mode(os.path.join(out, "rank0", "steps.jsonl")), 0o600)

    def test_an_older_hooks_readable_steps_jsonl_is_made_private_and_appended_to(self):
        folder = os.path.join(self.tmp.name, "rank0")
        os.mkdir(folder, 0o755)
        jsonl = os.path.join(folder, "steps.jsonl")
        with open(jsonl, "w") as f:
            f.write('{"step": 0}\n')
        os.chmod(jsonl, 0o644)
        self.record_a_step(jsonl)
        self.assertEqual(mode(jsonl), 0o600)
        with open(jsonl) as f:
            self.assertEqual(len(f.readlines()), 2)

    @needs_root
    def test_a_folder_another_user_made_is_refused(self):
        # The audit's case: another user made the folder, world-writable, with steps.jsonl a link to the victim's file.
        folder = os.path.join(self.public, "shared", "rank0")
        planted = run_as_other_user(f"import os\nos.makedirs({folder!r})\nos.chmod({folder!r}, 0o777)\n"
                                    f"os.symlink({self.victim!r}, {folder!r} + '/steps.jsonl')\n", cwd=self.tmp.name)
        self.assertEqual(planted.returncode, 0, planted.stderr)
        with self.assertLogs("fragscope", logging.WARNING) as logs:
            self.record_a_step(os.path.join(folder, "steps.jsonl"))
        self.assertIn(f"telemetry disabled: {folder}: is owned by uid {OTHER_UID}, not by this user", logs.output[0])
        self.assert_victim_untouched()

    @needs_root
    def test_in_a_parent_another_user_made_the_rank_folder_is_private(self):
        out = os.path.join(self.public, "shared")
        planted = run_as_other_user(f"import os\nos.mkdir({out!r}, 0o777)\nos.chmod({out!r}, 0o777)\n",
                                    cwd=self.tmp.name)
        self.assertEqual(planted.returncode, 0, planted.stderr)
        jsonl = os.path.join(out, "rank0", "steps.jsonl")
        self.record_a_step(jsonl)
        self.assertEqual((mode(os.path.dirname(jsonl)), mode(jsonl)), (0o700, 0o600))
        attempt = run_as_other_user(read_attempt(jsonl), cwd=self.tmp.name)
        self.assertEqual(attempt.stdout.split(), ["denied"], attempt.stderr)


if __name__ == "__main__":
    unittest.main()
