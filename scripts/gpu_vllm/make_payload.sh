#!/bin/bash
# Build the carry folders that put vLLM 0.26.0 on the GPU machine, which has no network and takes
# at most 64 MiB per device call (the project's tree, ~8 MiB, included). 0.26.0 is the newest vLLM
# whose wheel is built for torch 2.11 (the GPU image's). Run here, from the project's root:
#     bash scripts/gpu_vllm/make_payload.sh
# It downloads the vLLM wheel and the small wheels that the image lacks (for CPython 3.12,
# manylinux x86_64), deletes from the vLLM wheel what a Hopper GPU does not load (FlashAttention 2's
# library: Hopper runs FlashAttention 3; the optional Rust frontend; DeepGEMM's builds for other
# Pythons; the Blackwell attention kernels' C++ sources), without recompressing anything, and splits
# the wheels into ignored folders .gpuvllm1, .gpuvllm2, ... of at most PART_MIB (default 55) MiB.
# install.sh beside this file puts them back together on the machine (docs/vllm.md, "Install").
set -euo pipefail
ROOT=$(git rev-parse --show-toplevel); cd "$ROOT"
PART_MIB=${PART_MIB:-55}
VLLM=${VLLM:-vllm==0.26.0}
# what `import vllm` and an offline `LLM` with LoRA need beyond the GPU image (found by blocking imports)
DEPS=(pydantic==2.14.4 pydantic-core==2.50.5 typing-inspection==0.4.5 annotated-types==0.8.0 cbor2==6.3.0
      pyzmq==27.3.0 openai-harmony openai==2.54.0 sniffio==1.3.1 jiter==0.19.0 distro msgspec==0.23.0
      pybase64==1.5.1 cachetools==8.0.2 llguidance==1.7.6 xgrammar==0.2.7 apache-tvm-ffi==0.1.10
      fastapi==0.136.3 starlette==1.10.0 partial-json-parser==0.2.1.1.post7 compressed-tensors==0.17.0
      loguru==0.7.3 depyf==0.20.0 astor==0.8.1 dill==0.4.1)
PLATFORMS=()
for p in manylinux_2_39 manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 \
         manylinux_2_17 manylinux2014 manylinux1; do PLATFORMS+=(--platform "${p}_x86_64"); done
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${PLATFORMS[@]}" -d "$W/whl" "$VLLM" "${DEPS[@]}"
(cd "$W/whl" && zip -q -d vllm-*.whl 'vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so' 'vllm/vllm-rs' \
  'vllm/third_party/deep_gemm/_C.cpython-31[0134]-*' 'vllm/third_party/fmha_sm100/*.h*' \
  'vllm/third_party/fmha_sm100/*/*' 'vllm/entrypoints/serve/instrumentator/static/swagger-ui-bundle.js')
echo "$(ls "$W/whl" | wc -l) wheels, $(du -cm "$W"/whl/*.whl | tail -1 | cut -f1) MiB"
tar -C "$W/whl" -cf "$W/payload.tar" .
split -b "${PART_MIB}M" -d -a 2 "$W/payload.tar" "$W/part."
rm -rf .gpuvllm[0-9]*
n=0
for part in "$W"/part.*; do
  n=$((n + 1)); mkdir ".gpuvllm$n"; mv "$part" ".gpuvllm$n/payload.tar.$(basename "$part" | cut -d. -f2)"
done
# the manifest travels in every folder: whichever call comes first knows how many parts to wait for
for d in .gpuvllm*/; do
  { echo "parts=$n"; echo "sha256=$(sha256sum "$W/payload.tar" | cut -d' ' -f1)"; echo "vllm=$VLLM"; } > "$d/manifest"
done
du -sh .gpuvllm*/
