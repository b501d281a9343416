"""End to end: the hook's writer -> rank files -> `fragscope agent` -> a real Prometheus.

Starts the Debian `prometheus` binary on a free loopback port with a temporary config that
scrapes the agent (and loads deploy/prometheus/rules.yaml), then asks Prometheus' HTTP API
for the series. Fault cases: a writer killed mid-update, garbage and truncated files, a newer
layout version, a stale rank, NVML missing, the metrics port taken. Every process it starts
is stopped in tearDownClass; every wait is bounded.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

from e2e_support import SOURCE, free_port, http_get, query, start_prometheus, stop_processes, wait_for
from fragscope import shm
from fragscope.recorder import RankIdentity, StepRecorder, StepSample

FRAGSCOPE = os.environ["FRAGSCOPE_BIN"]

# calib's step 1 and a fragmented rank (fixtures/calib/steps.jsonl; the second is made up to
# cross the 0.25 threshold).
HEALTHY = {"allocated_bytes.all.current": 7_692_999_168, "reserved_bytes.all.current": 52_865_007_616,
           "inactive_split_bytes.all.current": 2_396_399_104, "num_alloc_retries": 0, "segment.all.current": 673}
FRAGMENTED = {"allocated_bytes.all.current": 20_000_000_000, "reserved_bytes.all.current": 40_000_000_000,
              "inactive_split_bytes.all.current": 12_000_000_000, "num_alloc_retries": 4, "num_ooms": 1}


# A live rank (the hook's writer, heartbeating) whose job holds invalid UTF-8 and an escape
# sequence: the bytes are patched into the payload before the CRC is taken.
HOSTILE_WRITER = """
import sys, time
from fragscope import shm
JOB = b"bad\\xff\\xfejob\\x1b[31m\\xc0\\xaf"
class Hostile(shm.RankRecord):
    def pack(self):
        payload = bytearray(super().pack())
        at = 296 - shm.PAYLOAD_OFFSET
        payload[at:at + len(JOB)] = JOB
        return bytes(payload)
def record():
    return Hostile(pid=60007, rank=17, gpu=0, update_unix_ns=time.time_ns(), reserved_bytes=1_000_000)
writer = shm.RankFileWriter(sys.argv[1], record())
print("ready", flush=True)
while True:
    time.sleep(0.2)
    writer.publish(record())
"""


def read_text(path):
    with open(path) as f:
        return f.read()


class AgentEndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.processes = []
        cls.recorders = []
        cls.tmp = tempfile.TemporaryDirectory()
        cls.rank_dir = os.path.join(cls.tmp.name, "ranks")
        os.makedirs(cls.rank_dir)
        try:
            cls._write_ranks()
            cls._start_agent()
            cls._start_prometheus()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for recorder in cls.recorders:
            recorder.close()
        stop_processes(cls.processes)
        cls.tmp.cleanup()

    # -- setup ------------------------------------------------------------------------------
    @classmethod
    def _record(cls, rank, stats, wait_s):
        recorder = StepRecorder(RankIdentity(rank=rank, gpu=rank, job="e2e", pid=50_000 + rank),
                                rank_dir=cls.rank_dir, heartbeat_s=0.5)
        for _ in range(3):
            recorder.record(StepSample(data_wait_s=wait_s, step_s=0.5, compute_s=0.5 - wait_s, samples=4,
                                       tokens=4096, longest=1024, stats=stats))
        cls.recorders.append(recorder)
        return recorder

    @classmethod
    def _python(cls, code):
        env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"))
        return subprocess.run([sys.executable, "-c", "from fragscope import shm\nimport os, time\n" + code],
                              env=env, timeout=30).returncode

    @classmethod
    def _write_ranks(cls):
        cls.healthy = cls._record(0, HEALTHY, 0.01)
        cls.fragmented = cls._record(1, FRAGMENTED, 0.2)
        d = cls.rank_dir
        # Killed in the middle of an update: seq stays odd.
        assert cls._python(f"w = shm.RankFileWriter({d!r}, shm.RankRecord(pid=60001, rank=11, update_unix_ns=time.time_ns()))\n"
                           "w._updating().__enter__()\nos.kill(os.getpid(), 9)\n") == -9
        # A layout from the future.
        assert cls._python(f"shm.VERSION = 2\nshm.SIZE = 1024\n"
                           f"shm.RankFileWriter({d!r}, shm.RankRecord(pid=60002, rank=12, update_unix_ns=time.time_ns()))\n") == 0
        # Last heard of an hour ago.
        assert cls._python(f"shm.RankFileWriter({d!r}, shm.RankRecord(pid=60003, rank=13, "
                           "update_unix_ns=time.time_ns() - 3600 * 10**9))\n") == 0
        with open(os.path.join(d, "rank14-pid60004.fsr"), "wb") as f:
            f.write(bytes(range(256)) * 2)  # garbage
        with open(cls.fragmented._writer.path, "rb") as f:
            head = f.read(100)
        with open(os.path.join(d, "rank15-pid60005.fsr"), "wb") as f:
            f.write(head)  # truncated copy of a real record
        # A rank that dies without cleaning up: its heartbeat stops, then it goes stale.
        cls.doomed = subprocess.Popen(
            [sys.executable, "-c", "import sys, time\nfrom fragscope.recorder import *\n"
             f"r = StepRecorder(RankIdentity(rank=16, pid=60006, job='e2e'), rank_dir={d!r}, heartbeat_s=0.2)\n"
             "print('ready', flush=True)\ntime.sleep(60)\n"],
            env=dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python")), stdout=subprocess.PIPE, text=True)
        cls.processes.append(cls.doomed)
        assert cls.doomed.stdout.readline().strip() == "ready"
        # A live rank whose job holds invalid UTF-8 and an escape sequence, under a valid CRC.
        cls.hostile = subprocess.Popen(
            [sys.executable, "-c", HOSTILE_WRITER, d],
            env=dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python")), stdout=subprocess.PIPE, text=True)
        cls.processes.append(cls.hostile)
        assert cls.hostile.stdout.readline().strip() == "ready"

    @classmethod
    def _start_agent(cls):
        config = os.path.join(cls.tmp.name, "agent.toml")
        with open(config, "w") as f:
            f.write("[thresholds]\nhold_for_seconds = 0\n[actions.checkpoint]\nenabled = true\n")
        cls.agent_port = free_port()
        cls.events = os.path.join(cls.tmp.name, "events.jsonl")
        cls.agent = subprocess.Popen(
            [FRAGSCOPE, "agent", f"--listen=127.0.0.1:{cls.agent_port}", f"--rank-dir={cls.rank_dir}",
             f"--config={config}", "--poll-interval=0.2", "--stale-after=3",
             "--nvml-library=/nonexistent/libnvidia-ml.so.1", f"--event-log={cls.events}"],
            stderr=subprocess.PIPE, text=True)
        cls.processes.append(cls.agent)
        wait_for("the agent's /healthz", lambda: http_get(f"http://127.0.0.1:{cls.agent_port}/healthz")[0] == 200)

    @classmethod
    def _start_prometheus(cls):
        cls.prometheus, cls.prom_port = start_prometheus(cls.tmp.name, cls.agent_port)
        cls.processes.append(cls.prometheus)
        wait_for("Prometheus to scrape the agent", lambda: cls.query('up{instance="127.0.0.1:%d"}' % cls.agent_port))

    @classmethod
    def query(cls, promql):
        return query(cls.prom_port, promql)

    def value(self, promql):
        results = wait_for(promql, lambda: self.query(promql))
        self.assertEqual(len(results), 1, results)
        return next(iter(results.values()))

    # -- the series -------------------------------------------------------------------------
    def test_prometheus_has_each_live_rank_with_the_written_values(self):
        self.assertEqual(self.value('fragscope_reserved_bytes{training_job="e2e",rank="0"}'), 52_865_007_616)
        # No honor_labels: `job` is the scrape job, so `up` joins the agent's series.
        self.assertEqual(self.value('fragscope_allocated_bytes{job="fragscope",training_job="e2e",rank="0",gpu="0"}'),
                         7_692_999_168)
        self.assertEqual(self.value('fragscope_allocated_bytes{rank="0"} and on(job, instance) up == 1'), 7_692_999_168)
        self.assertAlmostEqual(self.value('fragscope_fragmentation_ratio{rank="1"}'), 0.3)
        self.assertEqual(self.value('fragscope_reserved_unallocated_bytes{rank="1"}'), 20_000_000_000)
        self.assertEqual(self.value('fragscope_alloc_retries_total{rank="1"}'), 4)
        self.assertEqual(self.value('fragscope_ooms_total{rank="1"}'), 1)
        self.assertAlmostEqual(self.value('fragscope_data_wait_ratio{rank="1"}'), 0.4)
        self.assertAlmostEqual(self.value('fragscope_step_seconds{rank="0"}'), 0.5)
        self.assertEqual(self.value('fragscope_steps_total{rank="0"}'), 3)

    def test_faulty_files_are_counted_not_reported(self):
        expected = {"torn": 1, "invalid": 2, "unsupported": 1}
        for state, count in expected.items():
            self.assertEqual(self.value(f'fragscope_rank_files{{state="{state}"}}'), count, state)
        self.assertGreaterEqual(self.value('fragscope_rank_files{state="stale"}'), 1)
        ranks = {dict(k)["rank"] for k in self.query('fragscope_reserved_bytes{training_job="e2e"}')}
        self.assertTrue({"0", "1"} <= ranks, ranks)
        self.assertFalse(ranks & {"11", "12", "13", "14", "15"}, ranks)

    def test_nvml_missing_is_a_metric_and_ranks_are_still_served(self):
        self.assertEqual(self.value("fragscope_nvml_up"), 0)
        with open(self.events) as f:
            start = json.loads(f.readline())
        self.assertFalse(start["nvml_up"])
        self.assertIn("/nonexistent/libnvidia-ml.so.1", start["nvml_problem"])

    def test_dead_rank_disappears_after_the_stale_timeout(self):
        self.value('fragscope_reserved_bytes{rank="16"}')  # present while its heartbeat runs
        self.doomed.send_signal(signal.SIGKILL)
        self.doomed.wait(timeout=10)
        wait_for("rank 16 to go stale", lambda: not self.query('fragscope_reserved_bytes{rank="16"}'), timeout=20)
        self.assertTrue(os.path.exists(os.path.join(self.rank_dir, "rank16-pid60006.fsr")))

    def test_fragmented_rank_is_asked_to_checkpoint_and_its_ack_comes_back(self):
        flag = self.fragmented._writer.checkpoint_path
        wait_for("the checkpoint flag", lambda: os.path.exists(flag))
        self.assertFalse(os.path.exists(self.healthy._writer.checkpoint_path))
        self.assertTrue(self.fragmented.flush(5.0))  # the publisher thread looks at the flag, not poll()
        self.assertTrue(self.fragmented.checkpoints.poll())
        self.fragmented.acknowledge_checkpoint()
        wait_for("the ack in Prometheus", lambda: self.query('fragscope_checkpoint_acks_total{rank="1"} == 1'))
        self.assertGreaterEqual(self.value('fragscope_agent_actions_total{action="checkpoint",outcome="executed"}'), 1)

    def test_shipped_alert_rule_matches_the_fragmented_rank(self):
        # rules.yaml holds for 2 m, so within the test the alert is pending, on rank 1 only.
        alerts = wait_for("the pending alert", lambda: self.query('ALERTS{alertname="FragscopeFragmentationHigh"}'))
        self.assertEqual([dict(k)["rank"] for k in alerts], ["1"])
        self.assertEqual(self.value('fragscope_agent_alerts{rule="fragmentation"}'), 1)

    def test_agent_exits_2_when_the_metrics_port_is_taken(self):
        result = subprocess.run([FRAGSCOPE, "agent", f"--listen=127.0.0.1:{self.agent_port}",
                                 f"--rank-dir={self.rank_dir}", "--nvml-library=/nonexistent/libnvidia-ml.so.1"],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 2)
        last = result.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith(f"fragscope: error: --listen 127.0.0.1:{self.agent_port}: cannot serve HTTP there:"),
                        result.stderr)

    def test_a_drain_timeout_out_of_range_is_a_one_line_error_and_exit_2(self):
        config = os.path.join(self.tmp.name, "bad-timeout.toml")
        with open(config, "w") as f:
            f.write("[actions.drain]\ntimeout_seconds = 0\n")
        result = subprocess.run([FRAGSCOPE, "agent", "--listen=127.0.0.1:0", f"--rank-dir={self.rank_dir}",
                                 f"--config={config}", "--nvml-library=/nonexistent/libnvidia-ml.so.1"],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr, f"fragscope: error: {config}: actions.drain.timeout_seconds: "
                                        "must be a number in [1, 86400]\n")

    def test_invalid_utf8_in_a_job_does_not_drop_the_node(self):
        # Prometheus refuses a whole scrape over one invalid label value ("invalid UTF-8 label
        # value", up = 0); the agent replaces what is not printable UTF-8 with U+FFFD.
        series = wait_for("rank 17", lambda: self.query('fragscope_reserved_bytes{rank="17"}'))
        self.assertEqual([dict(k)["training_job"] for k in series], ["bad\ufffd\ufffdjob\ufffd[31m\ufffd\ufffd"])
        self.assertEqual(self.value('up{instance="127.0.0.1:%d"}' % self.agent_port), 1)

    def _start_own_agent(self, rank_dir):
        port = free_port()
        events = os.path.join(self.tmp.name, f"events-{port}.jsonl")
        agent = subprocess.Popen([FRAGSCOPE, "agent", f"--listen=127.0.0.1:{port}", f"--rank-dir={rank_dir}",
                                  "--poll-interval=0.2", "--nvml-library=/nonexistent/libnvidia-ml.so.1",
                                  f"--event-log={events}"])
        self.processes.append(agent)
        wait_for("the agent's first poll",
                 lambda: http_get(f"http://127.0.0.1:{port}/healthz")[1] not in ("", "no poll has completed yet\n"))
        return agent, port, events

    def test_hangup_and_user_signals_are_logged_not_fatal(self):
        agent, port, events = self._start_own_agent(self.rank_dir)
        for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            agent.send_signal(sig)
        wait_for("the signal events", lambda: read_text(events).count('"event":"signal"') == 3)
        self.assertIsNone(agent.poll())
        self.assertEqual(http_get(f"http://127.0.0.1:{port}/healthz"), (200, "ok\n"))
        agent.send_signal(signal.SIGTERM)
        self.assertEqual(agent.wait(timeout=10), 0)
        with open(events) as f:
            logged = [json.loads(line) for line in f]
        self.assertEqual([e["signal"] for e in logged if e["event"] == "signal"], ["SIGHUP", "SIGUSR1", "SIGUSR2"])
        self.assertEqual(logged[-1]["event"], "stop")

    def test_missing_rank_directory_is_degraded_not_healthy(self):
        missing = os.path.join(self.tmp.name, "no-such-dir")
        _, port, _ = self._start_own_agent(missing)
        status, body = http_get(f"http://127.0.0.1:{port}/healthz")
        self.assertEqual(status, 503)
        self.assertEqual(body, f"degraded: rank directory {missing}: No such file or directory\n")

    def test_healthz_and_metrics_endpoints(self):
        self.assertEqual(http_get(f"http://127.0.0.1:{self.agent_port}/healthz"), (200, "ok\n"))
        status, body = http_get(f"http://127.0.0.1:{self.agent_port}/metrics")
        self.assertEqual(status, 200)
        self.assertIn("# TYPE fragscope_alloc_retries_total counter", body)


if __name__ == "__main__":
    unittest.main()
