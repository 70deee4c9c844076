#!/usr/bin/env bash
# The render bench on a GPU node, one command (scripts/gpu/chromium: `source /opt/chr/env.sh`
# first; $LIT_WATERCOLOUR_CHROMIUM is the GPU wrapper, /opt/chr/chrome.sh SwiftShader).
# SCALE=tiny runs every step at toy sizes (to check the command on a CPU box).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python}
SW=${SWIFTSHADER_EXE:-/opt/chr/chrome.sh}
GPU=${GPU_EXE:-$LIT_WATERCOLOUR_CHROMIUM}
if [ "${SCALE:-node}" = tiny ]; then
  R=4; RR=1; SUITES=heavy; GRID_GPU=1x1,2x2; GRID_SW=1x1,2x1; T1=300; T2=300; T3=300
else  # about 5 minutes on one H200 node (16 cores); each step is cut off at its T, rows print as they finish
  R=48; RR=4; SUITES=heavy,recipe,fixtures; T1=220; T2=150; T3=110
  GRID_GPU=1x1,4x1,8x1,8x2,16x1,16x2,16x4,32x1,32x2,32x4,32x8
  GRID_SW=1x1,4x4,16x8,32x8
fi
echo "== (i) ours (GPU) vs the recipe's design (SwiftShader); the recipe's design on heavy512 only, $RR renders; each suite also with reuse_pages off"
timeout $T1 $PY scripts/bench_render.py --suites $SUITES --recipe-suites heavy --renders $R --recipe-renders $RR \
  --backend gpu --ablate-reuse --gpu-executable "$GPU" --swiftshader-executable "$SW"
echo "== (ii) grid, GPU (8 renders a cell, at least 2 a page)"
timeout $T2 $PY scripts/bench_render.py --no-compare --suites heavy --renders 8 --backends gpu --grid $GRID_GPU \
  --gpu-executable "$GPU" --swiftshader-executable "$SW"
echo "== (ii) grid, SwiftShader (fewer cells: ~2-3 renders/s)"
timeout $T3 $PY scripts/bench_render.py --no-compare --suites heavy --renders 8 --backends swiftshader --grid $GRID_SW \
  --gpu-executable "$GPU" --swiftshader-executable "$SW"
