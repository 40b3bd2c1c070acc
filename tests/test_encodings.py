"""The encodings of --encoding (issue 17): quicktok's vocabularies are OpenAI's (the sha256
tiktoken itself expects), its ids equal tiktoken's built on them, on the real transcripts, and
``auto`` picks the encoding from the conversation's model.

References, none of them xcompact's code:
- cl100k_base, o200k_base: tiktoken's own constructors (tiktoken_ext.openai_public: pat_str,
  special tokens, expected_hash) fed the vocabulary quicktok ships, written out as a .tiktoken
  file and loaded by tiktoken's load_tiktoken_bpe, which checks the hash;
- llama3: tiktoken with Meta's pattern (Llama 3's tokenizer.py) on quicktok's ranks (Meta's
  tokenizer is that: tiktoken-rank BPE), whose first 100,256 ranks must be cl100k's;
- qwen: the same construction with Qwen2's pattern after NFC (the HF pipeline), a second
  reckoning; and for all four, the test vectors quicktok's sdist ships (made by tiktoken, Meta's
  construction on the HF vocabulary, and Hugging Face tokenizers), copied to
  fixtures/quicktok_vectors/ (MIT, quicktok-v1 0.4.0 test/).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import subprocess
import sys
import unicodedata
from pathlib import Path
from unittest import mock

import orjson
import pytest
import tiktoken
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe
from tiktoken_ext import openai_public

from compactor_cli.cli import cli
from compactor_cli.model import encoders, pieces
from compactor_cli.model.tokens import ENCODINGS, TokenCounter, choose_encoding, encoding_for_model

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared" / "data"
OFFICIAL_SHA256 = {"cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
                   "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"}
LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QUICKTOK = {"cl100k_base": "cl100k_base", "o200k_base": "o200k_base", "llama3": "llama3", "qwen": "qwen3"}


def _quicktok(name: str):
    import quicktok

    return quicktok.get_encoding(QUICKTOK[name])


def _tiktoken_file(name: str, path: Path) -> bytes:
    """quicktok's vocabulary as a .tiktoken file: base64 token, space, rank; in rank order."""
    q = _quicktok(name)
    data = b"".join(base64.b64encode(q.decode_single_token_bytes(i)) + b" " + str(i).encode() + b"\n"
                    for i in range(len(q.token_byte_values())))
    path.write_bytes(data)
    return data


def _ranks(name: str) -> dict[bytes, int]:
    q = _quicktok(name)
    return {q.decode_single_token_bytes(i): i for i in range(len(q.token_byte_values()))}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """name -> (tiktoken Encoding, normalise) for every encoding."""
    tmp = tmp_path_factory.mktemp("vocab")
    refs = {}
    for name, make in (("cl100k_base", openai_public.cl100k_base), ("o200k_base", openai_public.o200k_base)):
        data = _tiktoken_file(name, tmp / f"{name}.tiktoken")
        assert hashlib.sha256(data).hexdigest() == OFFICIAL_SHA256[name]
        seen = []

        def local(url, expected_hash, _name=name):  # tiktoken's loader on the local file: it checks the hash
            seen.append(expected_hash)
            return load_tiktoken_bpe(str(tmp / f"{_name}.tiktoken"), expected_hash=expected_hash)

        with mock.patch.object(openai_public, "load_tiktoken_bpe", local):
            refs[name] = (tiktoken.Encoding(**make()), False)
        assert seen == [OFFICIAL_SHA256[name]]  # the hash tiktoken's own constructor names
    llama = _ranks("llama3")
    cl100k = refs["cl100k_base"][0]._mergeable_ranks
    assert len(llama) == 128_000 and all(llama[b] == r for b, r in cl100k.items())
    refs["llama3"] = (tiktoken.Encoding("llama3-ref", pat_str=LLAMA3_PAT, mergeable_ranks=llama,
                                        special_tokens={}), False)
    refs["qwen"] = (tiktoken.Encoding("qwen-ref", pat_str=QWEN_PAT, mergeable_ranks=_ranks("qwen"),
                                      special_tokens={}), True)
    return refs


def _ref_ids(reference, name: str, s: str) -> list[int]:
    enc, nfc = reference[name]
    return enc.encode_ordinary(unicodedata.normalize("NFC", s) if nfc else s)


def _texts(paths) -> list[str]:
    """Every text xcompact counts in OpenAI dumps (one per line, or one document)."""
    out: list[str] = []
    for p in paths:
        raw = Path(p).read_bytes()
        docs = [orjson.loads(raw)] if p.suffix == ".json" else [orjson.loads(x) for x in raw.splitlines() if x.strip()]
        for d in docs:
            if isinstance(d, dict) and "messages" not in d:  # a recorded summariser request and its answer
                d = d["request"]
            for m in d["messages"] if isinstance(d, dict) else d:
                c = m.get("content")
                if isinstance(c, str):
                    out.append(c)
                elif isinstance(c, list):
                    out += [x["text"] for x in c if isinstance(x, dict) and isinstance(x.get("text"), str)]
                for call in m.get("tool_calls") or ():
                    out.append(call["function"].get("arguments") or "")
    return [t for t in out if t]


BUNDLED = [FIXTURES / "taubench_airline_5.jsonl", FIXTURES / "swe_agent_3.jsonl",
           FIXTURES / "claude_code_session.json", *sorted((FIXTURES / "llm-answers").glob("*.jsonl"))]


def _assert_equal_ids(reference, texts: list[str]) -> dict[str, int]:
    compared = {}
    for name in ("cl100k_base", "o200k_base", "llama3", "qwen"):
        q, counter = _quicktok(name), TokenCounter(name)
        bad = [s[:60] for s in texts if q.encode_ordinary(s) != _ref_ids(reference, name, s)]
        assert not bad, f"{name}: {len(bad)} of {len(texts)} texts differ, e.g. {bad[:3]}"
        assert all(counter.text(s) == len(_ref_ids(reference, name, s)) for s in texts[:500])
        compared[name] = len(texts)
    return compared


def test_quicktok_ids_equal_tiktoken_on_the_bundled_transcripts(reference):
    texts = _texts(BUNDLED)
    assert len(texts) > 300
    _assert_equal_ids(reference, texts)


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real transcripts beside the project ({SHARED}) are not "
                    "here (a clean clone): the bundled fixtures' part runs instead")
def test_quicktok_ids_equal_tiktoken_on_the_real_transcripts(reference):
    texts = _texts(sorted(SHARED.glob("*.jsonl")))
    assert sum(len(t) for t in texts) > 4_000_000
    _assert_equal_ids(reference, texts)


def _assert_reference_encoder_equal(reference, texts: list[str]) -> None:
    """The encoder a run starts with (tiktoken's BPE on quicktok's ranks, model/encoders.py)
    gives the reference ids too, so a count does not depend on when quicktok took over."""
    for name in ("cl100k_base", "o200k_base", "llama3", "qwen"):
        warm = encoders.reference_encoder(name)
        assert warm is not None, f"{name}: quicktok's ranks could not be read"
        bad = [s[:60] for s in texts if warm(s) != _ref_ids(reference, name, s)]
        assert not bad, f"{name}: {len(bad)} of {len(texts)} texts differ, e.g. {bad[:3]}"


def test_the_reference_encoder_equals_tiktoken_on_the_bundled_transcripts(reference):
    _assert_reference_encoder_equal(reference, _texts(BUNDLED))


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real transcripts beside the project ({SHARED}) are not "
                    "here (a clean clone): the bundled fixtures' part runs instead")
def test_the_reference_encoder_equals_tiktoken_on_the_real_transcripts(reference):
    _assert_reference_encoder_equal(reference, _texts(sorted(SHARED.glob("*.jsonl"))))


@pytest.fixture(scope="module")
def both_encoders() -> dict:
    """name -> (the reference encoder, quicktok's count), each built once."""
    return {name: (encoders.reference_encoder(name), encoders.Encoder(name)._fast())
            for name in ("cl100k_base", "o200k_base", "llama3", "qwen")}


@settings(deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200))
@example("a\ud800b \udfff" + "x" * 40)
@example("Ａ\u0301e\u0301\u212b 'S 's 1234567 \r\n\n  \t x/y//z")  # NFC, contractions, digits, breaks
def test_both_encoders_equal_the_reference_for_any_text(reference, both_encoders, s):
    """The reference encoder equals tiktoken.s official constructors for any text; quicktok is, for the texts the
    run gives it (both_agree)."""
    for name, (warm, fast) in both_encoders.items():
        ids = _ref_ids(reference, name, encoders._clean(s))
        assert len(warm(s)) == len(ids)
        if s.isascii() or encoders.both_agree(s):
            assert fast(s) == len(ids)


AGREED_CHARS = st.one_of(st.characters(max_codepoint=0x04FF), st.characters(min_codepoint=0x3000, max_codepoint=0x30FF),
                        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FEA),
                        st.characters(min_codepoint=0x2000, max_codepoint=0x27BF),
                        st.characters(min_codepoint=0x1F300, max_codepoint=0x1F64F))


@settings(deadline=None)
@given(st.text(alphabet=AGREED_CHARS, max_size=200))
def test_quicktok_equals_the_reference_on_the_texts_a_run_gives_it(reference, both_encoders, s):
    for name, (_, fast) in both_encoders.items():
        if s.isascii() or encoders.both_agree(s):
            assert fast(s) == len(_ref_ids(reference, name, s)), name


def test_a_run_moves_to_quicktok_after_switch_chars_with_the_same_counts(reference, monkeypatch):
    monkeypatch.setattr(encoders, "SWITCH_CHARS", 5_000)
    monkeypatch.setattr(pieces, "_PIECES", None)  # what the pieces leave (tests/test_pieces_compiled.py)
    texts = _texts([FIXTURES / "taubench_airline_5.jsonl"])[:400]
    for name in ("cl100k_base", "qwen"):
        enc = encoders.Encoder(name)
        assert enc.count == enc._count_before_switch
        counts = [enc.count(s) for s in texts]
        assert enc.count == enc._count_after_switch
        assert counts == [len(_ref_ids(reference, name, s)) for s in texts]


#: Texts the encoders' Unicode tables read differently (found by attacking the switch): a letter
#: added in recent Unicode before "'s"/"'t" (U+323B0, U+A7CE, U+0C5C), a composition pair added in
#: Unicode 16 (NFC under qwen), a lone surrogate; and plain text around them.
NEW_UNICODE = ["\U000323B0's", "\uA7CE't and", "\u0C5C'd", "x\U00016D63\U00016D67y", "Ελληνικά 'll",
               "a\ud800b", "plain ascii text 's"]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "llama3", "qwen"])
def test_a_count_is_tiktokens_before_and_after_the_switch_whatever_the_characters(reference, monkeypatch, name):
    """The same conversation counted alone (before quicktok is built) and after 2 Mi characters
    of other text (after) gives the same count, and that is tiktoken's."""
    monkeypatch.setattr(encoders, "SWITCH_CHARS", 1_000)
    monkeypatch.setattr(pieces, "_PIECES", None)  # what the pieces leave (tests/test_pieces_compiled.py)
    enc = encoders.Encoder(name)
    before = [enc.count(s) for s in NEW_UNICODE]
    enc.count("filler words " * 200)
    assert enc.count == enc._count_after_switch
    after = [enc.count(s) for s in NEW_UNICODE]
    want = [len(_ref_ids(reference, name, encoders._clean(s))) for s in NEW_UNICODE]
    assert before == after == want


def test_ranks_that_do_not_read_exactly_are_refused_and_quicktok_counts_at_once(tmp_path, monkeypatch):
    import quicktok

    good = (Path(quicktok.__file__).parent / "data" / "cl100k.vocab").read_bytes()
    assert len(encoders.read_ranks(str(tmp_path / "missing")) or {}) == 0
    for name, data in (("truncated", good[:-3]), ("extra", good + b"\0"), ("empty", b""),
                       ("count", (5).to_bytes(4, "little") + good[4:])):
        (tmp_path / name).write_bytes(data)
        assert encoders.read_ranks(str(tmp_path / name)) is None, name
    assert len(encoders.read_ranks(str(Path(quicktok.__file__).parent / "data" / "cl100k.vocab")) or {}) == 100_256
    monkeypatch.setattr(encoders, "vocab_path", lambda name: str(tmp_path / "truncated"))
    enc = encoders.Encoder("cl100k_base")  # neither the pieces' counter nor tiktoken is built
    assert enc.count != enc._count_before_switch
    assert enc.count("hello world") == 2


def _vectors(path: Path) -> list[tuple[str, list[int]]]:
    b = path.read_bytes()
    (n,), o, out = struct.unpack_from("<I", b, 0), 4, []
    for _ in range(n):
        (length,) = struct.unpack_from("<I", b, o)
        s = b[o + 4:o + 4 + length].decode()
        o += 4 + length
        (k,) = struct.unpack_from("<I", b, o)
        out.append((s, list(struct.unpack_from(f"<{k}I", b, o + 4))))
        o += 4 + 4 * k
    return out


@pytest.mark.parametrize(("name", "file"), [("cl100k_base", "vectors.bin"), ("o200k_base", "vectors_o200k.bin"),
                                            ("llama3", "vectors_llama3.bin"), ("qwen", "vectors_qwen3.bin")])
def test_counts_match_the_reference_vectors_quicktok_ships(reference, name, file):
    vectors = _vectors(FIXTURES / "quicktok_vectors" / file)
    assert len(vectors) >= 15
    counter = TokenCounter(name)
    for s, ids in vectors:
        assert counter.text(s) == len(ids), s
        if name != "qwen":  # tiktoken-rank BPE is the reference itself for these
            assert _ref_ids(reference, name, s) == ids, s


#: Tokens of the texts of fixtures/taubench_airline_5.jsonl and of its first conversation (the
#: message rule written out for its shapes), computed once with the reference encodings above
#: (tiktoken on the vocabularies), not with xcompact; 4569 is the golden case's cl100k count too.
GOLDEN = {"cl100k_base": (20671, 4569), "o200k_base": (20600, 4563), "llama3": (20668, 4569), "qwen": (22895, 5060)}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_counts_are_stable(reference, name):
    path = FIXTURES / "taubench_airline_5.jsonl"
    texts = _texts([path])
    assert sum(len(_ref_ids(reference, name, s)) for s in texts) == GOLDEN[name][0]
    counter = TokenCounter(name)
    assert sum(counter.text(s) for s in texts) == GOLDEN[name][0]
    first = orjson.loads(path.read_bytes().splitlines()[0])
    assert counter.conversation(first["messages"]) == GOLDEN[name][1]


@settings(deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=300))  # Cs (surrogates) too
@example("a\ud800b \udfff" + "x" * 40)  # lone surrogates, short and memoised
def test_count_is_len_of_encode_for_any_text_lone_surrogates_included(reference, s):
    for name in ("cl100k_base", "o200k_base"):
        assert TokenCounter(name).text(s) == len(reference[name][0].encode_ordinary(s))


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt-4o", "o200k_base"), ("gpt-4o-2024-08-06", "o200k_base"), ("openai/gpt-4o-mini", "o200k_base"),
    ("gpt-4.1-mini", "o200k_base"), ("gpt-5-codex", "o200k_base"), ("o1-preview", "o200k_base"),
    ("o3", "o200k_base"), ("o4-mini", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"),
    ("gpt-3.5-turbo-0125", "cl100k_base"), ("meta-llama/Llama-3.1-8B-Instruct", "llama3"),
    ("llama3.3", "llama3"), ("Qwen/Qwen2.5-Coder-32B-Instruct", "qwen"), ("qwen3-coder", "qwen"),
    ("claude-opus-4-6", "cl100k_base"), ("mistral-large", None), ("o10x", None), ("gpt-4x", None)])
def test_the_model_table(model, expected):
    found = encoding_for_model(model)
    assert (found[0] if found else None) == expected
    assert (found is not None and found[1]) == model.startswith("claude")


def test_auto_rules():
    assert choose_encoding("auto", None) == ("cl100k_base", "default", False)
    assert choose_encoding("auto", "mistral-large") == ("cl100k_base", "default", False)
    assert choose_encoding("auto", "gpt-4o") == ("o200k_base", "model gpt-4o (record)", False)
    assert choose_encoding("auto", "claude-sonnet-4") == ("cl100k_base",
                                                          "model claude-sonnet-4 (record), approximate", True)
    assert choose_encoding("llama3", "gpt-4o") == ("llama3", "--encoding", False)
    assert set(ENCODINGS) == {"auto", *QUICKTOK}


def _report(runner, tmp_path, *argv):
    report = tmp_path / "r.json"
    out = [] if "--check" in argv else ["-o", str(tmp_path / "out")]
    res = runner.invoke(cli, [*argv, *out, "--report", str(report), "-q"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(report.read_bytes())


@pytest.mark.parametrize("path", [FIXTURES / "taubench_airline_5.jsonl", SHARED / "taubench_gpt-4o-airline.jsonl"])
def test_compact_model_gpt_4o_counts_tau_bench_with_o200k(runner, tmp_path, reference, path):
    if not path.exists():
        pytest.skip(f"{path} is not here (a clean clone)")
    doc = _report(runner, tmp_path, "compact", str(path), "--model", "gpt-4o", "--check")
    lines = path.read_bytes().splitlines()
    assert len(doc["items"]) == len(lines)
    for item, line in zip(doc["items"], lines):
        assert (item["encoding"], item["encoding_source"]) == ("o200k_base", "model gpt-4o (--model)")
        messages = orjson.loads(line)["messages"]
        assert item["tokens_before"] == TokenCounter("o200k_base").conversation(messages)
    assert doc["parameters"]["model"] == "gpt-4o"
    import jsonschema

    jsonschema.validate(doc, json.loads((ROOT / "compactor_cli" / "schemas" / "report.schema.json").read_bytes()))


def test_a_codex_rollout_is_counted_in_the_encoding_of_the_model_it_names(runner, tmp_path):
    path = FIXTURES / "formats" / "codex_rollout.jsonl"
    assert b'"model":"gpt-5-codex"' in path.read_bytes().replace(b" ", b"")
    (item,) = _report(runner, tmp_path, "toolcall", str(path))["items"]
    assert (item["encoding"], item["encoding_source"]) == ("o200k_base", "model gpt-5-codex (record)")
    (plain,) = _report(runner, tmp_path, "toolcall", str(path), "--encoding", "cl100k_base")["items"]
    assert (plain["encoding"], plain["encoding_source"]) == ("cl100k_base", "--encoding")
    assert plain["tokens_before"] != item["tokens_before"]


def test_a_claude_code_log_is_counted_with_cl100k_as_an_approximation(runner, tmp_path):
    """claude-opus-4-6 has no public tokenizer: cl100k_base's counts, and the report says they
    are an approximation (the item, and one note for the run)."""
    path = FIXTURES / "formats" / "claude_code_session.jsonl"
    doc = _report(runner, tmp_path, "toolcall", str(path))
    (item,) = doc["items"]
    assert item["encoding"] == "cl100k_base" and item["encoding_approximate"] is True
    assert item["encoding_source"].startswith("model claude-") and item["encoding_source"].endswith(", approximate")
    assert any("approximate" in note and "Claude" in note for note in doc["totals"]["notes"])
    explicit_doc = _report(runner, tmp_path, "toolcall", str(path), "--encoding", "cl100k_base")
    (explicit,) = explicit_doc["items"]
    assert "encoding_approximate" not in explicit and explicit["encoding_source"] == "--encoding"
    assert explicit["tokens_before"] == item["tokens_before"] and not explicit_doc["totals"]["notes"]
    assert encoding_for_model("claude-opus-4-6") == ("cl100k_base", True)


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is not here (a clean clone)")
def test_a_swe_agent_trajectory_is_counted_in_the_encoding_of_its_replay_config_model(runner, tmp_path):
    path = SHARED / "raw" / "swe-agent" / "marshmallow-1867__function_calling.traj"
    (item,) = _report(runner, tmp_path, "toolcall", str(path))["items"]
    assert (item["encoding"], item["encoding_source"]) == ("o200k_base", "model gpt-4o (record)")


def test_an_explicit_encoding_wins_over_the_model(runner, tmp_path):
    path = FIXTURES / "formats" / "codex_rollout.jsonl"
    (item,) = _report(runner, tmp_path, "toolcall", str(path), "--encoding", "qwen")["items"]
    assert (item["encoding"], item["encoding_source"]) == ("qwen", "--encoding")


def test_no_tokens_imports_no_tokenizer(tmp_path):
    code = ("import sys\nfrom compactor_cli.cli import cli\n"
            f"try:\n    cli(['toolcall', '--no-tokens', '-q', {str(FIXTURES / 'taubench_airline_5.jsonl')!r}, "
            f"'-o', {str(tmp_path / 'o.jsonl')!r}])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('quicktok', 'tiktoken', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
