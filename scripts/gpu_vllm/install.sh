#!/bin/bash
# On the GPU machine, from the project's root, in consecutive device calls each carrying one or more
# of the folders .gpuvllm1 .. .gpuvllmN that make_payload.sh wrote (the machine keeps /opt only
# while it stays warm: make the calls back to back):
#     bash scripts/gpu_vllm/install.sh && source /opt/vllm/env.sh && <command>
# Each call stashes the parts it carries in /opt/vllm/stash; the call that completes the set checks
# the checksum and unpacks the wheels into /opt/vllm/site (a wheel is a zip of its files). Until
# then it prints which parts are still missing and exits 3, so `&&` runs the command only once vLLM
# is there. A later call finds it installed.
set -euo pipefail
ROOT=${VLLM_GPU_ROOT:-/opt/vllm}; STASH=$ROOT/stash; SITE=$ROOT/site
if [ -f "$ROOT/env.sh" ]; then echo "vLLM is installed in $SITE"; exit 0; fi
mkdir -p "$STASH"
for d in .gpuvllm*/; do
  [ -d "$d" ] || continue
  cp "$d"/payload.tar.* "$d/manifest" "$STASH"/
done
[ -f "$STASH/manifest" ] || { echo "no .gpuvllm* folder carried and nothing stashed: carry .gpuvllm1"; exit 2; }
source "$STASH/manifest"
have=$(ls "$STASH"/payload.tar.* | wc -l)
if [ "$have" -lt "$parts" ]; then
  echo "stashed $have of $parts parts; carry the others in the next call (missing: $(for i in $(seq 1 "$parts"); do f=$(printf '%s/payload.tar.%02d' "$STASH" $((i - 1))); [ -f "$f" ] || printf '.gpuvllm%d ' "$i"; done))"
  exit 3
fi
cat "$STASH"/payload.tar.* | sha256sum | grep -q "^$sha256 " \
  || { echo "checksum mismatch: the parts are not one payload (start again on a fresh machine)"; exit 4; }
mkdir -p "$STASH/whl" "$SITE"
cat "$STASH"/payload.tar.* | tar -x -C "$STASH/whl"
python3 - "$STASH/whl" "$SITE" <<'PY'
import pathlib, sys, zipfile
for wheel in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    zipfile.ZipFile(wheel).extractall(sys.argv[2])
PY
rm -rf "$STASH/whl"
rm -f "$STASH"/payload.tar.*
cat > "$ROOT/env.sh" <<ENV
export PYTHONPATH=$SITE\${PYTHONPATH:+:\$PYTHONPATH}
export VLLM_USE_FLASHINFER_SAMPLER=0  # FlashInfer is not carried: vLLM's own top-k/top-p sampler
ENV
echo "vLLM ($vllm) installed in $SITE: source $ROOT/env.sh"
