"""scripts/build-image.sh builds the agent's image; the image runs the agent and serves /metrics.

Builds into a private containers storage (vfs driver) under a temporary directory, then:
- runs the image with podman (runc, host network, read-only root, the non-root user) replaying
  the recorded input_bound run (`fragscope agent --simulate`) and scrapes /metrics;
- runs the same image's root filesystem under chroot as user 65532, which needs no container
  runtime (so the image's contents are checked even where podman cannot start containers);
- replays the DaemonSet's rank folder set-up in that root filesystem (the init container's
  command, another user's hook, the agent without capabilities reading its rank file).
Skipped, with the reason, only when the tools are missing or the test does not run as root.
Every process it starts is stopped; every wait is bounded.
"""

import ctypes
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

import yaml  # Debian python3-yaml

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


HOOK_USER = 1000  # a training job's user, neither root nor the agent
RANK_ROOT = "/dev/shm/fragscope"
SYSTEM_PYTHON = "/usr/bin/python3"  # an interpreter any user may run
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38


def daemonset_container(name, init=False):
    with open(os.path.join(SOURCE, "deploy", "kubernetes", "daemonset.yaml"), encoding="utf-8") as f:
        spec = yaml.safe_load(f)["spec"]["template"]["spec"]
    return next(c for c in spec["initContainers" if init else "containers"] if c["name"] == name)


def as_in_the_pod(root, uid, gid):
    """preexec_fn: the process as the DaemonSet's runtime starts it in the image `root`: uid:gid
    with no other group, an empty capability bounding set (`drop: ["ALL"]`) and no_new_privs
    (`allowPrivilegeEscalation: false`). The inheritable and ambient sets are empty here, so even
    uid 0 starts without a capability."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
        last_cap = int(f.read())

    def enter():
        os.chroot(root)
        os.chdir("/")
        for cap in range(last_cap + 1):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), f"cannot drop capability {cap} from the bounding set")
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot set no_new_privs")
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return enter


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
        self.assertIn('fragscope_samples_total{training_job="input_bound",rank="0",gpu="0",uid="65532"}', page)
        self.assertIn("fragscope_nvml_up 0", page)  # no GPU here
        top = subprocess.run(self.podman + ["top", name, "user", "huser", "args"], capture_output=True, text=True,
                             timeout=60)
        agent_line = next(line for line in top.stdout.splitlines() if "agent" in line)
        # in the container (named by the image's /etc/passwd), on the host
        self.assertEqual(agent_line.split()[:2], ["fragscope", "65532"], top.stdout)
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
            # build-image.sh's hook trims the packages' data and the build host's files from the root filesystem.
            for trimmed in ("etc/apt", "var/lib/apt", "usr/share/doc", "usr/share/man", "usr/share/info",
                            "usr/share/lintian", "usr/share/locale", "etc/resolv.conf", "etc/hostname"):
                self.assertFalse(os.path.lexists(os.path.join(root, trimmed)), trimmed)
            with open(os.path.join(root, "etc", "passwd")) as passwd:
                self.assertEqual([line.split(":")[0] for line in passwd], ["root", "fragscope"])
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

    def test_daemonset_agent_reads_another_users_rank_file_without_capabilities(self):
        """The DaemonSet's rank folder set-up, replayed in the image: the kubelet's directory, the
        init container's command, a hook of uid 1000 publishing, the agent reading it. The former
        `chmod 1777` left the hook's folder 0700 and the agent without the rank."""
        init = daemonset_container("rank-dir", init=True)
        agent_user = self.inspect()["OCIv1"]["config"]["User"]
        self.assertEqual(agent_user, "65532:65532")
        self.assertNotIn("add", daemonset_container("agent")["securityContext"]["capabilities"])
        for init_command, readable in ((init["command"], True), (["/bin/busybox", "chmod", "1777", RANK_ROOT], False)):
            with self.subTest(init=" ".join(init_command)):
                self.replay_rank_folder_setup(init_command, readable)

    def replay_rank_folder_setup(self, init_command, readable):
        container = subprocess.run(self.buildah + ["from", self.image], capture_output=True, text=True, timeout=120,
                                   check=True).stdout.strip()
        root = subprocess.run(self.buildah + ["mount", container], capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip()
        try:
            host_dir = os.path.join(root, RANK_ROOT.lstrip("/"))
            os.makedirs(host_dir)
            os.chmod(host_dir, 0o755)  # hostPath DirectoryOrCreate: root's, 0755
            os.chown(host_dir, 0, 0)
            as_init = as_in_the_pod(root, 0, 65532)  # runAsUser 0, the pod's runAsGroup
            steal = subprocess.run(["/bin/busybox", "chown", "1234", RANK_ROOT], preexec_fn=as_init,
                                   capture_output=True, timeout=60)
            self.assertNotEqual(steal.returncode, 0, "the init container must hold no CAP_CHOWN")
            done = subprocess.run(init_command, preexec_fn=as_init, capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr)

            hook = subprocess.run(
                [SYSTEM_PYTHON, "-c",
                 "import time\nfrom fragscope.shm import RankFileWriter, RankRecord\nnow = time.time_ns()\n"
                 "w = RankFileWriter('fragscope', RankRecord(pid=4242, rank=3, job='other-user', step=7,\n"
                 "                   update_unix_ns=now, step_unix_ns=now))\n"
                 "print(w.path)\nw.close(remove=False)\n"],
                cwd=os.path.dirname(host_dir), user=HOOK_USER, group=HOOK_USER, extra_groups=[],
                env={"PYTHONPATH": os.path.join(os.path.abspath(SOURCE), "python"), "PATH": "/usr/bin:/bin"},
                capture_output=True, text=True, timeout=60)
            self.assertEqual(hook.returncode, 0, hook.stderr)
            self.assertEqual(hook.stdout.strip(), f"fragscope/{HOOK_USER}/rank3-pid4242.fsr")
            folder = os.stat(os.path.join(host_dir, str(HOOK_USER)))
            if readable:
                self.assertEqual((os.stat(host_dir).st_mode & 0o7777, os.stat(host_dir).st_gid), (0o3777, 65532))
                self.assertEqual((folder.st_mode & 0o777, folder.st_gid), (0o750, 65532))
            else:
                self.assertEqual(folder.st_mode & 0o777, 0o700)

            port = free_port()
            log_path = os.path.join(self.tmp.name, f"rank-folder-agent-{port}.log")
            with open(log_path, "w") as log:
                agent = subprocess.Popen(
                    ["/usr/bin/fragscope", "agent", f"--listen=127.0.0.1:{port}", f"--rank-dir={RANK_ROOT}",
                     "--nvml-library=none", "--poll-interval=0.2"],
                    preexec_fn=as_in_the_pod(root, 65532, 65532), stderr=log)
            try:
                if readable:
                    page = scrape(port, 'fragscope_steps_total{training_job="other-user",rank="3"')
                    self.assertIn('fragscope_rank_files{state="ok"} 1', page)
                else:
                    expected = f"{RANK_ROOT}/{HOOK_USER}: Permission denied (skipped)"
                    deadline, warnings = time.monotonic() + 30, []
                    while expected not in warnings and time.monotonic() < deadline:
                        time.sleep(0.2)
                        with open(log_path) as log:
                            lines = log.read().split("\n")[:-1]  # complete lines only
                        warnings = [e.get("warning") for e in map(json.loads, filter(None, lines))
                                    if e["event"] == "rank_dir_warning"]
                    self.assertIn(expected, warnings)
                    self.assertNotIn('training_job="other-user"', scrape(port, "fragscope_agent_polls_total"))
            finally:
                agent.terminate()
                agent.wait(timeout=10)
            self.assertEqual(agent.returncode, 0)
        finally:
            subprocess.run(self.buildah + ["umount", container], capture_output=True, timeout=60)
            subprocess.run(self.buildah + ["rm", container], capture_output=True, timeout=60)


if __name__ == "__main__":
    unittest.main()
