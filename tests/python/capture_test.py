"""Capture without code changes, the parts that run without torch: the import hook, the step clock,
`python -m fragscope.run` (arguments, the environment, a child and a grandchild armed, a shadowed
sitecustomize still run) and the lazy imports of the package and its integrations.

torch is not installed where this runs. One test puts a stand-in `torch` package (nothing but a
`cuda._lazy_call` that records its argument) first on the child's path, to show that the child's
first `import torch` queues the capture on CUDA's lazy initialisation. What the capture does once
CUDA starts is checked on a GPU by bench/hook/h200_hook_check.py, its stop and a forked child's exit
with a fuller stand-in by hook_robustness_test.py.
"""

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

from fragscope import capture, import_hook, run
from fragscope.step_clock import StepClock

SOURCE_PYTHON = os.path.join(os.path.abspath(os.environ.get("FRAGSCOPE_SOURCE_DIR", ".")), "python")
REPORT = textwrap.dedent("""
    import json, os, sys
    from fragscope import import_hook
    print(json.dumps({"capture": "fragscope.capture" in sys.modules, "waiting_for": import_hook.waiting_for(),
                      "env": {k: v for k, v in os.environ.items() if k.startswith("FRAGSCOPE_")}}))
""")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(text))


class ImportHookTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        sys.path.insert(0, self.tmp.name)

    def tearDown(self):
        sys.path.remove(self.tmp.name)
        self.tmp.cleanup()

    def test_callback_runs_once_after_the_module_body(self):
        write(os.path.join(self.tmp.name, "fragscope_probe_a.py"), "VALUE = 42\n")
        seen = []
        import_hook.when_imported("fragscope_probe_a", lambda module: seen.append(module.VALUE))
        self.assertIn("fragscope_probe_a", import_hook.waiting_for())
        import fragscope_probe_a
        self.assertEqual(seen, [fragscope_probe_a.VALUE])
        self.assertNotIn("fragscope_probe_a", import_hook.waiting_for())
        import_hook.when_imported("fragscope_probe_a", lambda module: seen.append("at once"))
        self.assertEqual(seen, [42, "at once"])

    def test_a_failing_callback_does_not_fail_the_import(self):
        write(os.path.join(self.tmp.name, "fragscope_probe_b.py"), "VALUE = 7\n")
        import_hook.when_imported("fragscope_probe_b", lambda module: 1 / 0)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            import fragscope_probe_b
        self.assertEqual(fragscope_probe_b.VALUE, 7)
        self.assertEqual(stderr.getvalue(),
                         "fragscope: after importing fragscope_probe_b: ZeroDivisionError: division by zero\n")


class StepClockTest(unittest.TestCase):
    def clock(self, *times):
        ticks = iter(times)
        return StepClock(now=lambda: next(ticks))

    def test_reported_waits_are_the_wait_and_the_step_runs_end_to_end(self):
        clock = self.clock(10.0, 11.0, 11.5, 13.0, 13.5)
        self.assertEqual(clock.end(), (0.0, 0.0))         # first end at 10: nothing to measure from
        clock.add_wait(0.25)
        clock.add_wait(0.5)
        clock.begin()                                     # 11.0
        self.assertEqual(clock.end(), (0.75, 1.5))        # 11.5 - 10.0
        clock.begin()                                     # 13.0, no waits reported
        self.assertEqual(clock.end(), (1.5, 2.0))         # begin - last end; 13.5 - 11.5

    def test_the_first_step_counts_from_its_begin(self):
        clock = self.clock(1.0, 1.25)
        clock.begin()
        self.assertEqual(clock.end(), (0.0, 0.25))

    def test_restart_drops_waits_and_time_before_it(self):
        clock = self.clock(0.0, 5.0, 5.5)
        clock.end()                                       # 0.0
        clock.add_wait(3.0)                               # an eval loader's waits
        clock.restart()                                   # 5.0: the eval is over
        self.assertEqual(clock.end(), (0.0, 0.5))


class RunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_arguments(self):
        args = run.parse_args(["--out", "o", "--history-entries", "0", "--", "torchrun", "train.py", "--out", "x"])
        self.assertEqual((args.out, args.history_entries), ("o", 0))
        self.assertEqual(args.command, ["torchrun", "train.py", "--out", "x"])
        self.assertEqual(run.parse_args(["python", "train.py", "-v"]).command, ["python", "train.py", "-v"])
        for bad in ([], ["--history-entries", "-1", "--", "x"], ["--stacks", "cpp", "--", "x"]):
            with self.assertRaises(SystemExit) as exit_, contextlib.redirect_stderr(io.StringIO()):
                run.parse_args(bad)
            self.assertEqual(exit_.exception.code, 2, bad)

    def test_environment_keeps_the_existing_path_after_the_capture_site(self):
        args = run.parse_args(["--out", "runs/7", "--rank-dir", "r", "--job", "sft", "--", "x"])
        env = run.capture_environment(args, {"PYTHONPATH": "/opt/lib"})
        self.assertEqual(env["PYTHONPATH"], run.CAPTURE_SITE + os.pathsep + "/opt/lib")
        self.assertTrue(os.path.isfile(os.path.join(run.CAPTURE_SITE, "sitecustomize.py")))
        self.assertEqual(env["FRAGSCOPE_OUT"], os.path.abspath("runs/7"))
        self.assertEqual((env["FRAGSCOPE_CAPTURE"], env["FRAGSCOPE_JOB"], env["FRAGSCOPE_HISTORY_ENTRIES"]),
                         ("1", "sft", str(capture.DEFAULT_HISTORY_ENTRIES)))

    def run_module(self, *argv, env=None):
        return subprocess.run([sys.executable, "-m", "fragscope.run", *argv], capture_output=True, text=True,
                              timeout=60, env=env or dict(os.environ, PYTHONPATH=SOURCE_PYTHON), cwd=self.tmp.name)

    def test_child_and_grandchild_are_armed_and_a_shadowed_sitecustomize_still_runs(self):
        theirs = os.path.join(self.tmp.name, "site")
        write(os.path.join(theirs, "sitecustomize.py"),
              "import os\nprint('their sitecustomize ran, capture', os.environ.get('FRAGSCOPE_CAPTURE'))\n")
        env = dict(os.environ, PYTHONPATH=SOURCE_PYTHON + os.pathsep + theirs, PYTHONUNBUFFERED="1")
        grandchild = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {REPORT!r}], check=True)\n"
        result = self.run_module("--out", "o", "--job", "sft", "--", sys.executable, "-c", grandchild, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[:3], ["their sitecustomize ran, capture None",  # fragscope.run itself
                                     "their sitecustomize ran, capture 1",     # the child
                                     "their sitecustomize ran, capture 1"])    # the grandchild
        report = json.loads(lines[3])
        self.assertEqual((report["capture"], report["waiting_for"]), (True, ["torch"]))
        self.assertEqual(report["env"]["FRAGSCOPE_OUT"], os.path.join(self.tmp.name, "o"))
        self.assertEqual(report["env"]["FRAGSCOPE_JOB"], "sft")

    def test_an_interpreter_without_fragscope_on_its_path_finds_the_one_that_ran_it(self):
        launcher = f"import sys\nsys.path.insert(0, {SOURCE_PYTHON!r})\nfrom fragscope import run\nrun.main()\n"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        result = subprocess.run([sys.executable, "-c", launcher, "--", sys.executable, "-c", REPORT],
                                capture_output=True, text=True, timeout=60, env=env, cwd=self.tmp.name)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout)["waiting_for"], ["torch"])

    def test_importing_torch_queues_the_capture_on_cuda_initialisation(self):
        stand_in = os.path.join(self.tmp.name, "stand_in")
        write(os.path.join(stand_in, "torch", "__init__.py"), """
            class cuda:  # stand-in: records what is queued on CUDA's lazy initialisation
                queued = []
                _lazy_call = staticmethod(queued.append)
        """)
        env = dict(os.environ, PYTHONPATH=stand_in + os.pathsep + SOURCE_PYTHON)
        code = "import torch\nprint(len(torch.cuda.queued), torch.cuda.queued[0].__qualname__)\n"
        result = self.run_module("--", sys.executable, "-c", code, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), ["1", "arm_from_environment.<locals>.<lambda>.<locals>.<lambda>"])

    def test_bad_setting_turns_the_capture_off_with_one_line(self):
        env = dict(os.environ, PYTHONPATH=SOURCE_PYTHON, FRAGSCOPE_HISTORY_STACKS="cpp")
        code = "from fragscope import capture; print(capture.arm_from_environment())"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                cwd=self.tmp.name, env=dict(env, FRAGSCOPE_CAPTURE="1"))
        self.assertEqual(result.stdout.strip(), "False")
        self.assertEqual(result.stderr, "fragscope: capture off: FRAGSCOPE_HISTORY_STACKS='cpp' is not python or all\n")

    def test_a_missing_command_is_one_line_and_status_127(self):
        result = self.run_module("--", "no-such-command-here")
        self.assertEqual((result.returncode, result.stderr),
                         (127, "fragscope.run: no-such-command-here: No such file or directory\n"))


class LazyImportTest(unittest.TestCase):
    def test_the_package_imports_no_torch_and_no_framework(self):
        code = ("import sys, fragscope, fragscope.integrations, fragscope.run, fragscope.capture, fragscope.shm\n"
                "frameworks = ('torch', 'transformers', 'lightning', 'pytorch_lightning')\n"
                "print(sorted(m for m in frameworks if m in sys.modules))")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, PYTHONPATH=SOURCE_PYTHON))
        self.assertEqual(result.stdout.strip(), "[]", result.stderr)

    @unittest.skipIf(importlib.util.find_spec("transformers"), "transformers is installed here")
    def test_the_hf_callback_without_transformers_says_what_is_missing(self):
        with self.assertRaises(ImportError) as error:
            import fragscope.integrations.hf as hf
            self.fail(f"{hf.__name__} imported without transformers")
        self.assertEqual(str(error.exception),
                         "fragscope.integrations.hf needs transformers (pip install transformers)")


if __name__ == "__main__":
    unittest.main()
