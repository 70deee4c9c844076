#!/bin/bash
# On the GPU machine, from the project's root, first in every device call, each call carrying the next
# of the folders $PAYLOAD1 .. $PAYLOADN that make_payload.sh wrote (PAYLOAD default .gpupart); the machine keeps
# /opt only while it stays warm: make the calls back to back. A second payload installs beside the first with its
# own PAYLOAD and LW_ROOT, and its own env.sh to source:
#     bash scripts/gpu/install.sh && source /opt/lw/env.sh && <command>
# Each call stashes the parts it carries in /opt/lw/stash and, until the set is complete, says which
# are missing and exits 3, so `&&` runs the command only once everything is there. The call that
# completes the set checks the checksum and unpacks: the wheels into /opt/lw/site (first on
# PYTHONPATH: vLLM, Triton 3.7.1 over the machine's, fla, trl), Chromium, Playwright and p5 through
# the Chromium tool's own install steps (scripts/gpu/chromium). Later calls find it installed.
set -euo pipefail
LW=${LW_ROOT:-/opt/lw}; STASH=$LW/stash; PROJECT=$(pwd); PAYLOAD=${PAYLOAD:-.gpupart}
if [ -f "$LW/env.sh" ]; then echo "installed in $LW ($(cat "$LW/components" | tr '\n' ' '))"; exit 0; fi
mkdir -p "$STASH"
for d in "$PAYLOAD"[0-9]*/; do
  [ -d "$d" ] || continue
  cp "$d"/payload.* "$d/manifest" "$STASH"/
done
[ -f "$STASH/manifest" ] || { echo "no $PAYLOAD* folder carried and nothing stashed: carry ${PAYLOAD}1"; exit 2; }
source "$STASH/manifest"
have=$(ls "$STASH"/payload.* | wc -l)
if [ "$have" -lt "$parts" ]; then
  missing=$(for i in $(seq 1 "$parts"); do [ -f "$(printf '%s/payload.%02d' "$STASH" $((i - 1)))" ] || printf '%s%d ' "$PAYLOAD" "$i"; done)
  echo "stashed $have of $parts parts ($components); carry the others in the next calls: $missing"
  exit 3
fi
cat "$STASH"/payload.* | sha256sum | grep -q "^$sha256 " \
  || { echo "checksum mismatch: the parts are not one payload (make_payload.sh ran again?): start on a fresh machine"; exit 4; }
mkdir -p "$LW/unpack"
cat "$STASH"/payload.* | tar -x -C "$LW/unpack"
rm -f "$STASH"/payload.*
cd "$LW/unpack"
: > "$LW/env.sh"
echo "export PYTHONPATH=$PROJECT\${PYTHONPATH:+:\$PYTHONPATH}  # the scripts import the project" >> "$LW/env.sh"
if [ -f site.tar.zst ]; then
  mkdir -p "$LW/site"
  LD_LIBRARY_PATH=$LW/unpack/zstd ./zstd/zstd -q -d --long=27 -c site.tar.zst | tar -x -C "$LW/site"
  cat >> "$LW/env.sh" <<ENV
export PYTHONPATH=$LW/site\${PYTHONPATH:+:\$PYTHONPATH}
export VLLM_USE_FLASHINFER_SAMPLER=0  # FlashInfer is not carried: vLLM's own top-k/top-p sampler
ENV
fi
if [ -d chromium ]; then
  # the Chromium tool's three steps (scripts/gpu/chromium), from a folder holding its parts; p5 and p5.brush then go to the project
  mkdir -p /opt/stash && cp -r chromium/.gl chromium/.devchr* /opt/stash/ && cd /opt/stash
  bash .devchr1/install.sh 1 && bash /opt/chr/install.sh 2 && bash /opt/chr/install.sh 3
  mkdir -p "$PROJECT/renderer/node_modules" && cp -r renderer/node_modules/. "$PROJECT/renderer/node_modules/"
  cp -r "$LW/unpack/chromium/ses" "$PROJECT/renderer/node_modules/"
  cat /opt/chr/env.sh >> "$LW/env.sh"
  cd "$LW/unpack"
fi
cp components "$LW/components"
cd "$PROJECT" && rm -rf "$LW/unpack"
echo "installed in $LW ($(tr '\n' ' ' < "$LW/components")): source $LW/env.sh"
