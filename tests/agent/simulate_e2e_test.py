"""End to end without a GPU: `fragscope agent --simulate` replays recorded runs -> a real Prometheus.

Replays two runs recorded on the H200 (../shared/fixtures): input_bound (91 % of each step
waits for data) and capacity_oom (a cudaMalloc retry in its one step; replayed in a loop, the
retries keep coming). Checks what a person trying the agent would look at: the series in
Prometheus under their training_job, the throughput counters, build_info, the shipped alert
pending, the checkpoint action answered by the simulated rank (the acks counter), and the
drain's dry run naming the node. Every process it starts is stopped; every wait is bounded.
"""

import json
import os
import subprocess
import tempfile
import unittest

from e2e_support import free_port, http_get, query, start_prometheus, stop_processes, wait_for

FRAGSCOPE = os.environ["FRAGSCOPE_BIN"]
FIXTURES = os.environ["FRAGSCOPE_FIXTURES_DIR"]


class SimulateEndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fragscope-simulate-")
        cls.processes = []
        try:
            cls._start_agent()
            cls._start_prometheus()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        stop_processes(cls.processes)
        cls.tmp.cleanup()

    @classmethod
    def _start_agent(cls):
        config = os.path.join(cls.tmp.name, "agent.toml")
        with open(config, "w") as f:
            f.write('[thresholds]\nhold_for_seconds = 0\n'
                    '[actions.checkpoint]\nenabled = true\nrules = ["alloc_retries"]\n'
                    # alloc_retries is a rank rule: only a rank file supports it, so the drain needs
                    # trust_rank_files (docs/SECURITY.md); the simulated ranks are this test's own.
                    '[actions.drain]\nenabled = true\ndry_run = true\nrules = ["alloc_retries"]\n'
                    'trust_rank_files = true\n'
                    'command = ["kubectl", "drain", "{node}", "--ignore-daemonsets"]\n')
        cls.rank_dir = os.path.join(cls.tmp.name, "ranks")
        cls.events = os.path.join(cls.tmp.name, "events.jsonl")
        cls.agent_port = free_port()
        cls.agent = subprocess.Popen(
            [FRAGSCOPE, "agent", f"--listen=127.0.0.1:{cls.agent_port}", f"--rank-dir={cls.rank_dir}",
             f"--config={config}", "--poll-interval=0.2", "--nvml-library=/nonexistent/libnvidia-ml.so.1",
             "--node=gpu-node-7", f"--event-log={cls.events}", "--simulate-speed=10",
             "--simulate", os.path.join(FIXTURES, "input_bound"), os.path.join(FIXTURES, "capacity_oom")])
        cls.processes.append(cls.agent)
        wait_for("the agent's /healthz", lambda: http_get(f"http://127.0.0.1:{cls.agent_port}/healthz")[0] == 200)

    @classmethod
    def _start_prometheus(cls):
        prometheus, cls.prom_port = start_prometheus(cls.tmp.name, cls.agent_port)
        cls.processes.append(prometheus)
        wait_for("Prometheus to scrape the agent", lambda: cls.query("up == 1"))

    @classmethod
    def query(cls, promql):
        return query(cls.prom_port, promql)

    def labels_and_value(self, promql):
        results = wait_for(promql, lambda: self.query(promql))
        self.assertEqual(len(results), 1, results)
        labels, value = next(iter(results.items()))
        return {k: v for k, v in labels if k != "__name__"}, value

    def events_where(self, **fields):
        with open(self.events) as f:
            events = [json.loads(line) for line in f]
        return [e for e in events if all(e.get(k) == v for k, v in fields.items())]

    def test_replayed_runs_are_series_under_their_training_job(self):
        labels, wait = self.labels_and_value('fragscope_data_wait_ratio{training_job="input_bound"} > 0.5')
        self.assertEqual(labels, {"job": "fragscope", "instance": f"127.0.0.1:{self.agent_port}",
                                  "training_job": "input_bound", "rank": "0", "gpu": "0",
                                  "uid": str(os.geteuid())})
        self.assertLess(wait, 1.0)
        # capacity_oom's only step: reserved_bytes.all.current as recorded on the H200.
        _, reserved = self.labels_and_value('fragscope_reserved_bytes{training_job="capacity_oom"}')
        with open(os.path.join(FIXTURES, "capacity_oom", "steps.jsonl")) as f:
            self.assertEqual(reserved, json.loads(f.readline())["reserved_bytes.all.current"])
        _, total = self.labels_and_value('fragscope_device_total_bytes{training_job="input_bound"}')
        self.assertEqual(total, 143771 * 2**20)  # smi.csv's memory.total

    def test_throughput_counters_and_build_info(self):
        self.labels_and_value('rate(fragscope_samples_total{training_job="input_bound"}[5s]) > 0')
        _, tokens = self.labels_and_value('fragscope_tokens_total{training_job="input_bound"}')
        self.assertGreater(tokens, 0)
        labels, _ = self.labels_and_value("fragscope_build_info")
        version = subprocess.run([FRAGSCOPE, "--version"], capture_output=True, text=True).stdout.split()[1]
        self.assertEqual(labels["version"], version)
        self.assertTrue(labels["revision"])

    def test_shipped_alert_is_pending_for_the_input_bound_job(self):
        alerts = wait_for("FragscopeDataWaitHigh", lambda: self.query('ALERTS{alertname="FragscopeDataWaitHigh"}'))
        self.assertEqual({dict(k)["training_job"] for k in alerts}, {"input_bound"})

    def test_checkpoint_request_is_answered_and_counted(self):
        wait_for("an acknowledged checkpoint",
                 lambda: self.query('fragscope_checkpoint_acks_total{training_job="capacity_oom"} >= 1'))
        self.assertFalse(self.query('fragscope_checkpoint_acks_total{training_job="input_bound"} > 0'))
        executed = wait_for("the checkpoint event", lambda: self.events_where(action="checkpoint", outcome="executed"))
        self.assertEqual(executed[0]["job"], "capacity_oom")

    def test_drain_dry_run_names_the_node(self):
        dry = wait_for("the drain's dry run", lambda: self.events_where(action="drain", outcome="dry_run"))
        self.assertEqual(dry[0]["detail"], "would run: kubectl drain gpu-node-7 --ignore-daemonsets")


if __name__ == "__main__":
    unittest.main()
