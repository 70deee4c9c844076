#!/bin/bash
# Build the two payloads that put Debian 12's headless Chromium, Playwright and the project's
# renderer on the GPU machine (which has no Chromium, no node and no network).
# Run from the project's root after `make setup` (it reads .venv and renderer/node_modules):
#     bash scripts/gpu/chromium/make_payload.sh
# It writes four ignored folders (added to .git/info/exclude): .devchr1 (~33 MiB), .devchr2 (~50 MiB),
# .devchr3 (~36 MiB) and .gl (GL/Vulkan loaders), sized so that each call, with the project's own
# tree (~8 MiB), stays under 64 MiB. scripts/gpu/chromium/README.md says how to use them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(git rev-parse --show-toplevel); cd "$ROOT"
SP=$(ls -d .venv/lib/python3*/site-packages | head -1)
W=$(mktemp -d); X=$W/x
for d in .devchr1 .devchr2 .devchr3 .gl; do grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude; done
rm -rf .devchr1 .devchr2 .devchr3; mkdir -p .devchr1/zstd .devchr2 .devchr3 .gl $X $W/stage/chr/lib $W/stage/chr/chromium $W/stage2/site $W/stage2/proj
command -v zstd >/dev/null || apt-get install -y -qq zstd
[ -n "$(ls /var/lib/apt/lists/*debian* 2>/dev/null | head -1)" ] || apt-get update -qq
(cd $W && apt-get download -qq chromium-headless-shell chromium-common)
for f in $W/chromium-headless-shell_*.deb $W/chromium-common_*.deb; do dpkg -x $f $X; done
C=$X/usr/lib/chromium
# calls 1 and 2: the 213 MiB binary (zstd -19 --long: ~58 MiB) in two halves, and a zstd CLI,
# which the GPU machine lacks
zstd -19 --long=27 -T2 -q -c $C/chromium-headless-shell > $W/chs.zst
split -n 2 -d $W/chs.zst $W/chs.zst.part
mv $W/chs.zst.part00 .devchr1/chs.zst.part00; mv $W/chs.zst.part01 .devchr2/chs.zst.part01
cp -L "$(command -v zstd)" .devchr1/zstd/
for l in libzstd.so.1 liblzma.so.5 liblz4.so.1 libz.so.1; do cp -L /lib/x86_64-linux-gnu/$l .devchr1/zstd/; done
cp "$HERE"/{unz.sh,chrome.sh,chrome-gpu.sh,install.sh,probe.html} .devchr1/
cp "$HERE/../../../renderer/bench/heavy512.js" .devchr1/heavy.js  # the benchmark's heavy sketch
# call 2: runtime files + every non-glibc library the binary needs + NSS's dlopened modules
cp -a $C/{headless_command_resources.pak,headless_lib_data.pak,headless_lib_strings.pak,icudtl.dat,v8_context_snapshot.bin,snapshot_blob.bin,libvk_swiftshader.so,vk_swiftshader_icd.json,libvulkan.so.1,libEGL.so,libGLESv2.so,chrome_crashpad_handler,locales} $W/stage/chr/chromium/
ldd $C/chromium-headless-shell | awk '/=>/{print $1, $3}' \
  | grep -v -E '^(libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libstdc\+\+|libgcc_s|ld-linux)' \
  | while read so path; do cp -L "$path" $W/stage/chr/lib/$so; done
for f in libfreebl3.so libfreeblpriv3.so libnssckbi.so libnssdbm3.so libsmime3.so libsoftokn3.so libssl3.so; do
  cp -L /usr/lib/x86_64-linux-gnu/$f $W/stage/chr/lib/; done
(cd $W/stage && tar -cf - chr | zstd -19 -T2 -q > "$ROOT"/.devchr2/res.tar.zst)
# Playwright's Python package (without its node, vite and types) and greenlet for the GPU machine's Python 3.12
(cd $SP && tar -cf - --exclude=__pycache__ --exclude=playwright/driver/node playwright | tar -xf - -C $W/stage2/site)
rm -rf $W/stage2/site/playwright/driver/package/lib/vite $W/stage2/site/playwright/driver/package/types
GV=$(.venv/bin/python -c 'import greenlet; print(greenlet.__version__)')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d $W/whl greenlet==$GV
(cd $W/stage2/site && unzip -qo $W/whl/greenlet-*-cp312-*.whl)
# p5 and p5.brush as npm installed them (the project itself travels as the working tree)
mkdir -p $W/stage2/nm/p5/lib $W/stage2/nm/p5.brush/dist
cp renderer/node_modules/p5/lib/p5.min.js $W/stage2/nm/p5/lib/
cp renderer/node_modules/p5.brush/dist/p5.brush.js $W/stage2/nm/p5.brush/dist/
# call 3: Playwright, its node, greenlet, p5 and p5.brush
(cd $W/stage2 && tar -cf - site nm | zstd -19 -T2 -q > "$ROOT"/.devchr3/py.tar.zst)
zstd -19 --long=27 -T2 -q -c $SP/playwright/driver/node > .devchr3/node.zst
# GL/Vulkan loaders (the device tool's notes give the recipe)
mkdir -p /tmp/amd64/partial; o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update -qq; (cd .gl && rm -f *.deb && apt-get $o download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
rm -rf $W
du -sh .devchr1 .devchr2 .devchr3 .gl
