#!/usr/bin/env bash
# The compiled parts under AddressSanitizer and UndefinedBehaviorSanitizer: the wheel built again
# with -fsanitize=address,undefined (any report fatal), installed over the one in this venv, and
# the fast lane run against it with libasan preloaded (the interpreter itself is not built with it).
# The C reads untrusted records (deep nesting, lone surrogates, huge strings); a read one byte past
# a buffer gives the right answer almost always, and only a sanitizer says it happened.
#
#   bash tests/sanitize.sh [pytest args]    # from the repository's root, in a venv with '.[test]'
#
# pytest args narrow the lane (paths, -k); a -m of your own replaces the lane's, and -n breaks the
# re-run of failed tests below.
#
# It replaces the installed xcompact with the sanitized build: CI runs it last; a developer runs
# it in a throwaway venv (or reinstalls afterwards). Exit 0 when every test passed, 77 when this
# machine's compiler has no AddressSanitizer (nothing was run; not 2, which is pytest's own for an
# interrupted run), else pytest's code or 1.
set -euo pipefail
asan="$(${CC:-gcc} -print-file-name=libasan.so 2>/dev/null || true)"
if [ ! -f "$asan" ]; then
  echo "sanitize: ${CC:-gcc} has no libasan.so; nothing run" >&2
  exit 77
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g"
# built afresh in a directory of its own (setuptools would reuse the objects of an earlier build in build/)
printf '[build]\nbuild_base = %s/build\n[build_ext]\nforce = 1\n' "$out" > "$out/setup.cfg"
DIST_EXTRA_CONFIG="$out/setup.cfg" CFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" \
  python -m pip wheel -q --no-deps -w "$out" .
python -m pip install -q --no-deps --force-reinstall "$out"/xcompact-*.whl

# PYTHONMALLOC=malloc: every object from malloc, not from Python's own pools, so a read past an
# object's end leaves its allocation, where the sanitizer sees it (in a pool it reads the next object,
# unseen: without this, a test reading one byte too many passed). The 40-example Hypothesis profile:
# the main run has 300 of each, and the sanitizer triples every example's cost.
export HYPOTHESIS_PROFILE=dev PYTHONMALLOC=malloc LD_PRELOAD="$asan" \
  ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# the extensions are optional: a build that failed would install without them and every test would
# pass on the Python alone. Each one pyproject.toml declares must be there, and sanitized (asked from
# outside the source tree, whose own .so files an import from here would find first).
(cd "$out" && python - "$OLDPWD/pyproject.toml" <<'EOF'
import importlib, sys
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
with open(sys.argv[1], "rb") as fh:
    names = [ext["name"] for ext in tomllib.load(fh)["tool"]["setuptools"]["ext-modules"]]
bad = []
for name in names:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        bad.append(f"{name}: not built ({exc})")
        continue
    with open(module.__file__, "rb") as fh:
        if b"__asan_report" not in fh.read():
            bad.append(f"{name}: built without AddressSanitizer ({module.__file__})")
if bad:
    sys.exit("sanitize: " + "; ".join(bad))
print(f"sanitize: {len(names)} compiled parts built with AddressSanitizer and UBSan", file=sys.stderr)
EOF
)

# the fast lane, less what runs a program of its own that would get libasan too (a browser, the model
# server, Ray): none of them exercises the compiled parts
lane=(-m "not slow and not browser and not real_llm and not ray" -o "cache_dir=$out/cache")
rc=0
pytest -q -n auto "${lane[@]}" "$@" || rc=$?
if [ "$rc" != 0 ]; then
  # a worker the sanitizer stopped shows up only as "crashed", its report lost with the worker's
  # stderr: the failed tests again in this process, uncaptured (a report stops it), none if pytest
  # recorded no failure (an interrupted run)
  echo "sanitize: the failed tests again, one process, output uncaptured:" >&2
  pytest -q -p no:xdist -s --lf --lfnf=none "${lane[@]}" "$@" >&2 || true
fi
exit "$rc"
