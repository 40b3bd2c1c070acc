"""Compressed datasets (issue 19): ``.gz``, ``.zst``, ``.bz2`` and ``.xz`` inputs and outputs,
chosen by suffix, streamed, with the guarantees of plain files -- the decompressed output is the
plain run's bytes, outputs are atomic, truncated or damaged data is a one-line file error, and
--resume continues a compressed output exactly."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import zstandard
from helpers import FIXTURES, ROOT, killed_run, tool_conv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli.batch import process_lines, read_lines, settings_for, write_lines
from compactor_cli.cli import cli
from compactor_cli.files.compression import CODECS, CorruptInput, compress_bytes, decompress_bytes, open_decoded
from compactor_cli.files.sinks import open_sink
from compactor_cli.files.targets import expand_inputs, output_name

SHARED = ROOT.parent / "shared" / "data"
SUFFIXES = sorted(CODECS)  # .bz2 .gz .xz .zst
#: What other tools decompress our output with (the formats are the standard ones).
OTHERS = {".gz": gzip.decompress, ".bz2": bz2.decompress, ".xz": lzma.decompress}
SAMPLE = FIXTURES / "taubench_airline_5.jsonl"


def compress(data: bytes, suffix: str) -> bytes:
    """Compressed by the reference tools, not by the code under test."""
    if suffix == ".zst":
        return zstandard.ZstdCompressor().compress(data)
    return {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix](data)


def decompress(path: Path) -> bytes:
    """Every frame of a file, with the codec's own module (multi-frame aware)."""
    if path.suffix == ".zst":
        with zstandard.ZstdDecompressor().stream_reader(path.read_bytes(), read_across_frames=True) as fh:
            return fh.read()
    return OTHERS[path.suffix](path.read_bytes())


def invoke(runner, *args: str):
    return runner.invoke(cli, [str(a) for a in args])


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".xcompact-"))


# ---------------------------------------------------------------- the codecs


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_concatenated_frames_read_as_one_stream_and_others_read_ours(tmp_path, suffix):
    data = SAMPLE.read_bytes()
    codec = CODECS[suffix]
    blob = compress(data[:1000], suffix) + compress(data[1000:], suffix)  # as `cat a.gz b.gz`
    assert decompress_bytes(blob, codec) == data
    ours = tmp_path / f"ours{suffix}"
    ours.write_bytes(compress_bytes(data[:1000], codec) + compress_bytes(data[1000:], codec))
    assert decompress(ours) == data


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("damage", ["truncated", "cut-in-half", "garbage-before", "garbage-after"])
def test_truncated_or_damaged_data_is_refused_never_read_short(suffix, damage):
    """zstandard's own stream reader returns a truncated frame's bytes (or none) as if complete."""
    blob = compress(SAMPLE.read_bytes(), suffix)
    bad = {"truncated": blob[:-4], "cut-in-half": blob[:len(blob) // 2], "garbage-before": b"xx" + blob,
           "garbage-after": blob + b"junk"}[damage]
    with pytest.raises(CorruptInput, match=CODECS[suffix]):
        decompress_bytes(bad, CODECS[suffix])


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_an_empty_output_is_a_valid_empty_stream(tmp_path, suffix):
    target = tmp_path / f"empty.jsonl{suffix}"
    sink = open_sink(str(target), compress=True)
    sink.commit()
    assert target.stat().st_size > 0 and decompress(target) == b""


def test_decoded_reader_hands_lines_across_frame_boundaries():
    data = b"".join(b'{"n": %d}\n' % i for i in range(5000))
    blob = b"".join(compress_bytes(data[i:i + 777], "zstd") for i in range(0, len(data), 777))
    with open_decoded(io.BytesIO(blob), "zstd") as fh:
        assert list(fh) == data.splitlines(keepends=True)


# ---------------------------------------------------------------- names


def test_directories_find_compressed_inputs_and_names_keep_their_codec(tmp_path):
    names = ("a.jsonl.gz", "b.json.zst", "c.ndjson.xz", "d.jsonl.bz2", "e.jsonl", "f.txt.gz", "g.gz", ".h.jsonl.gz")
    for name in names:
        (tmp_path / name).write_bytes(b"")
    assert [f.relative for f in expand_inputs([str(tmp_path)])] == [
        "a.jsonl.gz", "b.json.zst", "c.ndjson.xz", "d.jsonl.bz2", "e.jsonl"]
    assert output_name("run.traj.gz") == "run.json.gz" and output_name("x.jsonl.zst") == "x.jsonl.zst"


def test_a_json_document_compressed_is_still_a_document(runner, tmp_path):
    doc = orjson.dumps(tool_conv(3), option=orjson.OPT_INDENT_2)
    (tmp_path / "c.json").write_bytes(doc)
    (tmp_path / "c.json.gz").write_bytes(gzip.compress(doc))
    res = invoke(runner, "toolcall", "-q", "--keep", "0", tmp_path / "c.json", "-o", tmp_path / "p.json")
    assert res.exit_code == 0, res.output
    res = invoke(runner, "toolcall", "-q", "--keep", "0", tmp_path / "c.json.gz", "-o", tmp_path / "o.json.gz")
    assert res.exit_code == 0, res.output
    assert decompress(tmp_path / "o.json.gz") == (tmp_path / "p.json").read_bytes()
    assert (tmp_path / "p.json").read_bytes().startswith(b"{\n  ")  # a 2-space document, not a JSONL line


# ---------------------------------------------------------------- the CLI


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_compressed_in_compressed_out_decompresses_to_the_plain_runs_bytes(runner, tmp_path, suffix):
    (tmp_path / "x.jsonl").write_bytes(SAMPLE.read_bytes())
    (tmp_path / f"x.jsonl{suffix}").write_bytes(compress(SAMPLE.read_bytes(), suffix))
    plain = invoke(runner, "toolcall", "-q", "--keep", "1", tmp_path / "x.jsonl", "-o", tmp_path / "y.jsonl")
    assert plain.exit_code == 0
    res = invoke(runner, "toolcall", "-q", "--keep", "1", tmp_path / f"x.jsonl{suffix}", "-o",
                 tmp_path / f"y.jsonl{suffix}")
    assert res.exit_code == 0, res.output
    expected = (tmp_path / "y.jsonl").read_bytes()
    assert expected != SAMPLE.read_bytes()  # something was compacted
    assert decompress(tmp_path / f"y.jsonl{suffix}") == expected
    assert leftovers(tmp_path) == []


def test_the_output_suffix_alone_decides_and_stdout_stays_plain(runner, tmp_path):
    (tmp_path / "x.jsonl").write_bytes(SAMPLE.read_bytes())
    (tmp_path / "x.jsonl.gz").write_bytes(gzip.compress(SAMPLE.read_bytes()))
    invoke(runner, "toolcall", "-q", "--keep", "1", tmp_path / "x.jsonl", "-o", tmp_path / "plain.jsonl")
    expected = (tmp_path / "plain.jsonl").read_bytes()
    assert invoke(runner, "toolcall", "-q", "--keep", "1", tmp_path / "x.jsonl", "-o", tmp_path / "z.jsonl.zst"
                  ).exit_code == 0
    assert (tmp_path / "z.jsonl.zst").read_bytes()[:4] == b"\x28\xb5\x2f\xfd" and \
        decompress(tmp_path / "z.jsonl.zst") == expected
    assert invoke(runner, "toolcall", "-q", "--keep", "1", tmp_path / "x.jsonl.gz", "-o", tmp_path / "p.jsonl"
                  ).exit_code == 0
    assert (tmp_path / "p.jsonl").read_bytes() == expected
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", "-q", "--keep", "1",
                          str(tmp_path / "x.jsonl.gz")], capture_output=True, timeout=120)
    assert res.returncode == 0 and res.stdout == expected


def test_in_place_writes_the_same_codec_back_with_its_mode(runner, tmp_path):
    (tmp_path / "x.jsonl").write_bytes(SAMPLE.read_bytes())
    invoke(runner, "toolcall", "-q", "--keep", "1", tmp_path / "x.jsonl", "-o", tmp_path / "plain.jsonl")
    target = tmp_path / "x.jsonl.xz"
    target.write_bytes(compress(SAMPLE.read_bytes(), ".xz"))
    os.chmod(target, 0o640)
    res = invoke(runner, "toolcall", "-q", "--keep", "1", "--in-place", target)
    assert res.exit_code == 0, res.output
    assert decompress(target) == (tmp_path / "plain.jsonl").read_bytes()
    assert target.stat().st_mode & 0o777 == 0o640 and leftovers(tmp_path) == []


def test_a_corrupt_file_is_one_error_line_and_the_batch_goes_on(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    data = (FIXTURES / "taubench_airline_5.jsonl").read_bytes()
    (src / "a_good.jsonl.zst").write_bytes(compress(data, ".zst"))
    blob = compress(data, ".gz")
    (src / "b_cut.jsonl.gz").write_bytes(blob[:len(blob) * 3 // 4])
    (src / "c_plain_named.jsonl.zst").write_bytes(data)  # not zstd at all
    (src / "d_good.jsonl").write_bytes(data)
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", "-q", "--keep", "1", str(src), "-o",
                          str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2, res.stderr
    assert errors[0].startswith(f"error: {src / 'b_cut.jsonl.gz'}: the gzip data is truncated")
    assert "while reading line " in errors[0]
    assert errors[1].startswith(f"error: {src / 'c_plain_named.jsonl.zst'}: not valid zstd data")
    assert sorted(os.listdir(out)) == ["a_good.jsonl.zst", "d_good.jsonl"]  # nothing half-written, no temp file
    assert decompress(out / "a_good.jsonl.zst") == (out / "d_good.jsonl").read_bytes()


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(conversations(), min_size=1, max_size=4), st.sampled_from(SUFFIXES), st.integers(0, 3))
def test_property_compress_compact_decompress_is_the_plain_run(runner, tmp_path, convs, suffix, keep):
    """For every codec and any records: compress -> compact -> decompress equals the plain run's bytes."""
    import tempfile

    data = b"".join(orjson.dumps(c) + b"\n" for c in convs)
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    (case / "x.jsonl").write_bytes(data)
    (case / f"x.jsonl{suffix}").write_bytes(compress(data, suffix))
    a = invoke(runner, "toolcall", "-q", "--keep", keep, case / "x.jsonl", "-o", case / "y.jsonl")
    b = invoke(runner, "toolcall", "-q", "--keep", keep, case / f"x.jsonl{suffix}", "-o", case / f"y.jsonl{suffix}")
    assert a.exit_code == b.exit_code
    assert decompress(case / f"y.jsonl{suffix}") == (case / "y.jsonl").read_bytes()


# ---------------------------------------------------------------- --resume


@pytest.mark.slow
def test_resume_continues_a_compressed_output_from_a_compressed_input(tmp_path):
    """A frame ends at every checkpoint: the killed run's partial output is complete frames; the
    resumed run truncates to the last checkpoint and appends new frames (the input, read again
    from its start, is skipped to the checkpoint's offset in decompressed bytes)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from generate import generate

    plain = tmp_path / "agents.jsonl"
    generate(str(plain), 6)
    src = tmp_path / "agents.jsonl.zst"
    src.write_bytes(compress(plain.read_bytes(), ".zst"))
    args = ["toolcall", "--keep", "2", "-j", "1", "-q"]
    ref = subprocess.run([sys.executable, "-m", "compactor_cli", *args, str(plain), "-o", str(tmp_path / "ref.jsonl")],
                         capture_output=True, timeout=300)
    assert ref.returncode == 0
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    argv = [*args, str(src), "-o", str(out_dir / "out.jsonl.gz")]
    cmd = [sys.executable, "-m", "compactor_cli", *argv]
    killed_run(argv, min_offset=plain.stat().st_size // 4)
    assert not (out_dir / "out.jsonl.gz").exists()
    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "cannot resume" not in resumed.stderr and "starting" not in resumed.stderr
    data = (out_dir / "out.jsonl.gz").read_bytes()
    assert data.count(b"\x1f\x8b\x08") > 1  # several members: it was continued, not redone
    assert decompress(out_dir / "out.jsonl.gz") == (tmp_path / "ref.jsonl").read_bytes()
    assert os.listdir(out_dir) == ["out.jsonl.gz"]


# ---------------------------------------------------------------- the batch function


@pytest.mark.parametrize("suffix", [".zst", ".gz"])
def test_batch_functions_read_and_write_compressed_files_as_the_cli(runner, tmp_path, suffix):
    (tmp_path / "x.jsonl").write_bytes(SAMPLE.read_bytes())
    (tmp_path / f"x.jsonl{suffix}").write_bytes(compress(SAMPLE.read_bytes(), suffix))
    invoke(runner, "toolcall", "-q", "--keep", "1", tmp_path / "x.jsonl", "-o", tmp_path / "cli.jsonl")
    result = process_lines(read_lines(str(tmp_path / f"x.jsonl{suffix}")), settings_for("toolcall", keep=1))
    written = write_lines(str(tmp_path / f"out.jsonl{suffix}"), result.lines)
    assert decompress(tmp_path / f"out.jsonl{suffix}") == (tmp_path / "cli.jsonl").read_bytes()
    assert written == (tmp_path / "cli.jsonl").stat().st_size and leftovers(tmp_path) == []


def test_write_lines_leaves_nothing_when_it_fails(tmp_path):
    def lines():
        yield b'{"messages": []}\n'
        raise RuntimeError("the producer failed")

    with pytest.raises(RuntimeError):
        write_lines(str(tmp_path / "out.jsonl.zst"), lines())
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- real transcripts


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "taubench_gpt-4o-airline.jsonl").exists(),
                    reason="the shared data set is not beside this checkout")
def test_real_transcripts_zst_to_zst_equal_the_uncompressed_run(tmp_path):
    """The issue's done-when: a .jsonl.zst of the real transcripts compacts to a .jsonl.zst whose
    decompressed bytes equal the uncompressed run's."""
    for name in ("taubench_gpt-4o-airline.jsonl", "swe-agent.jsonl", "spotter-claude-code.jsonl"):
        real = SHARED / name
        if not real.exists():
            continue
        shutil.copyfile(real, tmp_path / name)
        (tmp_path / f"{name}.zst").write_bytes(compress(real.read_bytes(), ".zst"))
        base = [sys.executable, "-m", "compactor_cli", "toolcall", "-q", "--keep", "2"]
        a = subprocess.run([*base, str(tmp_path / name), "-o", str(tmp_path / f"plain-{name}")], capture_output=True,
                           timeout=300)
        b = subprocess.run([*base, str(tmp_path / f"{name}.zst"), "-o", str(tmp_path / f"out-{name}.zst")],
                           capture_output=True, timeout=300)
        assert a.returncode == b.returncode == 0, b.stderr
        assert decompress(tmp_path / f"out-{name}.zst") == (tmp_path / f"plain-{name}").read_bytes(), name


def test_zstandard_is_imported_only_when_a_zst_name_is_met(tmp_path):
    (tmp_path / "x.jsonl.gz").write_bytes(gzip.compress(SAMPLE.read_bytes()))
    probe = ("import sys\nfrom compactor_cli.cli import main\nsys.argv = ['xcompact', 'toolcall', '-q', sys.argv[1], "
             "'-o', sys.argv[2]]\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
             "print('zstandard' in sys.modules)\n")
    for src, out, imported in (("x.jsonl.gz", "y.jsonl.gz", "False"), ("y.jsonl.gz", "z.jsonl.zst", "True")):
        res = subprocess.run([sys.executable, "-c", probe, str(tmp_path / src), str(tmp_path / out)],
                             capture_output=True, text=True, timeout=120)
        assert res.stdout.strip() == imported, res.stderr
