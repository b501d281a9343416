"""deploy/: every manifest fits the Kubernetes API schema and the pieces fit together.

Schema: k8s_schema.py walks each object through Debian python3-kubernetes' generated API types
(Kubernetes 1.22); its docstring says what that does not cover. Where a `kubectl` with
kustomize is on PATH, each kustomization is also built with it and every rendered object
validated; without one that cross-check is skipped and the kustomizations are checked by
the explicit rules below. Custom resources (ServiceMonitor, PrometheusRule) have no schema
here: their fields are checked one by one.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import tomllib
import unittest

import yaml  # Debian python3-yaml

import k8s_schema

ROOT = os.environ.get("FRAGSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
BASE = os.path.join(DEPLOY, "kubernetes")
OVERLAYS = os.path.join(DEPLOY, "overlays")
CRD_KINDS = {"ServiceMonitor", "PrometheusRule", "PodMonitor"}
KUSTOMIZATIONS = ["", "overlays/prometheus-operator", "overlays/drain"]


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def load_one(relative):
    (doc,) = load_all(os.path.join(DEPLOY, relative))
    return doc


def kustomization(directory):
    return load_one(os.path.join(directory, "kustomization.yaml"))


def objects_of(directory):
    """{(kind, name): object} of the resource files a kustomization lists, bases included."""
    out = {}
    for resource in kustomization(directory).get("resources", []):
        path = os.path.normpath(os.path.join(DEPLOY, directory, resource))
        if os.path.isdir(path):
            out.update(objects_of(os.path.relpath(path, DEPLOY)))
        else:
            out.update({(o["kind"], o["metadata"]["name"]): o for o in load_all(path)})
    return out


def agent_metric_names():
    """Every metric name the agent can export, read off its source."""
    with open(os.path.join(ROOT, "src", "agent", "node_metrics.cpp"), encoding="utf-8") as f:
        return set(re.findall(r'"(fragscope_[a-z_]+)"', f.read()))


def metrics_in(expr):
    return set(re.findall(r"\bfragscope_[a-z_]+", expr))


def pod_security_restricted_problems(pod_spec):
    """What Pod Security "restricted" (which includes "baseline") rejects in a pod spec: the
    checks of the Pod Security Standards that these manifests could trip."""
    problems = []
    allowed_volumes = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                       "projected", "secret"}
    for volume in pod_spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= allowed_volumes:
            problems.append(f"volume {volume['name']}: {', '.join(sorted(kinds))}")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(key):
            problems.append(key)
    pod_context = pod_spec.get("securityContext", {})
    for container in pod_spec.get("initContainers", []) + pod_spec["containers"]:
        context = container.get("securityContext", {})
        name = container["name"]
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        if "ALL" not in context.get("capabilities", {}).get("drop", []):
            problems.append(f"{name}: capabilities do not drop ALL")
        if set(context.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: adds capabilities")
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot is not true")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            problems.append(f"{name}: runs as user 0")
        seccomp = context.get("seccompProfile", pod_context.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: no RuntimeDefault seccomp profile")
        for port in container.get("ports", []):
            if "hostPort" in port:
                problems.append(f"{name}: hostPort")
    return problems


class SchemaTest(unittest.TestCase):
    def test_every_yaml_file_parses(self):
        files = glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True)
        self.assertGreaterEqual(len(files), 17)
        for path in files:
            docs = load_all(path)
            self.assertTrue(docs, path)
            for doc in docs:
                self.assertIsInstance(doc, dict, path)

    def test_every_kubernetes_object_fits_the_api_schema(self):
        checked = 0
        for path in sorted(glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True)):
            relative = os.path.relpath(path, DEPLOY)
            if relative.startswith("prometheus/") or relative.endswith("kustomization.yaml"):
                continue
            patches = {p["path"] for p in kustomization(os.path.dirname(relative)).get("patches", [])} \
                if os.path.exists(os.path.join(os.path.dirname(path), "kustomization.yaml")) else set()
            for obj in load_all(path):
                if obj["kind"] in CRD_KINDS:
                    continue
                errors = k8s_schema.validate(obj, f"{relative}: ", partial=os.path.basename(path) in patches)
                self.assertEqual(errors, [], "\n".join(errors))
                checked += 1
        self.assertGreaterEqual(checked, 10)

    def test_the_validator_catches_what_the_api_server_would_refuse(self):
        ds = load_one("kubernetes/daemonset.yaml")
        spec = ds["spec"]["template"]["spec"]
        agent = spec["containers"][0]
        agent["imagePullPolcy"] = "Always"           # misspelt field
        agent["ports"][0]["containerPort"] = "9478"  # string for an integer
        spec["nodeSelector"]["gpu"] = True           # unquoted YAML boolean in a string map
        del agent["name"]                            # required field
        spec["volumes"][0]["hostPath"] = ["/dev/shm/fragscope"]  # list for an object
        errors = k8s_schema.validate(ds)
        base = "DaemonSet/fragscope-agent.spec.template.spec."
        self.assertEqual(sorted(errors), sorted([
            base + "nodeSelector.gpu: must be a string, not bool True",
            base + "containers[0].ports[0].containerPort: must be an integer, not '9478'",
            base + "containers[0].imagePullPolcy: unknown field of V1Container",
            base + "containers[0].name: required by V1Container",
            base + "volumes[0].hostPath: must be an object (V1HostPathVolumeSource)",
        ]))
        self.assertIn("is not in the Kubernetes", k8s_schema.validate(
            {"apiVersion": "apps/v1", "kind": "DeamonSet", "metadata": {"name": "x"}})[0])

    @unittest.skipIf(shutil.which("kubectl") is None, "no kubectl with kustomize on PATH: rendered objects not checked")
    def test_kustomize_builds_and_every_rendered_object_fits_the_schema(self):
        for directory in KUSTOMIZATIONS:
            built = subprocess.run(["kubectl", "kustomize", os.path.join(DEPLOY, directory)], capture_output=True,
                                   text=True, timeout=60)
            self.assertEqual(built.returncode, 0, built.stderr)
            rendered = [o for o in yaml.safe_load_all(built.stdout) if o]
            kinds = {o["kind"] for o in rendered}
            for obj in rendered:
                if obj["kind"] not in CRD_KINDS:
                    errors = k8s_schema.validate(obj, f"kustomize {directory or '.'}: ")
                    self.assertEqual(errors, [], "\n".join(errors))
                if obj["kind"] not in k8s_schema.CLUSTER_SCOPED:
                    self.assertEqual(obj["metadata"]["namespace"], "fragscope", obj["metadata"]["name"])
            ds = next(o for o in rendered if o["kind"] == "DaemonSet")
            images = {c["image"] for c in ds["spec"]["template"]["spec"]["containers"]
                      + ds["spec"]["template"]["spec"]["initContainers"]}
            self.assertEqual(images, {"localhost/fragscope-agent:0.1.0"})
            config = next(o for o in rendered if o["kind"] == "ConfigMap" and "agent.toml" in o.get("data", {}))
            volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
            self.assertEqual(volumes["config"]["configMap"]["name"], config["metadata"]["name"])  # hash suffix
            expected = {"": set(), "overlays/prometheus-operator": {"ServiceMonitor", "PrometheusRule"},
                        "overlays/drain": {"ClusterRole", "ClusterRoleBinding"}}[directory]
            self.assertEqual(kinds - {"Namespace", "PriorityClass", "ServiceAccount", "DaemonSet", "Service",
                                      "NetworkPolicy", "ConfigMap"}, expected, directory)
            if directory == "overlays/drain":
                self.assertTrue(ds["spec"]["template"]["spec"]["automountServiceAccountToken"])
                self.assertIn("enabled = true", config["data"]["agent.toml"].split("[actions.drain]")[1])


class KustomizationTest(unittest.TestCase):
    def test_references_exist_and_the_base_lists_every_object_file(self):
        for directory in KUSTOMIZATIONS + ["kubernetes"]:
            k = kustomization(directory)
            for resource in k.get("resources", []):
                path = os.path.join(DEPLOY, directory, resource)
                self.assertTrue(os.path.isfile(path) or os.path.isfile(os.path.join(path, "kustomization.yaml")),
                                f"{directory}: {resource}")
            for generator in k.get("configMapGenerator", []):
                for path in generator["files"]:
                    self.assertTrue(os.path.isfile(os.path.join(DEPLOY, directory, path)), path)
            for patch in k.get("patches", []):
                self.assertTrue(os.path.isfile(os.path.join(DEPLOY, directory, patch["path"])), patch)
        listed = set(kustomization("kubernetes")["resources"])
        files = {os.path.basename(p) for p in glob.glob(os.path.join(BASE, "*.yaml"))} - {"kustomization.yaml"}
        self.assertEqual(files - listed, set(), "object files the base does not apply")

    def test_base_applies_without_crds_and_overlays_build_on_it(self):
        self.assertEqual(kustomization("")["resources"], ["kubernetes"])
        base = objects_of("")
        self.assertFalse({kind for kind, _ in base} & CRD_KINDS, "the base must apply on a plain cluster")
        for overlay in ("overlays/prometheus-operator", "overlays/drain"):
            self.assertIn("../../kubernetes", kustomization(overlay)["resources"])
            self.assertEqual(kustomization(overlay)["namespace"], "fragscope")
        operator = objects_of("overlays/prometheus-operator")
        self.assertEqual({kind for kind, _ in operator} - {kind for kind, _ in base},
                         {"ServiceMonitor", "PrometheusRule"})

    def test_drain_overlay_config_differs_only_in_the_drain(self):
        with open(os.path.join(BASE, "agent.toml"), "rb") as f:
            base = tomllib.load(f)
        with open(os.path.join(OVERLAYS, "drain", "agent.toml"), "rb") as f:
            drain = tomllib.load(f)
        base_drain, overlay_drain = base["actions"].pop("drain"), drain["actions"].pop("drain")
        self.assertEqual(base, drain)
        self.assertEqual(overlay_drain["rules"], base_drain["rules"])
        self.assertTrue(overlay_drain["enabled"])
        self.assertTrue(overlay_drain["dry_run"], "the overlay ships the drain in dry run")
        self.assertEqual(overlay_drain["command"][:3], ["kubectl", "drain", "{node}"])
        patch = load_one("overlays/drain/token.yaml")
        self.assertTrue(patch["spec"]["template"]["spec"]["automountServiceAccountToken"])
        self.assertEqual(kustomization("overlays/drain")["configMapGenerator"][0]["behavior"], "replace")


class AgentObjectsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.objects = objects_of("")
        cls.kinds = {kind: obj for (kind, _), obj in cls.objects.items()}

    def test_network_policy_admits_only_prometheus_to_the_metrics_port(self):
        policy = self.kinds["NetworkPolicy"]["spec"]
        pod = self.kinds["DaemonSet"]["spec"]["template"]
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
        ds = self.kinds["DaemonSet"]
        pod = ds["spec"]["template"]
        self.assertEqual(ds["spec"]["selector"]["matchLabels"].items() - pod["metadata"]["labels"].items(), set())
        spec = pod["spec"]
        self.assertEqual(spec["runtimeClassName"], "nvidia")
        self.assertTrue(spec["securityContext"]["runAsNonRoot"])
        self.assertEqual(spec["securityContext"]["runAsUser"], 65532)  # the image's user
        agent = next(c for c in spec["containers"] if c["name"] == "agent")
        self.assertEqual(agent["args"][0], "agent")
        args = dict(a[2:].split("=", 1) for a in agent["args"][1:])
        port = next(p for p in agent["ports"] if p["name"] == "metrics")["containerPort"]
        self.assertEqual(args["listen"], f"0.0.0.0:{port}")
        mounts = {m["name"]: m["mountPath"] for m in agent["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        self.assertEqual(mounts["rank-files"], args["rank-dir"])
        # It writes there only for checkpoint requests, off in the shipped config.
        self.assertTrue(next(m for m in agent["volumeMounts"] if m["name"] == "rank-files")["readOnly"])
        # under /run, which only root writes: no user can make the folder first or make it a link
        self.assertEqual(volumes["rank-files"]["hostPath"]["path"], "/run/fragscope")
        self.assertEqual(args["config"], os.path.join(mounts["config"], "agent.toml"))
        config_maps = {g["name"] for g in kustomization("kubernetes")["configMapGenerator"]}
        self.assertIn(volumes["config"]["configMap"]["name"], config_maps)
        for probe in ("livenessProbe", "readinessProbe"):
            self.assertEqual(agent[probe]["httpGet"]["path"], "/healthz")
            self.assertEqual(agent[probe]["httpGet"]["port"], "metrics")
        self.assertTrue({"cpu", "memory"} <= set(agent["resources"]["limits"]))
        self.assertFalse(agent["securityContext"]["allowPrivilegeEscalation"])
        init = spec["initContainers"][0]
        self.assertEqual(init["command"][:3], ["/bin/busybox", "sh", "-c"])
        self.assertTrue(init["command"][3].endswith("chgrp 65532 /dev/shm/fragscope && chmod 3777 /dev/shm/fragscope"))
        self.assertTrue({"cpu", "memory"} <= set(init["resources"]["limits"]))
        self.assertEqual(init["image"], agent["image"], "no image from another registry")
        self.assertEqual(kustomization("kubernetes")["images"][0]["name"], agent["image"])

    def test_agent_reads_the_rank_folders_through_its_group_without_capabilities(self):
        spec = self.kinds["DaemonSet"]["spec"]["template"]["spec"]
        pod = spec["securityContext"]
        agent = next(c for c in spec["containers"] if c["name"] == "agent")
        init = next(c for c in spec["initContainers"] if c["name"] == "rank-dir")
        for container in (agent, init):
            context = container["securityContext"]
            self.assertFalse(context["allowPrivilegeEscalation"], container["name"])
            self.assertTrue(context["readOnlyRootFilesystem"], container["name"])
            self.assertEqual(context["capabilities"], {"drop": ["ALL"]}, container["name"])
            self.assertNotIn("runAsGroup", context, "the pod's group: the agent's, which the init container sets")
            self.assertNotIn("privileged", context)
        self.assertNotIn("runAsUser", agent["securityContext"])
        self.assertNotIn("automountServiceAccountToken", spec)
        # The hooks make their folders 0750 and files 0640 in the root's group when it is
        # set-group-ID (python/fragscope/rank_folder.py): the agent's group, mode 3777.
        self.assertEqual(init["securityContext"]["runAsUser"], 0, "the owner of the kubelet's directory")
        script = init["command"][3]
        # It opens only a folder root owns (a user's own folder, made before the kubelet's, stays closed).
        self.assertTrue(script.startswith('if [ "$(stat -c %u /dev/shm/fragscope)" != 0 ]; then'), script)
        self.assertIn(f"chgrp {pod['runAsGroup']} /dev/shm/fragscope", script)
        self.assertIn("chmod 3777 /dev/shm/fragscope", script)
        self.assertEqual(pod["runAsGroup"], 65532)

    def test_priority_class_is_our_own_and_usable_outside_kube_system(self):
        spec = self.kinds["DaemonSet"]["spec"]["template"]["spec"]
        self.assertFalse(spec["priorityClassName"].startswith("system-"))
        priority = self.objects[("PriorityClass", spec["priorityClassName"])]
        self.assertLess(priority["value"], 1_000_000_000, "user classes stay below the system range")
        self.assertFalse(priority["globalDefault"])
        self.assertEqual(priority["preemptionPolicy"], "Never")

    def test_service_account_has_no_token_unless_the_drain_overlay_asks(self):
        spec = self.kinds["DaemonSet"]["spec"]["template"]["spec"]
        account = self.objects[("ServiceAccount", spec["serviceAccountName"])]
        self.assertFalse(account["automountServiceAccountToken"])
        self.assertNotIn("automountServiceAccountToken", spec)

    def test_drain_rbac_is_least_privilege(self):
        role, binding = load_all(os.path.join(OVERLAYS, "drain", "rbac.yaml"))
        granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
                   for resource in rule["resources"] for verb in rule["verbs"]}
        # Exactly the calls of `kubectl drain --ignore-daemonsets --delete-emptydir-data`.
        self.assertEqual(granted, {("", "nodes", "get"), ("", "nodes", "patch"), ("", "pods", "get"),
                                   ("", "pods", "list"), ("", "pods/eviction", "create"),
                                   ("apps", "daemonsets", "get")})
        self.assertEqual(binding["roleRef"]["name"], role["metadata"]["name"])
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": "fragscope-agent",
                                                "namespace": "fragscope"}])

    def test_namespace_admits_the_hostpath_and_says_why(self):
        labels = self.kinds["Namespace"]["metadata"]["labels"]
        self.assertEqual(labels["pod-security.kubernetes.io/enforce"], "privileged")
        problems = pod_security_restricted_problems(self.kinds["DaemonSet"]["spec"]["template"]["spec"])
        self.assertIn("volume rank-files: hostPath", problems)

    def test_service_reaches_the_pods(self):
        pod_labels = self.kinds["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
        service = self.kinds["Service"]
        self.assertEqual(service["spec"]["selector"].items() - pod_labels.items(), set())
        self.assertEqual(service["spec"]["ports"][0]["targetPort"], "metrics")
        self.assertEqual(service["spec"]["clusterIP"], "None")


class TrainingExamplesTest(unittest.TestCase):
    def job(self, name):
        return load_one(f"kubernetes/examples/{name}")["spec"]["template"]["spec"]

    def test_hostpath_job_mounts_the_folder_the_agent_reads(self):
        spec = self.job("training-job.yaml")
        agent_volume = next(v for v in load_one("kubernetes/daemonset.yaml")["spec"]["template"]["spec"]["volumes"]
                            if v["name"] == "rank-files")
        trainer = spec["containers"][0]
        env = {e["name"]: e["value"] for e in trainer["env"]}
        mount = next(m for m in trainer["volumeMounts"] if m["name"] == "fragscope-ranks")
        volume = next(v for v in spec["volumes"] if v["name"] == "fragscope-ranks")
        self.assertEqual(volume["hostPath"]["path"], agent_volume["hostPath"]["path"])
        self.assertEqual(mount["mountPath"], env["FRAGSCOPE_RANK_DIR"])
        self.assertTrue(env["FRAGSCOPE_JOB"])
        self.assertIn("volume fragscope-ranks: hostPath", pod_security_restricted_problems(spec))

    def test_restricted_job_passes_pod_security_restricted(self):
        spec = self.job("training-job-restricted.yaml")
        self.assertEqual(pod_security_restricted_problems(spec), [])
        sidecar = spec["initContainers"][0]
        self.assertEqual(sidecar["restartPolicy"], "Always", "a sidecar, so the Job completes")
        trainer = spec["containers"][0]
        env = {e["name"]: e["value"] for e in trainer["env"]}
        args = dict(a[2:].split("=", 1) for a in sidecar["args"][1:])
        mounts = {c["name"]: {m["name"]: m["mountPath"] for m in c["volumeMounts"]} for c in (sidecar, trainer)}
        self.assertEqual(mounts[sidecar["name"]]["fragscope-ranks"], args["rank-dir"])
        self.assertEqual(mounts[trainer["name"]]["fragscope-ranks"], env["FRAGSCOPE_RANK_DIR"])
        self.assertEqual(next(v for v in spec["volumes"] if v["name"] == "fragscope-ranks")["emptyDir"]["medium"],
                         "Memory")


class PrometheusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(BASE, "agent.toml"), "rb") as f:
            cls.config = tomllib.load(f)
        cls.rules = {r["alert"]: r for g in load_one("prometheus/rules.yaml")["groups"] for r in g["rules"]}

    def test_servicemonitor_reaches_the_service_without_honor_labels(self):
        service = load_one("kubernetes/service.yaml")
        monitor = load_one("overlays/prometheus-operator/servicemonitor.yaml")
        self.assertEqual(monitor["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(set(monitor["spec"]), {"selector", "endpoints"})
        self.assertEqual(monitor["spec"]["selector"]["matchLabels"].items() - service["metadata"]["labels"].items(),
                         set())
        (endpoint,) = monitor["spec"]["endpoints"]
        self.assertEqual(set(endpoint) - {"port", "path", "interval", "relabelings"}, set())
        self.assertEqual(endpoint["port"], service["spec"]["ports"][0]["name"])
        self.assertEqual(endpoint["path"], "/metrics")
        self.assertNotIn("honorLabels", endpoint, "the agent exports training_job, not job")

    def test_prometheusrule_carries_exactly_the_rules_file(self):
        rule = load_one("overlays/prometheus-operator/prometheusrule.yaml")
        self.assertEqual(rule["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(set(rule["spec"]), {"groups"})
        self.assertEqual(rule["spec"]["groups"], load_one("prometheus/rules.yaml")["groups"])

    def test_rules_use_the_agent_thresholds(self):
        t = self.config["thresholds"]
        hold = f"{t['hold_for_seconds'] // 60}m"

        def threshold(alert):
            return float(re.search(r">\s*([0-9.]+)", self.rules[alert]["expr"]).group(1))

        self.assertEqual(threshold("FragscopeFragmentationHigh"), t["fragmentation_ratio"])
        self.assertEqual(threshold("FragscopeHbmHigh"), t["hbm_used_ratio"])
        self.assertEqual(threshold("FragscopeDataWaitHigh"), t["data_wait_ratio"])
        self.assertEqual(threshold("FragscopeAllocRetries"), t["alloc_retries_per_minute"])
        window_minutes = t["retry_window_seconds"] // 60
        self.assertIn(f"[{window_minutes}m]) / {window_minutes}", self.rules["FragscopeAllocRetries"]["expr"])
        # The agent's own rules hold for hold_for_seconds, as its actions do; FragscopeNvmlDown is about the agent.
        agent_rules = {name: rule for name, rule in self.rules.items() if name != "FragscopeNvmlDown"}
        for rule in agent_rules.values():
            self.assertEqual(rule["for"], hold, rule["alert"])
        self.assertEqual(len(agent_rules), 4)
        self.assertEqual(self.rules["FragscopeNvmlDown"]["expr"], "fragscope_nvml_up == 0")

    def test_every_alert_has_a_runbook_in_docs_and_no_pid_or_job_label(self):
        with open(os.path.join(ROOT, "docs", "runbooks.md"), encoding="utf-8") as f:
            anchors = {"#" + re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
                       for h in re.findall(r"^## (.+)$", f.read(), re.M)}
        for name, rule in self.rules.items():
            url = rule["annotations"]["runbook_url"]
            self.assertTrue(url.startswith("docs/runbooks.md#"), url)
            self.assertIn(url[len("docs/runbooks.md"):], anchors, name)
            text = rule["expr"] + json.dumps(rule["annotations"])
            self.assertNotIn("$labels.pid", text)
            self.assertNotIn("$labels.job", text)
            self.assertNotRegex(rule["expr"], r"\bjob=")

    def test_rules_and_dashboard_only_use_metrics_the_agent_exports(self):
        exported = agent_metric_names()
        self.assertGreater(len(exported), 38)
        for rule in self.rules.values():
            self.assertLessEqual(metrics_in(rule["expr"]), exported, rule["alert"])
        with open(os.path.join(BASE, "fragscope-dashboard.json"), encoding="utf-8") as f:
            dashboard = json.load(f)
        titles = [p["title"] for p in dashboard["panels"]]
        for wanted in ("Fragmentation per rank", "Reserved vs allocated per rank", "Allocator retries per minute",
                       "Data wait per rank", "nvidia-smi's view beside the allocator's"):
            self.assertIn(wanted, titles)
        ids = [p["id"] for p in dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        self.assertIn("training_job", variables["training_job"]["query"]["query"])
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                used = metrics_in(target["expr"])
                self.assertTrue(used, target["expr"])
                self.assertLessEqual(used, exported, target["expr"])
                self.assertNotIn("job=~", target["expr"].replace("training_job=~", ""), target["expr"])
                self.assertNotIn("{{job}}", target.get("legendFormat", ""))


if __name__ == "__main__":
    unittest.main()
