"""Object stores, for real: an S3-compatible server (moto's, on 127.0.0.1) read and written through
the same s3:// URLs a user gives, by a two-node Ray cluster on this machine (``ray start --head``
plus a second ``ray start --address``, each node on its own loopback address), so records cross
nodes. Every record's output must be the CLI's, byte for byte, with the same report."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ray = pytest.importorskip("ray")
pafs = pytest.importorskip("pyarrow.fs")
pytest.importorskip("moto")

from engine_cases import BLOCK, cli_dir_run, two_inputs  # noqa: E402
from ray_cluster import TwoNodeCluster, ray_env  # noqa: E402

from compactor_cli import ray as xray  # noqa: E402
from compactor_cli.batch import configure  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RELS = ["a_hostile.jsonl", "sub/b_real.jsonl"]


@pytest.fixture(scope="module")
def s3_env():
    """moto's S3 server on 127.0.0.1 and the environment a user sets for it (the AWS SDK in
    pyarrow reads AWS_ENDPOINT_URL); no request may leave the machine."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "NO_PROXY": "127.0.0.1,localhost"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        import boto3

        s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
        for bucket in ("xin", "xout"):
            s3.create_bucket(Bucket=bucket)
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture(scope="module")
def two_nodes(s3_env, tmp_path_factory):
    """The two-node cluster; its workers get the S3 settings from `ray start`'s environment."""
    cluster = TwoNodeCluster(env=s3_env, log_dir=str(tmp_path_factory.mktemp("ray-logs"))).start()
    try:
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        try:
            yield cluster
        finally:
            ray.shutdown()
    finally:
        cluster.stop()


def upload(local_dir, url: str) -> None:
    pafs.copy_files(str(local_dir), url)


def normalise(items: list[dict], prefix: str) -> list[dict]:
    return [{**i, "source": i["source"].replace(prefix, "<in>")} for i in items]


@pytest.mark.parametrize("command,args,options", [
    ("toolcall", ["--keep", "1"], {"keep": 1}),
    ("compact", ["--token-threshold", "60", "--backend", "extractive", "--keep", "1", "--keep-recent", "2"],
     {"token_threshold": 60, "backend": "extractive", "keep": 1, "keep_recent": 2}),
])
def test_s3_to_s3_on_two_nodes_is_the_cli_byte_for_byte(two_nodes, runner, tmp_path, command, args, options):
    src = two_inputs(runner, tmp_path, command)
    cli_out, report, code = cli_dir_run(runner, command, args, src, tmp_path)
    prefix = f"s3://xin/{command}"
    upload(src, prefix)
    out = f"s3://xout/{command}"
    configured = configure(command, **options)
    result = xray.run(configured.settings, [prefix + "/"], out, report_path=f"s3://xout/{command}-report.json",
                      parameters=configured.parameters, block_bytes=BLOCK)
    assert len(result.nodes) == 2  # the records were compacted on both nodes
    for rel in RELS:
        assert xray.read_parts(out, rel) == (cli_out / rel).read_bytes(), rel
    assert len(xray.part_files(out, "sub/b_real.jsonl")) >= 2  # split into blocks (more with the 3 MB shared file)
    fs, path = pafs.FileSystem.from_uri(f"s3://xout/{command}-report.json")  # as xcompact resolves URLs
    with fs.open_input_stream(path) as fh:
        ray_report = json.loads(fh.read())
    assert normalise(ray_report["items"], prefix + "/") == normalise(report["items"], str(src) + "/")
    assert ray_report["totals"] == report["totals"] and ray_report["exit_code"] == code == result.exit_code


def test_the_cli_with_s3_urls_on_the_two_node_cluster(two_nodes, runner, tmp_path, s3_env):
    src = two_inputs(runner, tmp_path, "toolcall")
    cli_out, report, code = cli_dir_run(runner, "toolcall", ["--keep", "2"], src, tmp_path)
    upload(src, "s3://xin/cli")
    rep = tmp_path / "report.json"
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", "s3://xin/cli", "--keep", "2", "-q",
                          "--engine", "ray", "--address", two_nodes.address, "-o", "s3://xout/cli/", "--report",
                          str(rep)], env=ray_env(s3_env), capture_output=True, text=True, timeout=300)
    assert res.returncode == code, res.stderr
    assert res.stdout == ""
    for rel in RELS:
        assert xray.read_parts("s3://xout/cli", rel) == (cli_out / rel).read_bytes()
    ray_report = json.loads(rep.read_text())
    assert ray_report["totals"] == report["totals"]
    assert ray_report["parameters"]["address"] == two_nodes.address
    # a second run into the same place would mix parts of two runs: refused before any work
    again = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", "s3://xin/cli", "--engine", "ray",
                            "--address", two_nodes.address, "-o", "s3://xout/cli"], env=ray_env(s3_env),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "already holds files" in again.stderr


def test_a_missing_object_is_a_file_error_and_a_missing_bucket_a_usage_error(two_nodes, runner, tmp_path):
    from compactor_cli.cli import cli

    upload(two_inputs(runner, tmp_path, "toolcall"), "s3://xin/some")
    result = xray.run("toolcall", ["s3://xin/nothing-here.jsonl", "s3://xin/some/a_hostile.jsonl"], "s3://xout/some",
                      report_path=str(tmp_path / "r.json"))
    items = json.loads((tmp_path / "r.json").read_text())["items"]
    assert items[0] == {"source": "s3://xin/nothing-here.jsonl", "line": None, "status": "INVALID_INPUT",
                        "error": "no such file"}
    assert result.report.file_errors == 1 and result.exit_code == 1
    res = runner.invoke(cli, ["toolcall", "s3://xin/some/", "--engine", "ray", "-o", "s3://no-such-bucket/x"])
    assert res.exit_code == 2 and "the bucket no-such-bucket does not exist" in res.output
