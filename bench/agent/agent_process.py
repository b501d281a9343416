"""What the agent benchmarks read of the daemon they start: a free loopback port for it, and its /proc figures."""
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid, key):
    """A /proc/PID/status figure in bytes (VmRSS, VmHWM); 0 when the kernel does not list it."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0
