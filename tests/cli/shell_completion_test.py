"""The generated completions (fragscope completion bash|zsh) in real interactive shells.

bash and zsh run on a pseudo-terminal (Python's pty) as a person's shell does; the test types a
partial command line and a TAB, and reads what the shell put on the line. The scripts are also
checked against `fragscope CMD --help`: every command and every flag it lists can be completed.
"""
import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import tempfile
import termios
import time
import unittest

BIN = os.environ["FRAGSCOPE_BIN"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]|[\x07\x08]")


def fragscope(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, check=True).stdout


def help_commands():
    text = fragscope("--help")
    section = text.split("Subcommands:\n")[1].split("\n\n")[0]
    return [line.split()[0] for line in section.splitlines() if line.strip()]


def help_flags(command):
    return sorted(set(re.findall(r"(?m)^  (?:-\w,)?(--[a-z][a-z0-9-]*)", fragscope(command, "--help"))))


class Shell:
    """An interactive shell on a pseudo-terminal."""

    def __init__(self, argv, env, cwd):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                     start_new_session=True)
        os.close(slave)

    def read(self, seconds, until=None, seen=""):
        """What the shell writes within `seconds`, escape sequences removed; stops early once
        `until` shows in `seen` and what was read."""
        out = b""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    out += os.read(self.master, 65536)
                except OSError:
                    break
                if until is not None and until in seen + ANSI.sub("", out.decode("utf-8", "replace")):
                    break
        return ANSI.sub("", out.decode("utf-8", "replace"))

    def type(self, text, seconds=1.0):
        os.write(self.master, text.encode())
        return self.read(seconds)

    def complete(self, line, expected):
        """Types `line` and a TAB; returns what the shell showed (once `expected` shows, or after
        5 s), then clears the line."""
        echoed = self.type(line, 0.2)
        os.write(self.master, b"\t")
        shown = echoed + self.read(5.0, until=expected, seen=echoed)
        self.type("\x15", 0.2)  # Ctrl-U: an empty line for the next case
        return shown

    def close(self):
        self.proc.kill()
        self.proc.wait()
        os.close(self.master)


class CompletionCases:
    """The same cases in both shells (set up by the subclasses)."""

    def assert_completes(self, typed, expected):
        shown = self.shell.complete(typed, expected)
        self.assertIn(expected, shown, f"{typed!r} + TAB showed {shown!r}")

    def test_commands(self):
        self.assert_completes("fragscope doc", "fragscope doctor")
        self.assert_completes("fragscope wha", "fragscope whatif")

    def test_flags_of_the_command(self):
        self.assert_completes("fragscope replay --capa", "--capacity")
        self.assert_completes("fragscope whatif x --min-", "--min-capacity")
        self.assert_completes("fragscope analyze --map", "--map-rows")

    def test_values_from_the_definitions(self):
        self.assert_completes("fragscope replay x --gpu A100-4", "A100-40GB")
        self.assert_completes("fragscope whatif x --alloc-conf expa", "expandable_segments")

    def test_files_for_paths(self):
        self.assert_completes("fragscope analyze snap", "snapshot_rank0.pickle")

    def test_hidden_commands_still_complete_their_argument(self):
        self.assert_completes("fragscope completion z", "zsh")


class BashCompletion(CompletionCases, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        open(os.path.join(cls.dir, "snapshot_rank0.pickle"), "w").close()
        script = os.path.join(cls.dir, "fragscope.bash")
        with open(script, "w") as f:
            f.write(fragscope("completion", "bash"))
        env = {"PATH": os.path.dirname(BIN) + ":/usr/bin:/bin", "HOME": cls.dir, "TERM": "dumb", "PS1": "$ "}
        cls.shell = Shell(["bash", "--norc", "--noprofile", "-i"], env, cls.dir)
        cls.shell.type(f"source {script}\n", 1.0)

    @classmethod
    def tearDownClass(cls):
        cls.shell.close()
        shutil.rmtree(cls.dir)


@unittest.skipUnless(shutil.which("zsh"), "zsh is not installed (scripts/install-deps.sh installs it)")
class ZshCompletion(CompletionCases, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        open(os.path.join(cls.dir, "snapshot_rank0.pickle"), "w").close()
        functions = os.path.join(cls.dir, "functions")
        os.mkdir(functions)
        with open(os.path.join(functions, "_fragscope"), "w") as f:
            f.write(fragscope("completion", "zsh"))
        env = {"PATH": os.path.dirname(BIN) + ":/usr/bin:/bin", "HOME": cls.dir, "TERM": "dumb"}
        cls.shell = Shell(["zsh", "-f", "-i"], env, cls.dir)
        cls.shell.type(f"PROMPT='%% '; fpath=({functions} $fpath); autoload -U compinit; compinit -u -D\n", 2.0)

    @classmethod
    def tearDownClass(cls):
        cls.shell.close()
        shutil.rmtree(cls.dir)


class ScriptsCoverTheCli(unittest.TestCase):
    """Generated from the definitions: every command and flag that --help lists is offered."""

    def test_every_command_and_flag(self):
        bash, zsh = fragscope("completion", "bash"), fragscope("completion", "zsh")
        commands = help_commands()
        self.assertGreaterEqual(len(commands), 7)
        for command in commands:
            self.assertRegex(bash, rf"(?m)^    {command}\)$")
            self.assertIn(f"'{command}:", zsh)
            for flag in help_flags(command):
                self.assertRegex(bash, rf"{re.escape(flag)}[ \"]", f"bash: {command} {flag}")
                self.assertIn(flag, zsh, f"zsh: {command} {flag}")

    def test_scripts_parse(self):
        for shell, script in (("bash", "bash"), ("zsh", "zsh")):
            if not shutil.which(shell):
                continue
            with self.subTest(shell=shell):
                check = subprocess.run([shell, "-n"], input=fragscope("completion", script), text=True,
                                       capture_output=True)
                self.assertEqual(check.returncode, 0, check.stderr)
                self.assertEqual(check.stderr, "")


if __name__ == "__main__":
    unittest.main()
