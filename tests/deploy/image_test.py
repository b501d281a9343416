"""scripts/build-image.sh builds the agent's image; the image runs the agent and serves /metrics.

Builds into a private containers storage (vfs driver) under a temporary directory, then:
- runs the image with podman (runc, host network, read-only root, the non-root user) replaying
  the recorded input_bound run (`fragscope agent --simulate`) and scrapes /metrics;
- runs the same image's root filesystem under chroot as user 65532, which needs no container
  runtime (so the image's contents are checked even where podman cannot start containers).
Skipped, with the reason, only when the tools are missing or the test does not run as root.
Every process it starts is stopped; every wait is bounded.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

SOURCE = os.environ.get("FRAGSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
FRAGSCOPE = os.environ.get("FRAGSCOPE_BIN", os.path.join(SOURCE, "build", "src", "cli", "fragscope"))
FIXTURES = os.environ.get("FRAGSCOPE_FIXTURES_DIR", os.path.join(SOURCE, "..", "shared", "fixtures"))
TOOLS = ("mmdebstrap", "buildah", "podman", "runc")
# This sandbox and CI forbid raising RLIMIT_NPROC/NOFILE (no CAP_SYS_RESOURCE), which podman's
# defaults do; crun refuses hybrid cgroups, runc does not.
PODMAN_RUN = ["--runtime", "runc", "run", "--network", "host", "--ulimit", "nofile=1024:1024",
              "--ulimit", "nproc=4096:4096"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port, wanted, timeout=60):
    """The /metrics page once it contains `wanted`."""
    deadline, page = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                page = response.read().decode()
            if wanted in page:
                return page
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no '{wanted}' on :{port}/metrics within {timeout} s; last page:\n{page[:2000]}")


def skip_reason():
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/install-deps.sh installs them)"
    if os.geteuid() != 0:
        return "building and running the image needs root (containers storage, chroot)"
    return None


@unittest.skipIf(skip_reason(), skip_reason())
class ImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fragscope-image-")
        cls.storage = ["--root", os.path.join(cls.tmp.name, "root"), "--runroot", os.path.join(cls.tmp.name, "run")]
        cls.archive = os.path.join(cls.tmp.name, "fragscope-agent.oci.tar")
        started = time.monotonic()
        build = subprocess.run([os.path.join(SOURCE, "scripts", "build-image.sh"), "--binary", FRAGSCOPE,
                                "--oci-archive", cls.archive] + cls.storage,
                               capture_output=True, text=True, timeout=300)
        if build.returncode != 0:
            cls.tmp.cleanup()
            raise AssertionError(f"build-image.sh failed ({build.returncode}):\n{build.stderr[-3000:]}")
        cls.build_seconds = time.monotonic() - started
        cls.image = build.stdout.strip().splitlines()[-1]
        cls.podman = ["podman"] + cls.storage + ["--storage-driver", "vfs"]
        cls.buildah = ["buildah"] + cls.storage + ["--storage-driver", "vfs"]
        probe = subprocess.run(cls.podman + PODMAN_RUN + ["--rm", cls.image, "--version"],
                               capture_output=True, text=True, timeout=120)
        cls.podman_problem = None if probe.returncode == 0 else (probe.stderr.strip() or probe.stdout.strip())

    @classmethod
    def tearDownClass(cls):
        subprocess.run(cls.podman + ["rm", "--all", "--force"], capture_output=True, timeout=120)
        subprocess.run(cls.buildah + ["rm", "--all"], capture_output=True, timeout=120)
        cls.tmp.cleanup()

    def inspect(self):
        result = subprocess.run(self.buildah + ["inspect", "--type", "image", self.image],
                                capture_output=True, text=True, timeout=60, check=True)
        return json.loads(result.stdout)

    def test_image_is_small_non_root_and_labelled(self):
        config = self.inspect()["OCIv1"]["config"]
        self.assertEqual(config["User"], "65532:65532")
        self.assertEqual(config["Entrypoint"], ["/usr/bin/fragscope"])
        self.assertEqual(config["Cmd"][0], "agent")
        version = subprocess.run([FRAGSCOPE, "--version"], capture_output=True, text=True).stdout.split()[1]
        self.assertEqual(self.image, f"localhost/fragscope-agent:{version}")
        self.assertEqual(config["Labels"]["org.opencontainers.image.version"], version)
        self.assertRegex(config["Labels"]["org.opencontainers.image.revision"], r"^([0-9a-f]{12}|unknown)$")
        size = os.path.getsize(self.archive)
        self.assertLess(size, 40 << 20, "compressed image (kubectl alone is ~37 MB unpacked)")
        self.assertLess(self.build_seconds, 240)

    def test_container_serves_the_metrics_of_a_replayed_run(self):
        if self.podman_problem:
            self.skipTest(f"podman cannot start containers here: {self.podman_problem}")
        port = free_port()
        fixture = os.path.join(FIXTURES, "input_bound")
        container = subprocess.run(
            self.podman + PODMAN_RUN + ["--detach", "--read-only", "--volume", f"{fixture}:/fixtures/input_bound:ro",
                                        self.image, "agent", f"--listen=127.0.0.1:{port}", "--rank-dir=/tmp/ranks",
                                        "--config=/etc/fragscope/agent.toml", "--simulate=/fixtures/input_bound",
                                        "--simulate-speed=20"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(container.returncode, 0, container.stderr)
        name = container.stdout.strip()
        page = scrape(port, 'fragscope_data_wait_ratio{training_job="input_bound"')
        self.assertIn('fragscope_build_info{version="', page)
        self.assertIn('fragscope_samples_total{training_job="input_bound",rank="0",gpu="0"}', page)
        self.assertIn("fragscope_nvml_up 0", page)  # no GPU here
        top = subprocess.run(self.podman + ["top", name, "user", "huser", "args"], capture_output=True, text=True,
                             timeout=60)
        agent_line = next(line for line in top.stdout.splitlines() if "agent" in line)
        self.assertEqual(agent_line.split()[:2], ["65532", "65532"], top.stdout)  # in the container, on the host
        subprocess.run(self.podman + ["stop", "--time", "5", name], capture_output=True, timeout=60)
        logs = subprocess.run(self.podman + ["logs", name], capture_output=True, text=True, timeout=60)
        events = [json.loads(line) for line in logs.stderr.splitlines() if line.startswith("{")]
        self.assertEqual(events[0]["event"], "start")
        self.assertEqual(events[-1]["event"], "stop")  # SIGTERM ends it cleanly

    def test_root_filesystem_runs_the_agent_under_chroot(self):
        container = subprocess.run(self.buildah + ["from", self.image], capture_output=True, text=True, timeout=120,
                                   check=True).stdout.strip()
        root = subprocess.run(self.buildah + ["mount", container], capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip()
        as_agent = ["chroot", "--userspec=65532:65532", root]
        try:
            self.assertEqual(os.stat(os.path.join(root, "tmp")).st_mode & 0o7777, 0o1777)
            kubectl = subprocess.run(as_agent + ["/usr/bin/kubectl", "version", "--client", "--short"],
                                     capture_output=True, text=True, timeout=60)
            self.assertEqual(kubectl.stdout.strip(), "Client Version: v1.20.2", kubectl.stderr)
            chmod = subprocess.run(["chroot", root, "/bin/busybox", "chmod", "1777", "/tmp"], capture_output=True,
                                   timeout=60)
            self.assertEqual(chmod.returncode, 0, "the DaemonSet's init container runs this busybox")
            shutil.copytree(os.path.join(FIXTURES, "input_bound"), os.path.join(root, "tmp", "input_bound"),
                            ignore=shutil.ignore_patterns("*.pickle*"))
            port = free_port()
            log = open(os.path.join(self.tmp.name, "chroot-agent.log"), "w")
            agent = subprocess.Popen(as_agent + [
                "/usr/bin/fragscope", "agent", f"--listen=127.0.0.1:{port}", "--rank-dir=/tmp/ranks",
                "--config=/etc/fragscope/agent.toml", "--simulate=/tmp/input_bound", "--simulate-speed=20"],
                stderr=log)
            log.close()
            try:
                page = scrape(port, 'fragscope_steps_total{training_job="input_bound"')
                self.assertIn('fragscope_rank_files{state="ok"} 1', page)
            finally:
                agent.terminate()
                agent.wait(timeout=10)
            self.assertEqual(agent.returncode, 0)
        finally:
            subprocess.run(self.buildah + ["umount", container], capture_output=True, timeout=60)

if __name__ == "__main__":
    unittest.main()
