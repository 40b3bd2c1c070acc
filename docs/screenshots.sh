#!/usr/bin/env bash
# Redraw the README's screenshots from the bundled fixtures: the dataset page of a compact run and
# the conversation view of one compacted SWE-agent run, in headless Chromium (Debian's chromium),
# shrunk with pngquant when it is there. Run from the repository: bash docs/screenshots.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
ln -s "$root/fixtures" fixtures
xcompact compact fixtures/taubench_airline_5.jsonl fixtures/swe_agent_3.jsonl fixtures/formats/claude_code_tool_heavy.jsonl \
  --token-threshold 3000 --backend extractive -o out --report report.json --html dataset.html -q || true
xcompact show out/swe_agent_3.jsonl --line 3 -o show.html
shot() {  # PAGE PNG HEIGHT
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --host-resolver-rules="MAP * ~NOTFOUND" --hide-scrollbars \
    --user-data-dir="$work/profile" --window-size="1200,$3" --screenshot="$2" "file://$work/$1" 2>/dev/null
  if command -v pngquant >/dev/null; then pngquant --quality 60-85 --force --output "$2" "$2"; fi
}
shot dataset.html "$root/docs/dataset-page.png" 1500
shot show.html "$root/docs/show-page.png" 2300
ls -l "$root"/docs/*.png
