//! The release packages `scripts/build-packages.sh` builds (amd64 portable, arm64 for the
//! Raspberry Pi 4/5 and Jetson): control fields, `Depends:`, contents and the packaged
//! binary's architecture. Runs only when the packages exist (building them takes about
//! 15 minutes per architecture, so it is not part of the test command): it looks in
//! `$SARCASMD_PACKAGES_DIR`, else `target/packages/debian`, and says so when it skips.

use std::path::{Path, PathBuf};
use std::process::Command;

fn packages_dir() -> PathBuf {
    std::env::var_os("SARCASMD_PACKAGES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/packages/debian"))
}

/// The newest `sarcasmd_<version>_<arch>.deb` of each architecture.
fn packages() -> Vec<(String, PathBuf)> {
    let dir = packages_dir();
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return vec![];
    };
    let mut found: Vec<(String, PathBuf)> = vec![];
    let mut debs: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    debs.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    for p in debs.into_iter().rev() {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let Some(arch) = name
            .strip_prefix("sarcasmd_")
            .and_then(|n| n.strip_suffix(".deb"))
            .and_then(|n| n.rsplit('_').next())
        else {
            continue;
        };
        if !found.iter().any(|(a, _)| a == arch) {
            found.push((arch.to_string(), p.clone()));
        }
    }
    found
}

fn field(deb: &Path, name: &str) -> String {
    let out = Command::new("dpkg-deb")
        .arg("-f")
        .arg(deb)
        .arg(name)
        .output()
        .expect("dpkg-deb runs");
    assert!(out.status.success(), "dpkg-deb -f {} {name}", deb.display());
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// ELF e_machine of a binary: 0x3e x86-64, 0xb7 aarch64.
fn elf_machine(bin: &Path) -> u16 {
    let b = std::fs::read(bin).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "{} is not an ELF file", bin.display());
    u16::from_le_bytes([b[18], b[19]])
}

#[test]
fn release_packages_have_the_right_architecture_contents_and_depends() {
    let pkgs = packages();
    if pkgs.is_empty() {
        eprintln!(
            "SKIP: no sarcasmd_*.deb in {} (build them with scripts/build-packages.sh, or set SARCASMD_PACKAGES_DIR)",
            packages_dir().display()
        );
        return;
    }
    for (arch, deb) in &pkgs {
        eprintln!("checking {}", deb.display());
        assert!(
            arch == "amd64" || arch == "arm64",
            "unexpected architecture {arch}"
        );
        assert_eq!(field(deb, "Package"), "sarcasmd");
        assert_eq!(&field(deb, "Architecture"), arch);
        let depends = field(deb, "Depends");
        // Every run-time library by its Debian package name (dpkg-shlibdeps), never with an
        // architecture qualifier (what cargo-deb writes when the :arm64 library is not
        // installed on the build machine).
        for lib in [
            "libc6 (>= ",
            "libasound2 (>= ",
            "libstdc++6 (>= ",
            "alsa-utils",
        ] {
            assert!(
                depends.contains(lib),
                "{arch}: Depends lacks {lib}: {depends}"
            );
        }
        assert!(
            !depends.contains(':'),
            "{arch}: qualified Depends: {depends}"
        );
        // glibc no newer than Debian 12 / Raspberry Pi OS bookworm (2.36) and Ubuntu 22.04
        // (2.35, JetPack 6) have.
        let glibc = depends
            .split(',')
            .find_map(|d| d.trim().strip_prefix("libc6 (>= "))
            .and_then(|v| v.strip_suffix(')'))
            .unwrap();
        let minor: u32 = glibc
            .split('.')
            .nth(1)
            .and_then(|m| m.parse().ok())
            .unwrap();
        assert!(
            minor <= 35,
            "{arch}: needs glibc {glibc}, newer than Ubuntu 22.04's 2.35"
        );

        let root = tempfile::tempdir().unwrap();
        let st = Command::new("dpkg-deb")
            .arg("-x")
            .arg(deb)
            .arg(root.path())
            .status()
            .unwrap();
        assert!(st.success());
        for f in [
            "usr/bin/sarcasmd",
            "usr/sbin/sarcasmd-fetch-models",
            "etc/sarcasmd/sarcasmd.toml",
            "usr/lib/systemd/system/sarcasmd.service",
            "usr/share/sarcasmd/heads/text_head.onnx",
            "usr/share/sarcasmd/heads/fusion_head.onnx",
            "usr/share/sarcasmd/firmware-config/rpi4.toml",
            "usr/share/sarcasmd/firmware-config/rpi5.toml",
            "usr/share/sarcasmd/models/models.lock.json",
        ] {
            assert!(root.path().join(f).exists(), "{arch}: /{f} missing");
        }
        let bin = root.path().join("usr/bin/sarcasmd");
        let machine = elf_machine(&bin);
        assert_eq!(
            machine,
            if arch == "amd64" { 0x3e } else { 0xb7 },
            "{arch}: ELF machine {machine:#x}"
        );
        // The packaged binary runs: natively, or an arm64 one under qemu-user when present.
        let mut cmd = if arch == "arm64" && std::env::consts::ARCH != "aarch64" {
            if Command::new("qemu-aarch64")
                .arg("--version")
                .output()
                .is_err()
            {
                eprintln!("arm64 binary not run: qemu-aarch64 not installed");
                continue;
            }
            let mut c = Command::new("qemu-aarch64");
            // A Pi 4's CPU: an instruction it lacks ends in SIGILL here too.
            c.args([
                "-cpu",
                "cortex-a72",
                "-L",
                "/usr/aarch64-linux-gnu",
                "-E",
                "LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib",
            ]);
            c.arg(&bin);
            c
        } else if arch == "amd64" && std::env::consts::ARCH == "x86_64" {
            Command::new(&bin)
        } else {
            continue;
        };
        let out = cmd
            .arg("validate")
            .arg(
                root.path()
                    .join("usr/share/sarcasmd/firmware-config/rpi4.toml"),
            )
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{arch}: packaged binary cannot validate the rpi4 profile: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
