"""xcompact on Ray against the CLI, on the same data: a dataset of the real transcripts beside the
project (../shared/data, repeated to --size-mb) in an S3-compatible bucket (moto's server on
127.0.0.1), compacted with --engine ray to another bucket on a two-node Ray cluster on this
machine, then on a one-node cluster; every record checked byte for byte against the CLI's
output, and the report totals against the CLI's.

    python bench/bench_ray.py --size-mb 200

Fixed start-up is measured apart from throughput: the cluster's start, and the same command on a
one-record input (driver start, connect, plan, Ray Data's start) on the running cluster. The
throughput is the dataset's size over (the run's wall time - that fixed cost). Needs
``pip install -e '.[ray,ray-test]'``. Every process it starts is stopped by its id.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
from ray_cluster import TwoNodeCluster  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
REAL = ["taubench_gpt-4o-airline.jsonl", "swe-agent.jsonl", "spotter-claude-code.jsonl"]
COMMAND = ["compact", "--backend", "extractive", "--token-threshold", "20000"]


def dataset(size_mb: float) -> str:
    """The real transcripts, whole files in turn, until --size-mb (200 MB: 37 rounds, 8,399 records)."""
    path = os.path.join(HERE, "data", f"real_{size_mb:g}mb.jsonl")
    if os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    blobs = [open(os.path.join(SHARED, name), "rb").read() for name in REAL]
    one_round = sum(len(b) for b in blobs)
    rounds = max(1, round(size_mb * 1e6 / one_round))
    with open(path + ".tmp", "wb") as fh:
        for _ in range(rounds):
            for b in blobs:
                fh.write(b if b.endswith(b"\n") else b + b"\n")
    os.replace(path + ".tmp", path)
    return path


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class MotoServer:
    """moto's S3-compatible server as its own process (the driver must not serve the workers)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "moto_server"), "-H", "127.0.0.1",
                                      "-p", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}", "AWS_ACCESS_KEY_ID": "bench",
                    "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                    "AWS_EC2_METADATA_DISABLED": "true", "NO_PROXY": "127.0.0.1,localhost"}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise SystemExit("moto_server did not start")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all processes, /proc/stat)."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle and iowait


def cpu_of(pids: set[str]) -> float:
    """CPU seconds used so far by these processes (those still alive)."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


#: Processes that were running before this benchmark started: other users' work on the machine.
FOREIGN = {p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())}
CPU_LOG: list[tuple[str, float, float, float]] = []  # label, wall, CPU s of this benchmark, CPU s of others


def xcompact(*args: str, env: dict[str, str], label: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
    busy, foreign = machine_busy(), cpu_of(FOREIGN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "compactor_cli", *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if label:
        others = cpu_of(FOREIGN) - foreign
        CPU_LOG.append((label, wall, machine_busy() - busy - others, others))
    if r.returncode not in (0, 1):
        raise SystemExit(f"xcompact {' '.join(args)}: exit {r.returncode}\n{r.stderr[-3000:]}")
    return wall, r


def ray_parts(url: str, rel: str) -> bytes:
    from compactor_cli.ray import read_parts

    return read_parts(url, rel)


def fit(small: tuple[float, float], full: tuple[float, float]) -> tuple[float, float]:
    """(fixed seconds, MB/s) of wall = fixed + size / throughput through two (MB, seconds) points."""
    (m1, t1), (m2, t2) = small, full
    throughput = (m2 - m1) / max(t2 - t1, 1e-9)
    return t2 - m2 / throughput, throughput


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=200)
    ap.add_argument("--skip-one-node", action="store_true")
    ap.add_argument("--repeat", type=int, default=2, help="best of N for each timed run (other users share the machine)")
    args = ap.parse_args()
    src = dataset(args.size_mb)
    half = dataset(args.size_mb / 2)
    sizes = {"full": os.path.getsize(src) / 1e6, "half": os.path.getsize(half) / 1e6}
    n_records = sum(1 for line in open(src, "rb") if line.strip())
    tmp = tempfile.mkdtemp(prefix="xcompact-bench-ray-")
    print(f"{src}: {sizes['full']:.0f} MB, {n_records} records (and {half}: {sizes['half']:.0f} MB, to separate the "
          f"fixed cost from throughput), {os.cpu_count()} cores; xcompact {' '.join(COMMAND)}", flush=True)

    base_env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    base_env.pop("RAY_ADDRESS", None)

    def best(label: str, argv_for, env) -> float:
        return min(xcompact(*argv_for(i), env=env, label=label)[0] for i in range(args.repeat))

    cli = {}
    for name, path in (("half", half), ("full", src)):
        out, rep = os.path.join(tmp, f"cli-{name}.jsonl"), os.path.join(tmp, f"cli-{name}-report.json")
        cli[name] = best(f"CLI -j 2, {name}", lambda i: (*COMMAND, path, "-j", "2", "-q", "-o", out, "--report", rep),
                         base_env)
    cli_bytes = open(os.path.join(tmp, "cli-full.jsonl"), "rb").read()
    cli_totals = json.load(open(os.path.join(tmp, "cli-full-report.json")))["totals"]
    results = [("CLI `-j 2`, local files", cli, None, None)]
    print(f"  CLI -j 2: {cli['half']:.1f} s / {cli['full']:.1f} s", flush=True)

    moto = MotoServer()
    env = {**base_env, **moto.env}
    os.environ.update(moto.env)
    checks: list[tuple[str, bool]] = []
    try:
        import boto3

        s3 = boto3.client("s3", endpoint_url=moto.env["AWS_ENDPOINT_URL"])
        for bucket in ("corpus", "compacted"):
            s3.create_bucket(Bucket=bucket)
        t = time.perf_counter()
        s3.upload_file(src, "corpus", "full/data.jsonl")
        s3.upload_file(half, "corpus", "half/data.jsonl")
        print(f"  upload to the bucket: {time.perf_counter() - t:.1f} s", flush=True)

        layouts = [("two nodes x 1 CPU", 2)] + ([] if args.skip_one_node else [("one node x 1 CPU", 1)])
        for label, nodes in layouts:
            t = time.perf_counter()
            cluster = TwoNodeCluster(env=moto.env, nodes=nodes, object_store_mb=300,
                                     log_dir=tempfile.mkdtemp(prefix="ray-logs-", dir=tmp)).start()
            t_start = time.perf_counter() - t
            tag = f"n{nodes}"
            try:
                ray_args = ("--engine", "ray", "--address", cluster.address, "-q")
                t_first = xcompact(*COMMAND, "s3://corpus/half/", *ray_args, "-o", f"s3://compacted/{tag}-first/",
                                   env=env)[0]  # the first job on a fresh cluster
                times = {}
                for name in ("half", "full"):
                    rep = os.path.join(tmp, f"{tag}-{name}-report.json")
                    times[name] = best(f"Ray, {label}, S3, {name}", lambda i: (
                        *COMMAND, f"s3://corpus/{name}/", *ray_args, "-o", f"s3://compacted/{tag}-{name}-{i}/",
                        "--report", rep), env)
                checks.append((f"{label}, S3: every record byte-identical to the CLI's", all(
                    ray_parts(f"s3://compacted/{tag}-full-{i}", "data.jsonl") == cli_bytes
                    for i in range(args.repeat))))
                checks.append((f"{label}, S3: report totals identical to the CLI's",
                               json.load(open(os.path.join(tmp, f"{tag}-full-report.json")))["totals"] == cli_totals))
                results.append((f"Ray, {label}, S3 -> S3", times, t_start, t_first))
                if nodes == 2:  # the same data from and to local files: Ray without the S3 server's cost
                    local = {}
                    for name, path in (("half", half), ("full", src)):
                        local[name] = best(f"Ray, {label}, local files, {name}", lambda i: (
                            *COMMAND, path, *ray_args, "-o", os.path.join(tmp, f"ray-local-{name}-{i}")), env)
                    checks.append((f"{label}, local files: every record byte-identical to the CLI's",
                                   ray_parts(os.path.join(tmp, "ray-local-full-0"), os.path.basename(src)) == cli_bytes))
                    results.append((f"Ray, {label}, local files -> local parts", local, None, None))
            finally:
                cluster.stop()
            print(f"  {label}: cluster start {t_start:.1f} s, first job {t_first:.1f} s, runs {times}", flush=True)
    finally:
        moto.stop()

    print(f"\n| what | wall s, {sizes['full']:.0f} MB | x CLI | fixed s (fit) | MB/s after it (fit) |")
    print("|---|---|---|---|---|")
    fits = {}
    for label, times, t_start, t_first in results:
        fixed, thr = fit((sizes["half"], times["half"]), (sizes["full"], times["full"]))
        fits[label] = thr
        print(f"| {label} | {times['full']:.1f} | {times['full'] / cli['full']:.2f} | {fixed:.1f} | {thr:.1f} |")
        if t_start is not None:
            print(f"| ... before it: `ray start` of the cluster | {t_start:.1f} | | | |")
            print(f"| ... before it: the first job on the fresh cluster ({sizes['half']:.0f} MB) | {t_first:.1f} | | | |")
    two = fits.get("Ray, two nodes x 1 CPU, S3 -> S3")
    one = fits.get("Ray, one node x 1 CPU, S3 -> S3")
    if two and one:
        print(f"\nthroughput after the fixed cost, two nodes / one node: {two / one:.2f}x")
    print(f"\nCPU seconds during each run ({os.cpu_count()} cores; 'others': processes that were running before the "
          "benchmark started, i.e. other users' work):\n")
    print("| run | wall s | CPU s of the run (xcompact, Ray, S3 server) | CPU s of others | cores left idle |")
    print("|---|---|---|---|---|")
    for label, wall, ours, others in CPU_LOG:
        idle = max(0.0, (os.cpu_count() or 1) * wall - ours - others) / wall
        print(f"| {label} | {wall:.1f} | {ours:.1f} | {others:.1f} | {idle:.2f} |")
    print()
    for text, ok in checks:
        print(f"{'ok' if ok else 'MISMATCH'}: {text}")
    if not all(ok for _, ok in checks):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
