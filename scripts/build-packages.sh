#!/usr/bin/env bash
# Both release packages from a clean checkout, with one command:
#   amd64: portable x86-64 (whisper.cpp with GGML_NATIVE=OFF: AVX2/FMA/F16C baseline, no
#          AVX-512), so it runs on other PCs than the build machine;
#   arm64: baseline armv8-a + NEON (GGML_CPU_ARM_ARCH unset), which runs on a Raspberry
#          Pi 4 (Cortex-A72) as well as a Pi 5 and a Jetson Orin (docs/cross-aarch64.md).
# Installs what it needs (Debian/Ubuntu, as root): the native build deps, the aarch64 cross
# toolchain, qemu-user, arm64 multiarch ALSA/libstdc++ and the Rust aarch64 std library.
# Builds in its own target dir (default target/packages; CARGO_TARGET_DIR overrides), so a
# developer's -march=native build never ends up in a package.
#
#   scripts/build-packages.sh [--only amd64|arm64] [--out DIR]
#
# Prints one line per package: "package ARCH PATH". The packages are then checked by
# `cargo test --release --test peers packages` (contents, Depends:, the binary's architecture).
# Cold: about 15 min per architecture on 2 cores. Exit 0 ok, 1 build failed, 2 setup error.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

only="" out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --only) only="${2:-}"; shift 2 ;;
        --out) out="${2:-}"; shift 2 ;;
        -h|--help) sed -n 2,16p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-packages: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$only" in ""|amd64|arm64) ;; *) echo "build-packages: --only takes amd64 or arm64" >&2; exit 2 ;; esac

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target/packages}"
out="${out:-$CARGO_TARGET_DIR/debian}"
TRIPLE=aarch64-unknown-linux-gnu

need_apt=()
dpkg -s gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user dpkg-dev >/dev/null 2>&1 \
    || need_apt+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user dpkg-dev)
# What both architectures use: build-deb.sh runs dpkg-shlibdeps (dpkg-dev) for Depends:.
setup_native() {
    bash scripts/install-system-deps.sh
    dpkg -s dpkg-dev >/dev/null 2>&1 && return 0
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q dpkg-dev \
        || { echo "build-packages: apt-get install dpkg-dev failed" >&2; exit 2; }
}
setup_cross() {
    bash scripts/install-system-deps.sh
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    if [ ${#need_apt[@]} -gt 0 ]; then
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" \
            || { echo "build-packages: apt-get install ${need_apt[*]} failed" >&2; exit 2; }
    fi
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $sudo dpkg --add-architecture arm64
        $sudo apt-get update -q
    fi
    # libasound2-dev:arm64 for alsa-sys (pkg-config); libstdc++6:arm64 so dpkg-shlibdeps can
    # name the C++ runtime in Depends: (without it cargo-deb writes "libstdc++6:arm64").
    dpkg -s libasound2-dev:arm64 libstdc++6:arm64 >/dev/null 2>&1 \
        || $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q libasound2-dev:arm64 libstdc++6:arm64 \
        || { echo "build-packages: apt-get install libasound2-dev:arm64 libstdc++6:arm64 failed" >&2; exit 2; }
    # rustup's server is not a package registry this project can count on: say what to do.
    rustup target list --installed 2>/dev/null | grep -qx "$TRIPLE" || rustup target add "$TRIPLE" || {
        echo "build-packages: 'rustup target add $TRIPLE' failed (no network to static.rust-lang.org?)." >&2
        echo "  Build on the board instead (cargo build --release; scripts/build-deb.sh), or run with --only amd64." >&2
        exit 2
    }
}

# The cross toolchain, as docs/cross-aarch64.md's config but in the environment, so the
# repository carries no [env] that would also change native builds.
cross_env() {
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=/usr/bin/aarch64-linux-gnu-gcc
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib"
    export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
    export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
    export PKG_CONFIG_ALLOW_CROSS=1
    export PKG_CONFIG_LIBDIR_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
    # cargo-deb strips with the target's binutils (found from the absolute linker path).
    export STRIP_aarch64_linux_gnu=/usr/bin/aarch64-linux-gnu-strip OBJCOPY_aarch64_linux_gnu=/usr/bin/aarch64-linux-gnu-objcopy
}

if [ "$only" = amd64 ]; then setup_native; else setup_cross; fi
mkdir -p "$out"
# GGML_NATIVE=OFF for both: ggml picks its SIMD code at compile time (build-deb.sh refuses a
# -march=native whisper.cpp unless told otherwise). GGML_CPU_ARM_ARCH must stay unset for
# the Pi 4: armv8.2-a+dotprod dies of SIGILL there.
export GGML_NATIVE=OFF
unset GGML_CPU_ARM_ARCH
built=()
# cargo-deb writes into the target dir; copy to --out unless that is where it already is.
keep() { [ "$(realpath "$(dirname "$1")")" = "$(realpath "$out")" ] || cp "$1" "$out/"; echo "$out/$(basename "$1")"; }
if [ "$only" != arm64 ]; then
    deb="$(scripts/build-deb.sh --no-lintian | tee /dev/stderr | tail -n 1)"
    built+=("amd64 $(keep "$deb")")
fi
if [ "$only" != amd64 ]; then
    cross_env
    deb="$(scripts/build-deb.sh --no-lintian --target "$TRIPLE" | tee /dev/stderr | tail -n 1)"
    built+=("arm64 $(keep "$deb")")
fi
for b in "${built[@]}"; do echo "package $b"; done
