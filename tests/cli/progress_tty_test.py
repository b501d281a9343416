"""The progress bar as a person at a terminal sees it (src/cli/progress_bar.h).

fragscope runs with stderr on a pseudo-terminal (Python's pty), as in an interactive shell, and
stdout on a pipe. On the terminal: one line per phase (what is being done, the bar, the share of
how much, an ETA on long phases), redrawn in place and erased before the report. On a pipe, or
with --quiet, stderr stays empty. The report on stdout is the same in every case.
"""
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
import threading
import unittest

BIN = os.environ["FRAGSCOPE_BIN"]
FIXTURES = os.environ["FRAGSCOPE_FIXTURES_DIR"]
BIG = "big/snapshot.pickle.zst"  # 104.78 MiB of pickle, 1.13 M trace events; run in FIXTURES
# The one-thread reader: reading then takes long enough (> 0.1 s) to be drawn on any machine.
ENV = dict(os.environ, FRAGSCOPE_READER_PARTS="1", FRAGSCOPE_PROGRESS_AFTER_MS="0")  # every task draws, however fast
BAR = r" \[[# ]{16}\] +\d+% of "


def run(args, stderr_on_tty=True):
    """Runs fragscope ARGS in the fixtures folder; returns (exit status, stdout, stderr bytes)."""
    if not stderr_on_tty:
        done = subprocess.run([BIN, *args], cwd=FIXTURES, env=ENV, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=240)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # 160 columns
    proc = subprocess.Popen([BIN, *args], cwd=FIXTURES, env=ENV, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    tty = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last holder of the terminal's other end is gone
                return
            if not chunk:
                return
            tty.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    out, _ = proc.communicate(timeout=240)
    reader.join(timeout=30)
    os.close(master)
    return proc.returncode, out, bytes(tty)


def drawn_lines(tty):
    """Every state of the line: the text between carriage returns, less the erase sequence."""
    text = tty.decode("utf-8")
    return [part.replace("\x1b[K", "") for part in text.split("\r") if part.replace("\x1b[K", "").strip()]


class ProgressOnATerminal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.whatif = ["whatif", BIG, "--min-capacity", "--threads", "2", "--json"]
        cls.tty_run = run(cls.whatif)
        cls.pipe_run = run(cls.whatif, stderr_on_tty=False)

    def test_every_phase_of_a_long_whatif_is_drawn(self):
        status, out, tty = self.tty_run
        self.assertEqual(status, 0)
        lines = drawn_lines(tty)
        self.assertTrue(lines, "nothing drawn on the terminal")
        self.assertTrue(any(re.fullmatch(re.escape("reading " + BIG) + BAR + r"104\.78 MiB", l) for l in lines),
                        lines[:5])
        self.assertTrue(any(re.fullmatch(r"what-if: \d+ configs, no memory limit" + BAR + r"[\d.]+[kMG]? events"
                                         r"(, ETA \d+s)?", l) for l in lines), lines)
        bisecting = [l for l in lines if l.startswith("what-if: least capacity of ")]
        self.assertTrue(bisecting, lines[-5:])
        for line in bisecting:
            self.assertRegex(line, r"^what-if: least capacity of \d+ configs" + BAR +
                             r"[\d.]+[kMG]? events(, ETA \d+s)?$")
        self.assertTrue(any(", ETA " in l for l in bisecting), "no ETA on a phase of several seconds")
        shares = [int(re.search(r"(\d+)% of", l).group(1)) for l in bisecting]
        self.assertEqual(shares, sorted(shares), "the share went backwards")

    def test_the_line_is_erased_before_the_report(self):
        _, _, tty = self.tty_run
        self.assertTrue(tty.endswith(b"\r\x1b[K"), tty[-80:])

    def test_nothing_on_a_pipe_and_the_same_report(self):
        status, out, err = self.pipe_run
        self.assertEqual(status, 0)
        self.assertEqual(err, b"")
        self.assertEqual(json.loads(out), json.loads(self.tty_run[1]))

    def test_quiet_silences_it(self):
        sweep = ["whatif", BIG, "--threads", "2", "--json"]  # a second or more of replays
        _, expected, _ = run(sweep, stderr_on_tty=False)
        self.assertTrue(drawn_lines(run(sweep)[2]), "without --quiet the sweep draws")  # not vacuous
        for args in (["--quiet", *sweep], [*sweep, "-q"]):
            with self.subTest(args=args):
                status, out, tty = run(args)
                self.assertEqual(status, 0)
                self.assertEqual(tty, b"")
                self.assertEqual(json.loads(out), json.loads(expected))

    def test_doctor_and_replay_draw_their_phases(self):
        _, _, tty = run(["doctor", "big", "--threads", "2", "--json"])
        self.assertTrue(any(l.startswith("what-if: ") for l in drawn_lines(tty)), drawn_lines(tty))
        _, _, tty = run(["replay", BIG, "--json"])
        lines = drawn_lines(tty)
        self.assertTrue(any(l.startswith("reading " + BIG) or l.startswith("replaying " + BIG) for l in lines), lines)

    def test_an_error_leaves_one_clean_line(self):
        status, out, tty = run(["replay", "no/such/snapshot.pickle"])
        self.assertEqual(status, 2)
        self.assertEqual(tty.decode().replace("\r\n", "\n"),
                         "fragscope: error: no/such/snapshot.pickle: cannot open: No such file or directory\n")


if __name__ == "__main__":
    unittest.main()
