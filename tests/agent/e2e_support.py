"""What the agent's end-to-end tests share: ports, bounded waits, HTTP, a real Prometheus.

Every wait is bounded and every process started here is stopped by `stop_processes`.
"""

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

PROMETHEUS = os.environ.get("PROMETHEUS_BIN", "prometheus")
SOURCE = os.environ["FRAGSCOPE_SOURCE_DIR"]
DEADLINE_S = 45


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, probe, timeout=DEADLINE_S):
    """Polls `probe` until it returns something truthy; returns that, or fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def http_get(url, timeout=5):
    """(status, body); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def stop_processes(processes):
    """Terminates, then kills what will not stop within 10 s; newest first."""
    for process in reversed(processes):
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def start_prometheus(folder, agent_port):
    """A real Prometheus scraping the agent every second with the shipped rules: (process, port)."""
    port = free_port()
    config = os.path.join(folder, "prometheus.yml")
    with open(config, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {os.path.join(SOURCE, 'deploy', 'prometheus', 'rules.yaml')}
scrape_configs:
  - job_name: fragscope
    static_configs:
      - targets: ['127.0.0.1:{agent_port}']
""")
    with open(os.path.join(folder, "prometheus.log"), "w") as log:
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={os.path.join(folder, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
    return process, port


def query(prometheus_port, promql):
    """Instant query: {sorted label tuple: value} for a vector result, {} when it fails."""
    url = f"http://127.0.0.1:{prometheus_port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    status, body = http_get(url)
    if status != 200:
        return {}
    return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in json.loads(body)["data"]["result"]}
