"""deploy/: every manifest parses and fits together; rules, agent config and dashboard agree."""

import glob
import json
import os
import re
import tomllib
import unittest

import yaml  # Debian python3-yaml

ROOT = os.environ.get("FRAGSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")


def load_yaml(relative):
    with open(os.path.join(DEPLOY, relative), encoding="utf-8") as f:
        return yaml.safe_load(f)


def agent_metric_names():
    """Every metric name the agent can export, read off its source."""
    with open(os.path.join(ROOT, "src", "agent", "node_metrics.cpp"), encoding="utf-8") as f:
        return set(re.findall(r'"(fragscope_[a-z_]+)"', f.read()))


def metrics_in(expr):
    return set(re.findall(r"\bfragscope_[a-z_]+", expr))


class ManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kustomization = load_yaml("kustomization.yaml")
        cls.objects = {}
        for path in cls.kustomization["resources"]:
            obj = load_yaml(path)
            cls.objects[obj["kind"]] = obj
        with open(os.path.join(DEPLOY, "agent.toml"), "rb") as f:
            cls.config = tomllib.load(f)
        cls.rules = {r["alert"]: r for g in load_yaml("prometheus/rules.yaml")["groups"] for r in g["rules"]}

    def test_every_yaml_file_parses_and_names_itself(self):
        files = glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True)
        self.assertGreaterEqual(len(files), 8)
        for path in files:
            with open(path, encoding="utf-8") as f:
                self.assertIsInstance(yaml.safe_load(f), dict, path)
        for kind, obj in self.objects.items():
            self.assertIn("apiVersion", obj, kind)
            self.assertTrue(obj["metadata"]["name"], kind)

    def test_kustomization_refers_to_existing_files(self):
        for path in self.kustomization["resources"]:
            self.assertTrue(os.path.isfile(os.path.join(DEPLOY, path)), path)
        for generator in self.kustomization["configMapGenerator"]:
            for path in generator["files"]:
                self.assertTrue(os.path.isfile(os.path.join(DEPLOY, path.split("=")[-1])), path)
        self.assertEqual(set(self.objects),
                         {"Namespace", "DaemonSet", "Service", "ServiceMonitor", "PrometheusRule", "NetworkPolicy"})

    def test_network_policy_admits_only_prometheus_to_the_metrics_port(self):
        policy = self.objects["NetworkPolicy"]["spec"]
        pod = self.objects["DaemonSet"]["spec"]["template"]
        self.assertEqual(policy["podSelector"]["matchLabels"], pod["metadata"]["labels"])
        self.assertEqual(policy["policyTypes"], ["Ingress"])
        [rule] = policy["ingress"]
        [source] = rule["from"]  # one entry: namespace AND pod selector, not either
        self.assertEqual(set(source), {"namespaceSelector", "podSelector"})
        self.assertTrue(source["namespaceSelector"]["matchLabels"])
        self.assertTrue(source["podSelector"]["matchLabels"])
        [container] = pod["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        self.assertEqual([(p["port"], p["protocol"]) for p in rule["ports"]], [("metrics", "TCP")])
        self.assertIn("metrics", ports)

    def test_daemonset_wires_the_agent(self):
        ds = self.objects["DaemonSet"]
        pod = ds["spec"]["template"]
        self.assertEqual(ds["spec"]["selector"]["matchLabels"].items() - pod["metadata"]["labels"].items(), set())
        spec = pod["spec"]
        self.assertEqual(spec["runtimeClassName"], "nvidia")
        self.assertTrue(spec["securityContext"]["runAsNonRoot"])
        agent = next(c for c in spec["containers"] if c["name"] == "agent")
        self.assertEqual(agent["args"][0], "agent")
        args = dict(a[2:].split("=", 1) for a in agent["args"][1:])
        port = next(p for p in agent["ports"] if p["name"] == "metrics")["containerPort"]
        self.assertEqual(args["listen"], f"0.0.0.0:{port}")
        mounts = {m["name"]: m["mountPath"] for m in agent["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        self.assertEqual(mounts["rank-files"], args["rank-dir"])
        self.assertEqual(volumes["rank-files"]["hostPath"]["path"], "/dev/shm/fragscope")
        self.assertEqual(args["config"], os.path.join(mounts["config"], "agent.toml"))
        config_maps = {g["name"] for g in self.kustomization["configMapGenerator"]}
        self.assertIn(volumes["config"]["configMap"]["name"], config_maps)
        for probe in ("livenessProbe", "readinessProbe"):
            self.assertEqual(agent[probe]["httpGet"]["path"], "/healthz")
            self.assertEqual(agent[probe]["httpGet"]["port"], "metrics")
        self.assertTrue({"cpu", "memory"} <= set(agent["resources"]["limits"]))
        self.assertFalse(agent["securityContext"]["allowPrivilegeEscalation"])
        init = spec["initContainers"][0]
        self.assertEqual(init["command"], ["chmod", "1777", "/dev/shm/fragscope"])

    def test_service_and_servicemonitor_reach_the_pods(self):
        pod_labels = self.objects["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
        service = self.objects["Service"]
        self.assertEqual(service["spec"]["selector"].items() - pod_labels.items(), set())
        self.assertEqual(service["spec"]["ports"][0]["targetPort"], "metrics")
        monitor = self.objects["ServiceMonitor"]
        self.assertEqual(monitor["spec"]["selector"]["matchLabels"].items() - service["metadata"]["labels"].items(), set())
        endpoint = monitor["spec"]["endpoints"][0]
        self.assertEqual(endpoint["port"], service["spec"]["ports"][0]["name"])
        self.assertEqual(endpoint["path"], "/metrics")
        self.assertTrue(endpoint["honorLabels"], "the agent's job label must survive the scrape")

    def test_prometheusrule_carries_exactly_the_rules_file(self):
        self.assertEqual(self.objects["PrometheusRule"]["spec"]["groups"],
                         load_yaml("prometheus/rules.yaml")["groups"])

    def test_rules_use_the_agent_thresholds(self):
        t = self.config["thresholds"]
        hold = f"{t['hold_for_seconds'] // 60}m"

        def threshold(alert):
            return float(re.search(r">\s*([0-9.]+)\s*$", self.rules[alert]["expr"]).group(1))

        self.assertEqual(threshold("FragscopeFragmentationHigh"), t["fragmentation_ratio"])
        self.assertEqual(threshold("FragscopeHbmHigh"), t["hbm_used_ratio"])
        self.assertEqual(threshold("FragscopeDataWaitHigh"), t["data_wait_ratio"])
        self.assertEqual(threshold("FragscopeAllocRetries"), t["alloc_retries_per_minute"])
        window_minutes = t["retry_window_seconds"] // 60
        self.assertIn(f"[{window_minutes}m]) / {window_minutes}", self.rules["FragscopeAllocRetries"]["expr"])
        for rule in self.rules.values():
            self.assertEqual(rule["for"], hold, rule["alert"])
        self.assertEqual(len(self.rules), 4)

    def test_rules_and_dashboard_only_use_metrics_the_agent_exports(self):
        exported = agent_metric_names()
        self.assertGreater(len(exported), 35)
        for rule in self.rules.values():
            self.assertLessEqual(metrics_in(rule["expr"]), exported, rule["alert"])
        with open(os.path.join(DEPLOY, "grafana", "fragscope-dashboard.json"), encoding="utf-8") as f:
            dashboard = json.load(f)
        titles = [p["title"] for p in dashboard["panels"]]
        for wanted in ("Fragmentation per rank", "Reserved vs allocated per rank", "Allocator retries per minute",
                       "Data wait per rank", "nvidia-smi's view beside the allocator's"):
            self.assertIn(wanted, titles)
        ids = [p["id"] for p in dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                used = metrics_in(target["expr"])
                self.assertTrue(used, target["expr"])
                self.assertLessEqual(used, exported, target["expr"])


if __name__ == "__main__":
    unittest.main()
