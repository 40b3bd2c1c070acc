"""Ray clusters for the tests and bench/bench_ray.py: ``TwoNodeCluster`` (``ray start --head``
plus a second ``ray start --address`` on this machine, each on its own loopback address and
ports, stopped by process group) and the environment its processes get. Imports nothing of Ray:
it drives the ``ray`` command."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def ray_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", **(extra or {}))
    env.pop("RAY_ADDRESS", None)
    return env


class TwoNodeCluster:
    """Two Ray nodes on this machine: a head on 127.0.0.2 and a worker node on 127.0.0.3, one CPU
    each (the machine has two), every port explicit. Workers inherit ``env`` (object-store
    credentials and endpoint must be set here, not in the driver). Always ``stop()``: it kills
    exactly the process groups it started (never ``ray stop``)."""

    def __init__(self, env: dict[str, str] | None = None, cpus_per_node: int = 1,
                 object_store_mb: int = 150, log_dir: str | None = None, nodes: int = 2) -> None:
        assert nodes in (1, 2)
        self.nodes = nodes
        self.env = ray_env(env)
        self.cpus, self.store = cpus_per_node, object_store_mb * 2**20
        self.procs: list[subprocess.Popen] = []
        self.log_dir = log_dir
        self.ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
        self.address = ""

    def _node_args(self, ip: str) -> list[str]:
        p = free_ports(6)
        return ["--node-ip-address", ip, "--num-cpus", str(self.cpus), "--object-store-memory", str(self.store),
                "--node-manager-port", str(p[0]), "--object-manager-port", str(p[1]),
                "--metrics-export-port", str(p[2]), "--dashboard-agent-listen-port", str(p[3]),
                "--dashboard-agent-grpc-port", str(p[4]), "--runtime-env-agent-port", str(p[5]),
                "--min-worker-port", "0", "--max-worker-port", "0", "--disable-usage-stats", "--block"]

    def _spawn(self, args: list[str], name: str) -> None:
        out = open(os.path.join(self.log_dir, f"{name}.log"), "wb") if self.log_dir else subprocess.DEVNULL
        self.procs.append(subprocess.Popen([self.ray_bin, "start", *args], env=self.env, start_new_session=True,
                                           stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def start(self, timeout: float = 120) -> TwoNodeCluster:
        gcs, dash = free_ports(2)
        self.address = f"127.0.0.2:{gcs}"
        deadline = time.monotonic() + timeout
        try:
            self._spawn(["--head", "--port", str(gcs), "--include-dashboard", "false", "--dashboard-port", str(dash),
                         *self._node_args("127.0.0.2")], "head")
            self._wait(deadline, 1)
            if self.nodes == 2:
                self._spawn(["--address", self.address, *self._node_args("127.0.0.3")], "worker")
                self._wait(deadline, 2)
        except BaseException:
            self.stop()
            raise
        return self

    def alive_nodes(self) -> int:
        probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                 "print(sum(1 for n in ray.nodes() if n['Alive'])); ray.shutdown()")
        r = subprocess.run([sys.executable, "-c", probe, self.address], env=self.env, capture_output=True, text=True,
                           timeout=60)
        return int(r.stdout.strip() or 0) if r.returncode == 0 else 0

    def _wait(self, deadline: float, nodes: int) -> None:
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError("a ray start process exited early" +
                                   (f" (logs in {self.log_dir})" if self.log_dir else ""))
            ok = subprocess.run([self.ray_bin, "health-check", "--address", self.address], env=self.env,
                                capture_output=True, timeout=30).returncode == 0
            if ok and (nodes == 1 or self.alive_nodes() >= nodes):
                return
            time.sleep(0.5)
        raise TimeoutError(f"the Ray cluster did not reach {nodes} nodes in time")

    def stop(self) -> None:
        """SIGTERM the process groups, then SIGKILL what is left: gcs_server and raylet ignore
        SIGTERM for more than 6 s."""
        for p in self.procs:
            _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and any(_group_alive(p.pid) for p in self.procs):
            time.sleep(0.2)
        for p in self.procs:
            _signal_group(p.pid, signal.SIGKILL)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []
        current = Path("/tmp/ray/ray_current_cluster")  # what `ray start --head` left for ray.init() to find
        try:
            if self.address and current.read_text().strip() == self.address:
                current.unlink()
        except OSError:
            pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """Any live (not zombie) process in the group?"""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
