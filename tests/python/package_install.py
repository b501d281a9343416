"""`pip install ./python` into a fresh virtual environment, offline, gives a working `fragscope`.

The interpreter is FRAGSCOPE_PACKAGE_PYTHON (Debian's /usr/bin/python3 by default), whose
python3-venv, python3-setuptools and python3-wheel packages make the venv and build the wheel
(--system-site-packages, --no-build-isolation, --no-index: nothing is downloaded). The source is
copied first so the build leaves nothing in the tree.
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.path.abspath(os.environ.get("FRAGSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
PYTHON = os.environ.get("FRAGSCOPE_PACKAGE_PYTHON", "/usr/bin/python3")
NEEDS = "python3-venv python3-setuptools python3-wheel (scripts/install-deps.sh)"
CHECK = """
import json, os, sys
import fragscope, fragscope.run, fragscope.capture, fragscope.integrations, fragscope.shm
site = os.path.join(os.path.dirname(fragscope.__file__), "_capture_site", "sitecustomize.py")
print(json.dumps({"file": fragscope.__file__, "version": fragscope.__version__, "site": os.path.isfile(site),
                  "torch_imported": "torch" in sys.modules}))
"""
ARMED = "import sys; from fragscope import import_hook; print(import_hook.waiting_for())"


class PackageInstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.venv = os.path.join(cls.tmp.name, "venv")
        cls.bin = os.path.join(cls.venv, "bin")
        cls.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_INDEX_URL")}
        cls.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        missing = subprocess.run([PYTHON, "-c", "import venv, ensurepip, setuptools, wheel"], env=cls.env,
                                 capture_output=True, text=True)
        if missing.returncode != 0:
            raise AssertionError(f"{PYTHON} cannot build the package: {missing.stderr.strip().splitlines()[-1]}; "
                                 f"install {NEEDS}")
        copy = os.path.join(cls.tmp.name, "src")
        shutil.copytree(os.path.join(SOURCE, "python"), copy, ignore=shutil.ignore_patterns("__pycache__"))
        cls.run_checked([PYTHON, "-m", "venv", "--system-site-packages", cls.venv])
        cls.install = cls.run_checked([os.path.join(cls.bin, "python"), "-m", "pip", "install", "--no-build-isolation",
                                       "--no-index", copy])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def run_checked(cls, argv, **kwargs):
        result = subprocess.run(argv, env=cls.env, cwd=cls.tmp.name, capture_output=True, text=True, timeout=300,
                                **kwargs)
        if result.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def test_the_installed_package_imports_without_torch(self):
        report = json.loads(self.run_checked([os.path.join(self.bin, "python"), "-c", CHECK]).stdout)
        self.assertTrue(report["file"].startswith(os.path.join(self.venv, "lib")), report["file"])
        self.assertEqual(report["version"], "0.1.0")
        self.assertTrue(report["site"], "the capture's sitecustomize.py was not installed")
        self.assertFalse(report["torch_imported"])

    def test_the_console_script_arms_the_capture_in_its_command(self):
        result = self.run_checked([os.path.join(self.bin, "fragscope-run"), "--out", "o", "--",
                                   os.path.join(self.bin, "python"), "-c", ARMED])
        self.assertEqual(result.stdout.strip(), "['torch']")

    def test_nothing_was_downloaded(self):
        self.assertNotIn("Downloading", self.install.stdout)
        self.assertIn("Successfully installed fragscope-0.1.0", self.install.stdout)


if __name__ == "__main__":
    unittest.main()
