"""xcompact on Ray Data, on a real local Ray cluster (one for the module): every record's output
byte for byte the CLI's, the same report items, totals and exit code, input order kept, hostile
records included (U+2028 inside strings, mixed content, extra keys, floats, integers beside
nulls, a record larger than the block size, bad JSON lines).

The two-node cluster the object-store tests and bench/bench_ray.py start is in ray_cluster.py;
the hostile records and the option sets compared are in engine_cases.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("pyarrow")

from engine_cases import BLOCK, CASE_IDS, CASES, cli_dir_run, two_inputs, write_hostile  # noqa: E402
from helpers import ROOT  # noqa: E402
from ray_cluster import ray_env  # noqa: E402

from compactor_cli import ray as xray  # noqa: E402
from compactor_cli.batch import configure  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

os.environ["RAY_AUTH_MODE"] = "disabled"  # before any Ray process starts (see the module doc)
SHARED = ROOT.parent / "shared" / "data"


# ---------------------------------------------------------------- clusters

@pytest.fixture(scope="module")
def cluster():
    """One local Ray cluster for the module (2 CPUs, no dashboard)."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             object_store_memory=150 * 2**20)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


# ---------------------------------------------------------------- helpers


def ray_outputs(out: Path, relatives: list[str]) -> dict[str, bytes]:
    return {rel: xray.read_parts(str(out), rel) for rel in relatives}


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("command,args,options", CASES, ids=CASE_IDS)
def test_ray_run_gives_the_cli_bytes_and_report(cluster, runner, tmp_path, command, args, options):
    src = two_inputs(runner, tmp_path, command)
    cli_out, report, code = cli_dir_run(runner, command, args, src, tmp_path)
    configured = configure(command, **options)
    out = tmp_path / "ray-out"
    writes = configured.settings.write_output
    result = xray.run(configured.settings, [str(src)], str(out) if writes else None,
                      report_path=str(tmp_path / "ray-report.json"), parameters=configured.parameters,
                      block_bytes=BLOCK)
    rels = ["a_hostile.jsonl", "sub/b_real.jsonl"]
    if writes:
        for rel in rels:
            assert xray.read_parts(str(out), rel) == (cli_out / rel).read_bytes(), rel
        assert len(xray.part_files(str(out), "sub/b_real.jsonl")) > 1  # many blocks, order kept
    else:
        assert not out.exists()
    ray_report = json.loads((tmp_path / "ray-report.json").read_text())
    assert ray_report["items"] == report["items"]
    assert ray_report["totals"] == report["totals"] and ray_report["exit_code"] == report["exit_code"] == code
    assert result.exit_code == code


def test_a_record_larger_than_the_block_and_separators_inside_strings(cluster, tmp_path):
    src = write_hostile(tmp_path / "h.jsonl", big_bytes=3 * BLOCK)
    rows = xray.read_jsonl(str(src), block_bytes=BLOCK).take_all()
    raw = src.read_bytes()
    assert b"".join(r["raw"] for r in rows) == b"".join(line for line in raw.splitlines(keepends=True)
                                                         if line.strip())  # no record split or lost
    assert any("\u2028".encode() in r["raw"] for r in rows)
    assert [r["line"] for r in rows] == [i + 1 for i, line in enumerate(raw.split(b"\n")) if line.strip()]


def test_cli_engine_ray_joins_a_running_cluster(cluster, runner, tmp_path):
    src = two_inputs(runner, tmp_path, "toolcall")
    cli_out, report, code = cli_dir_run(runner, "toolcall", ["--keep", "1"], src, tmp_path)
    out, rep = tmp_path / "ray-out", tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", str(src), "--keep", "1", "--engine", "ray",
                          "--address", cluster, "-o", str(out), "--report", str(rep), "--html",
                          str(tmp_path / "page.html")], env=ray_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == code == 1, res.stderr
    assert res.stdout == ""  # stdout carries data only, and Ray's data goes to -o
    assert "error: " in res.stderr and "a_hostile.jsonl:9: broken JSON" in res.stderr
    assert "conversations;" in res.stderr.strip().splitlines()[-1]  # the summary line, as the CLI's
    for rel in ("a_hostile.jsonl", "sub/b_real.jsonl"):
        assert xray.read_parts(str(out), rel) == (cli_out / rel).read_bytes()
    ray_report = json.loads(rep.read_text())
    assert ray_report["parameters"]["engine"] == "ray" and ray_report["totals"] == report["totals"]
    assert ray_report["items"] == report["items"]
    # the dataset page of the Ray run: the totals of its report (as the local run's page would show)
    from browser import elements

    shown = dict(elements((tmp_path / "page.html").read_text(), "data-total"))
    assert shown["conversations"] == f"{report['totals']['conversations']:,}"
    assert shown["failed"] == f"{report['totals']['failed']:,}" and shown["exit_code"] == "1"


def test_missing_and_empty_files_are_file_errors_as_in_the_cli(cluster, runner, tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"\n\n")
    good = tmp_path / "good.jsonl"
    good.write_bytes((ROOT / "fixtures" / "taubench_airline_5.jsonl").read_bytes())
    inputs = [str(tmp_path / "empty.jsonl"), str(tmp_path / "missing.jsonl"), str(good)]
    from compactor_cli.cli import cli

    res = runner.invoke(cli, ["toolcall", *inputs, "-q", "-o", str(tmp_path / "cli"), "--report",
                              str(tmp_path / "cli.json")])
    assert res.exit_code == 1
    result = xray.run("toolcall", inputs, str(tmp_path / "ray"), report_path=str(tmp_path / "ray.json"))
    cli_rep, ray_rep = (json.loads((tmp_path / n).read_text()) for n in ("cli.json", "ray.json"))
    assert ray_rep["items"] == cli_rep["items"] and ray_rep["totals"] == cli_rep["totals"]
    assert result.exit_code == 1 and ray_rep["totals"]["file_errors"] == 2
    assert xray.part_files(str(tmp_path / "ray"), "empty.jsonl") == []
    assert xray.read_parts(str(tmp_path / "ray"), "good.jsonl") == (tmp_path / "cli" / "good.jsonl").read_bytes()


@pytest.mark.parametrize("argv,message", [
    (["--in-place"], "--in-place does not apply to --engine ray"),
    (["--resume", "-o", "{tmp}/o"], "--resume does not apply to --engine ray"),
    (["-j", "2", "-o", "{tmp}/o"], "-j/--jobs does not apply to --engine ray"),
    ([], "give -o DIR"),
    (["-o", "{tmp}/taken"], "already holds files"),
    (["-o", "{tmp}/a_file"], "is a file"),
])
def test_what_does_not_carry_over_is_a_usage_error(runner, tmp_path, argv, message):
    from compactor_cli.cli import cli

    src = tmp_path / "in.jsonl"
    src.write_bytes((ROOT / "fixtures" / "taubench_airline_5.jsonl").read_bytes())
    (tmp_path / "taken" / "in.jsonl").mkdir(parents=True)
    (tmp_path / "taken" / "in.jsonl" / "part-0000000000000000.jsonl").write_bytes(b"{}\n")
    (tmp_path / "a_file").write_bytes(b"")
    res = runner.invoke(cli, ["toolcall", str(src), "--engine", "ray", *[a.format(tmp=tmp_path) for a in argv]])
    assert res.exit_code == 2 and message in res.output, res.output


def test_json_documents_and_stdin_are_refused_with_engine_ray(runner, tmp_path):
    from compactor_cli.cli import cli

    doc = ROOT / "fixtures" / "claude_code_session.json"
    res = runner.invoke(cli, ["toolcall", str(doc), "--engine", "ray", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "is a JSON document" in res.output
    res = runner.invoke(cli, ["toolcall", "-", "--engine", "ray", "-o", str(tmp_path / "o")], input="{}")
    assert res.exit_code == 2 and "cannot read stdin" in res.output


# ---------------------------------------------------------------- Parquet (pyarrow only, no cluster)


def hub_table(n: int = 7):
    """Conversations as a Hub dataset stores them: ``messages`` a list of structs (one schema for
    all messages, so Arrow adds a null for every key a message lacks), with other columns."""
    import pyarrow as pa
    from helpers import tool_conv

    rows = []
    for i in range(n):
        conv = tool_conv(n_tools=4, size=300 + 50 * i)
        if i == 2:
            conv["messages"][1]["name"] = "alice"
        rows.append({"id": i, "split": "train", "score": 0.12345678901234566 if i % 2 else None,
                     "messages": conv["messages"]})
    return pa.Table.from_pylist(rows), rows


def test_parquet_messages_lose_arrows_nulls_and_compact_as_the_cli(runner, tmp_path):
    import pyarrow.parquet as pq

    from compactor_cli import parquet
    from compactor_cli.cli import cli

    table, rows = hub_table()
    src = tmp_path / "hub.parquet"
    pq.write_table(table, src, row_group_size=3)
    lines = parquet.record_lines(pq.read_table(src))
    for line, row in zip(lines, rows):  # the values come back (key order is the schema's: documented)
        assert json.loads(line)["messages"] == row["messages"]
    assert b'"name":null' not in b"".join(lines) and b'"content":null' in b"".join(lines)
    jsonl = tmp_path / "hub.jsonl"
    jsonl.write_bytes(b"".join(lines))
    res = runner.invoke(cli, ["toolcall", str(jsonl), "--keep", "1", "-q", "-o", str(tmp_path / "cli.jsonl"),
                              "--report", str(tmp_path / "cli.json")])
    assert res.exit_code == 0
    report = parquet.compact_parquet(str(src), str(tmp_path / "out.parquet"), "toolcall", keep=1,
                                     report_path=str(tmp_path / "pq.json"), batch_rows=2)
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.column_names == ["id", "split", "score", "conversation_json"]  # the other columns carried through
    assert out.select(["id", "split", "score"]) == table.select(["id", "split", "score"])
    written = "".join(t + "\n" for t in out.column("conversation_json").to_pylist()).encode()
    assert written == (tmp_path / "cli.jsonl").read_bytes()  # lossless: the CLI's bytes
    ours, theirs = (json.loads((tmp_path / n).read_text()) for n in ("pq.json", "cli.json"))
    assert [{**i, "source": "x"} for i in ours["items"]] == [{**i, "source": "x"} for i in theirs["items"]]
    assert ours["totals"] == theirs["totals"] and report.exit_code == 0
    # our own output is read back from its JSON column, exactly: restore gives the records back
    parquet.compact_parquet(str(tmp_path / "out.parquet"), str(tmp_path / "restored.parquet"), "restore")
    restored = pq.read_table(tmp_path / "restored.parquet").column("conversation_json").to_pylist()
    assert [t.encode() + b"\n" for t in restored] == lines


def test_parquet_through_ray_is_the_local_parquet_output(cluster, tmp_path):
    """A Parquet input on Ray: rows in order, other columns carried, the record as JSON text,
    the same as compactor_cli.parquet (itself the CLI's bytes, above), and the same report."""
    import pyarrow.parquet as pq

    from compactor_cli import parquet

    table, _ = hub_table(40)
    src = tmp_path / "in" / "hub.parquet"
    src.parent.mkdir()
    pq.write_table(table, src, row_group_size=7)
    local = parquet.compact_parquet(str(src), str(tmp_path / "local.parquet"), "toolcall", keep=1,
                                    report_path=str(tmp_path / "local.json"))
    result = xray.run("toolcall", [str(tmp_path / "in")], str(tmp_path / "out"), keep=1, block_bytes=16 * 1024,
                      report_path=str(tmp_path / "ray.json"))
    assert len(xray.part_files(str(tmp_path / "out"), "hub.parquet")) > 1
    assert xray.read_parquet_parts(str(tmp_path / "out"), "hub.parquet") == pq.read_table(tmp_path / "local.parquet")
    ours, theirs = (json.loads((tmp_path / n).read_text()) for n in ("ray.json", "local.json"))
    assert [{**i, "source": "x"} for i in ours["items"]] == [{**i, "source": "x"} for i in theirs["items"]]
    assert ours["totals"] == theirs["totals"] and result.exit_code == local.exit_code == 0


def test_agent_logs_are_read_as_the_cli_reads_them(cluster, runner, tmp_path):
    """--from auto: a Claude Code or Codex log is one conversation (its whole file), other formats
    one per line; Ray gives the CLI's bytes and items for each."""
    src = tmp_path / "logs"
    src.mkdir()
    for name in ("claude_code_session.jsonl", "codex_rollout.jsonl", "sharegpt.jsonl"):
        (src / name).write_bytes((ROOT / "fixtures" / "formats" / name).read_bytes())
    cli_out, report, code = cli_dir_run(runner, "toolcall", ["--keep", "1"], src, tmp_path)
    result = xray.run("toolcall", [str(src)], str(tmp_path / "ray"), keep=1, report_path=str(tmp_path / "r.json"))
    for name in ("claude_code_session.jsonl", "codex_rollout.jsonl", "sharegpt.jsonl"):
        assert xray.read_parts(str(tmp_path / "ray"), name) == (cli_out / name).read_bytes(), name
    ours = json.loads((tmp_path / "r.json").read_text())
    assert ours["items"] == report["items"] and ours["totals"] == report["totals"]
    assert result.exit_code == code
    assert [i["line"] for i in ours["items"]][:2] == [None, None]  # the two logs: one record each


def test_compressed_inputs_read_as_the_cli_and_parts_keep_their_codec(cluster, runner, tmp_path):
    """Issue 19: a .jsonl.zst/.gz/.xz input is read with the CLI's decoder (also a compressed
    Claude Code log, one record); each part is one frame of the input's codec, so the parts
    concatenated are one valid stream that decompresses to the CLI's output."""
    import gzip
    import lzma

    import zstandard

    src = tmp_path / "in"
    src.mkdir()
    real = SHARED / "taubench_gpt-4o-airline.jsonl"
    data = real.read_bytes() if real.exists() else (ROOT / "fixtures" / "taubench_airline_5.jsonl").read_bytes()
    (src / "a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    (src / "b.jsonl.gz").write_bytes(gzip.compress(data))
    log = (ROOT / "fixtures" / "formats" / "claude_code_session.jsonl").read_bytes()
    (src / "c_log.jsonl.xz").write_bytes(lzma.compress(log))
    cli_out, report, code = cli_dir_run(runner, "toolcall", ["--keep", "1"], src, tmp_path)
    result = xray.run("toolcall", [str(src)], str(tmp_path / "ray"), keep=1, report_path=str(tmp_path / "r.json"),
                      block_bytes=BLOCK)
    decoders = {".zst": lambda b: zstandard.ZstdDecompressor().stream_reader(b, read_across_frames=True).read(),
                ".gz": gzip.decompress, ".xz": lzma.decompress}
    for name in ("a.jsonl.zst", "b.jsonl.gz", "c_log.jsonl.xz"):
        suffix = name[name.rindex("."):]
        parts = xray.part_files(str(tmp_path / "ray"), name)
        assert parts and all(p.endswith(".jsonl" + suffix) for p in parts), parts
        expected = decoders[suffix]((cli_out / name).read_bytes())
        assert decoders[suffix](xray.read_parts(str(tmp_path / "ray"), name)) == expected, name
        assert xray.read_parts(str(tmp_path / "ray"), name, decompress=True) == expected
    assert len(xray.part_files(str(tmp_path / "ray"), "a.jsonl.zst")) > 1 or not real.exists()
    ours = json.loads((tmp_path / "r.json").read_text())
    assert ours["items"] == report["items"] and ours["totals"] == report["totals"] and result.exit_code == code == 0


def test_a_truncated_compressed_input_is_a_file_error_as_in_the_cli(cluster, runner, tmp_path):
    import gzip

    src = tmp_path / "in"
    src.mkdir()
    blob = gzip.compress((ROOT / "fixtures" / "taubench_airline_5.jsonl").read_bytes())
    (src / "cut.jsonl.gz").write_bytes(blob[:len(blob) // 2])
    (src / "good.jsonl.gz").write_bytes(blob)
    lines: list[str] = []
    result = xray.run("toolcall", [str(src)], str(tmp_path / "ray"), keep=1, quiet=False, emit=lines.append)
    assert result.exit_code == 1
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {src / 'cut.jsonl.gz'}: the gzip data is truncated")
    assert "while reading line " in errors[0]
    assert xray.read_parts(str(tmp_path / "ray"), "good.jsonl.gz", decompress=True)
