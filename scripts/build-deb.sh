#!/usr/bin/env bash
# Build the sarcasmd Debian package with cargo-deb ([package.metadata.deb] in Cargo.toml,
# maintainer scripts in debian/), then inspect it: dpkg-deb --info/--contents, the
# stripped binary, and lintian when installed (lintian findings are reported, not fatal).
#
#   scripts/build-deb.sh                     release build (portable: GGML_NATIVE=OFF) + package
#   scripts/build-deb.sh --no-build          package the existing target/release/sarcasmd
#   scripts/build-deb.sh --target aarch64-unknown-linux-gnu [--no-build]
#                                            arm64 package (toolchain: docs/cross-aarch64.md)
#
# Prints the path of the .deb on the last line of stdout. Exit 0 ok, 1 build/check failed,
# 2 usage or setup error.
set -euo pipefail

CARGO_DEB_VERSION=3.8.0

usage() {
    cat <<EOF
Usage: scripts/build-deb.sh [--no-build] [--target TRIPLE] [--allow-native] [--no-lintian]

  --no-build       do not run cargo build; package the existing release binary
                   (target/release/sarcasmd, or target/TRIPLE/release/sarcasmd)
  --target TRIPLE  cross-build/package for TRIPLE, e.g. aarch64-unknown-linux-gnu (arm64)
  --allow-native   package a binary whose whisper.cpp was built with -march=native
                   (runs only on CPUs with the build machine's instruction set)
  --no-lintian     skip lintian even if it is installed

cargo-deb $CARGO_DEB_VERSION is installed with 'cargo install --locked' if missing
(set CARGO_DEB_TARGET_DIR to build it outside the default temporary directory).
EOF
}

no_build=0 target="" allow_native=0 run_lintian=1
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) no_build=1; shift ;;
        --target) [ $# -ge 2 ] || { echo "build-deb: --target needs a value" >&2; exit 2; }
                  target="$2"; shift 2 ;;
        --target=*) target="${1#--target=}"; shift ;;
        --allow-native) allow_native=1; shift ;;
        --no-lintian) run_lintian=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-deb: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

grep -q '^\[package.metadata.deb\]' Cargo.toml \
    || { echo "build-deb: Cargo.toml has no [package.metadata.deb] section" >&2; exit 2; }
command -v dpkg-deb >/dev/null || { echo "build-deb: dpkg-deb not found (apt-get install dpkg)" >&2; exit 2; }
# $auto dependencies come from dpkg-shlibdeps (package dpkg-dev).
command -v dpkg-shlibdeps >/dev/null \
    || { echo "build-deb: dpkg-shlibdeps not found: apt-get install dpkg-dev" >&2; exit 2; }

# debian/changelog's newest entry should be this version (lintian: no-changelog otherwise).
pkg_version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
cl_version="$(dpkg-parsechangelog -l debian/changelog -S Version 2>/dev/null || true)"
if [ -n "$cl_version" ] && [ "${cl_version%-*}" != "$pkg_version" ]; then
    echo "build-deb: WARNING: debian/changelog is at $cl_version, Cargo.toml at $pkg_version: add a changelog entry" >&2
fi

# 1. cargo-deb, pinned
export PATH="$HOME/.cargo/bin:$PATH"
have="$(cargo deb --version 2>/dev/null | awk '{print $NF}' || true)"
if [ "$have" != "$CARGO_DEB_VERSION" ]; then
    echo "build-deb: installing cargo-deb $CARGO_DEB_VERSION (found: ${have:-none}); takes a few minutes" >&2
    install_args=(install cargo-deb --version "$CARGO_DEB_VERSION" --locked)
    [ -n "${CARGO_DEB_TARGET_DIR:-}" ] && install_args+=(--target-dir "$CARGO_DEB_TARGET_DIR")
    cargo "${install_args[@]}" >&2 \
        || { echo "build-deb: could not install cargo-deb from crates.io" >&2; exit 2; }
fi

# 2. the binary
target_dir="$(cargo metadata --format-version 1 --no-deps 2>/dev/null \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null \
    || echo "$repo/target")"
if [ -n "$target" ]; then
    bin_dir="$target_dir/$target/release"
else
    bin_dir="$target_dir/release"
fi
bin="$bin_dir/sarcasmd"

deb_args=()
[ -n "$target" ] && deb_args+=(--target "$target")
if [ "$no_build" = 1 ]; then
    [ -x "$bin" ] || { echo "build-deb: --no-build but $bin does not exist; build it first or drop --no-build" >&2; exit 2; }
    deb_args+=(--no-build)
else
    # Portable whisper.cpp: without this, ggml is compiled with -march=native and the
    # package would only run on CPUs like the build machine's (e.g. AVX-512 here). On x86
    # GGML_NATIVE=OFF means an AVX2/FMA/F16C baseline; on aarch64 plain armv8-a + NEON,
    # unless GGML_CPU_ARM_ARCH is set (docs/cross-aarch64.md).
    export GGML_NATIVE="${GGML_NATIVE:-OFF}"
fi

# whisper-rs-sys does not rebuild when GGML_* changes, so check what the binary's ggml
# was really configured with (the newest whisper-rs-sys build dir of this target).
cache="$(ls -t "$bin_dir"/build/whisper-rs-sys-*/out/build/CMakeCache.txt 2>/dev/null | head -n 1 || true)"
if [ -n "$cache" ] && grep -q '^GGML_NATIVE:BOOL=ON' "$cache"; then
    echo "build-deb: WARNING: whisper.cpp in $bin_dir was configured with GGML_NATIVE=ON" >&2
    echo "           (-march=native): the package runs only on CPUs with this machine's" >&2
    echo "           instruction set. For a portable package:" >&2
    echo "           cargo clean --release -p whisper-rs-sys${target:+ --target $target} && GGML_NATIVE=OFF scripts/build-deb.sh" >&2
    # A fresh build would not reconfigure it (the build script ignores GGML_* changes).
    [ "$no_build" = 1 ] || [ "$allow_native" = 1 ] || exit 2
fi

echo "build-deb: cargo deb ${deb_args[*]}" >&2
out="$(cargo deb "${deb_args[@]}")" || { echo "build-deb: cargo deb failed" >&2; exit 1; }
deb="$(printf '%s\n' "$out" | grep '\.deb$' | tail -n 1)"
[ -f "$deb" ] || { echo "build-deb: cargo deb printed no .deb path" >&2; exit 1; }

# 3. checks
status=0
echo "== dpkg-deb --info $deb"
dpkg-deb --info "$deb"
echo "== dpkg-deb --contents $deb"
dpkg-deb --contents "$deb"

check="$(mktemp -d)"
trap 'rm -rf "$check"' EXIT
dpkg-deb -x "$deb" "$check/root"
dpkg-deb -e "$deb" "$check/DEBIAN"
for f in usr/bin/sarcasmd usr/sbin/sarcasmd-fetch-models etc/sarcasmd/sarcasmd.toml \
         usr/lib/systemd/system/sarcasmd.service \
         usr/lib/systemd/system/sarcasmd.service.d/10-package.conf \
         usr/share/sarcasmd/scripts/fetch-models.sh usr/share/sarcasmd/models/models.lock.json \
         usr/share/sarcasmd/models/convert/fetch_models.py \
         usr/share/sarcasmd/models/convert/requirements.txt \
         usr/share/sarcasmd/heads/fusion_head.onnx usr/share/sarcasmd/heads/fusion_head.json; do
    [ -e "$check/root/$f" ] || { echo "build-deb: MISSING in package: /$f"; status=1; }
done
if file "$check/root/usr/bin/sarcasmd" | grep -q 'not stripped\|with debug_info'; then
    echo "build-deb: /usr/bin/sarcasmd is not stripped: $(file -b "$check/root/usr/bin/sarcasmd")"
    status=1
fi
grep -qx '/etc/sarcasmd/sarcasmd.toml' "$check/DEBIAN/conffiles" \
    || { echo "build-deb: /etc/sarcasmd/sarcasmd.toml is not a conffile"; status=1; }
# The service must never be enabled or started by the package: cargo-deb's enabling
# snippet ("was-enabled defaults to true") and its start snippets must be absent.
if grep -q 'was-enabled defaults to true' "$check/DEBIAN/postinst"; then
    echo "build-deb: postinst enables the service on install (systemd-units enable must be false)"; status=1
fi
if grep -Eq 'deb-systemd-invoke (start|restart) |_dh_action=start' "$check/DEBIAN/postinst"; then
    echo "build-deb: postinst starts the service (systemd-units start must be false)"; status=1
fi
for s in postinst prerm postrm; do
    if [ -f "$check/DEBIAN/$s" ] && ! sh -n "$check/DEBIAN/$s"; then
        echo "build-deb: $s: syntax error"; status=1
    fi
done
# The shipped config and profiles, validated by the packaged binary (an arm64 one under
# qemu-user as a Pi 4's Cortex-A72 when this is not an arm64 machine and qemu-aarch64 is
# installed).
pkgbin="$check/root/usr/bin/sarcasmd"
run=()
if file -b "$pkgbin" | grep -q 'ARM aarch64' && [ "$(uname -m)" != aarch64 ] \
        && command -v qemu-aarch64 >/dev/null && [ -d /usr/aarch64-linux-gnu ]; then
    run=(qemu-aarch64 -cpu cortex-a72 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
fi
if ${run[@]+"${run[@]}"} "$pkgbin" --version >/dev/null 2>&1; then
    ${run[@]+"${run[@]}"} "$pkgbin" validate "$check/root/etc/sarcasmd/sarcasmd.toml" || status=1
    for p in "$check"/root/usr/share/sarcasmd/firmware-config/*.toml; do
        ${run[@]+"${run[@]}"} "$pkgbin" validate "$p" >/dev/null \
            || { echo "build-deb: $p does not validate"; status=1; }
    done
else
    echo "build-deb: the packaged binary does not run here (cross package without qemu-user?): config validation skipped"
fi
# The shipped unit with the shipped drop-in appended (a repeated [Service] section is what
# systemd makes of a drop-in); systemd-analyze only needs ExecStart's binary to exist.
if [ -x scripts/check-systemd.sh ] && command -v systemd-analyze >/dev/null; then
    mkdir -p "$check/unit"
    cat "$check/root/usr/lib/systemd/system/sarcasmd.service" \
        "$check/root/usr/lib/systemd/system/sarcasmd.service.d/10-package.conf" \
        > "$check/unit/sarcasmd.service"
    if SARCASMD_UNIT="$check/unit/sarcasmd.service" scripts/check-systemd.sh "$pkgbin" >/dev/null; then
        echo "build-deb: packaged unit + drop-in pass scripts/check-systemd.sh"
    else
        echo "build-deb: scripts/check-systemd.sh failed on the packaged unit + drop-in"; status=1
    fi
else
    echo "build-deb: systemd-analyze not installed: unit check skipped"
fi

if [ "$run_lintian" = 1 ] && command -v lintian >/dev/null; then
    echo "== lintian (informational)"
    # initial-upload-closes-no-bugs is about uploads to the Debian archive.
    lintian --tag-display-limit 0 --suppress-tags initial-upload-closes-no-bugs "$deb" || true
elif [ "$run_lintian" = 1 ]; then
    echo "build-deb: lintian not installed (apt-get install lintian), skipped"
fi

ls -l "$deb" "${deb%/*}"/*-dbgsym_*.ddeb 2>/dev/null || true
[ "$status" = 0 ] || { echo "build-deb: package checks FAILED (above)" >&2; exit 1; }
echo "$deb"
