//! Process resource usage, for the run summary and benchmarks (no timing in tests).

/// Audio below which a per-audio-second ratio is not reported: over a few samples the
/// ratio is noise (3 bytes of PCM once gave 309 CPU-s per audio-s).
pub const MIN_AUDIO_S_FOR_RATIOS: f64 = 1.0;

/// `x` per audio second, or `None` when less than [`MIN_AUDIO_S_FOR_RATIOS`] of audio
/// was read (none at all included).
pub fn per_audio_second(x: f64, audio_s: f64) -> Option<f64> {
    (audio_s >= MIN_AUDIO_S_FOR_RATIOS).then(|| x / audio_s)
}

/// CPU seconds (user + system) used by this process so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain integers and timevals: all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass, which outlives the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Peak resident set size in MB (Linux reports `ru_maxrss` in KiB).
pub fn peak_rss_mb() -> f64 {
    // SAFETY: rusage is plain integers and timevals: all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass, which outlives the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    ru.ru_maxrss as f64 / 1024.0
}

/// Hand memory freed by a finished stream back to the system. glibc keeps freed chunks
/// of its per-thread arenas; each stream's threads otherwise left ~50 MB resident
/// behind them (seen as RSS growing from run to run in one `bench` process, and on
/// every SIGHUP reload of the daemon). A no-op elsewhere.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own allocator state; no pointers are passed.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The CPU figures were measured on, for benchmark reports: latency and CPU cost differ
/// several-fold between x86 generations (whisper.cpp is built with `-march=native` and
/// uses AVX-512 where present) and between ARM cores, so a figure without its CPU
/// cannot be compared.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CpuInfo {
    /// `model name` (x86), else `Model` (Raspberry Pi) or `Hardware`; "unknown" if none.
    pub model: String,
    /// x86 `cpu family` / `model`, or ARM `CPU implementer` / `CPU part` (what tells
    /// generations apart when the model name is generic, e.g. "AMD EPYC" under KVM).
    pub family: String,
    /// Logical CPUs listed.
    pub cpus: usize,
    /// The SIMD extensions ggml's kernels use, among those the CPU reports.
    pub simd: Vec<String>,
}

/// SIMD flags that change which ggml kernels run (x86 `flags`, ARM `Features`).
const SIMD_FLAGS: &[&str] = &[
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "asimd",
    "asimddp",
    "asimdhp",
    "i8mm",
    "sve",
];

/// What `/proc/cpuinfo` says about this machine's CPU (Linux; "unknown" elsewhere).
pub fn cpu_info() -> CpuInfo {
    parse_cpu_info(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default())
}

fn parse_cpu_info(text: &str) -> CpuInfo {
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let model = field("model name")
        .or_else(|| field("Model"))
        .or_else(|| field("Hardware"))
        .unwrap_or_else(|| "unknown".into());
    let family = match (field("cpu family"), field("model")) {
        (Some(f), Some(m)) => format!("family {f} model {m}"),
        _ => match (field("CPU implementer"), field("CPU part")) {
            (Some(i), Some(p)) => format!("implementer {i} part {p}"),
            _ => String::new(),
        },
    };
    let cpus = text
        .lines()
        .filter(|l| {
            l.split_once(':')
                .is_some_and(|(k, _)| k.trim() == "processor")
        })
        .count();
    let flags = field("flags")
        .or_else(|| field("Features"))
        .unwrap_or_default();
    let have: Vec<&str> = flags.split_whitespace().collect();
    let simd = SIMD_FLAGS
        .iter()
        .filter(|f| have.contains(f))
        .map(|f| f.to_string())
        .collect();
    CpuInfo {
        model,
        family,
        cpus,
        simd,
    }
}

impl std::fmt::Display for CpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.model)?;
        if !self.family.is_empty() {
            write!(f, " ({})", self.family)?;
        }
        write!(f, ", {} CPUs, SIMD: {}", self.cpus, self.simd.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_need_a_second_of_audio() {
        assert_eq!(per_audio_second(0.02, 1.0 / 16_000.0), None);
        assert_eq!(per_audio_second(1.0, 0.0), None);
        assert_eq!(per_audio_second(1.0, 2.0), Some(0.5));
    }

    #[test]
    fn cpu_info_names_the_cpu_on_x86_and_on_a_raspberry_pi() {
        let epyc = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n\
                    model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx fma avx2 avx512f avx512_vnni\n\n\
                    processor\t: 1\nmodel name\t: AMD EPYC\n";
        let c = parse_cpu_info(epyc);
        assert_eq!(c.model, "AMD EPYC");
        assert_eq!(c.family, "family 26 model 2");
        assert_eq!(c.cpus, 2);
        assert_eq!(c.simd, ["avx", "avx2", "fma", "avx512f", "avx512_vnni"]);
        assert_eq!(
            c.to_string(),
            "AMD EPYC (family 26 model 2), 2 CPUs, SIMD: avx avx2 fma avx512f avx512_vnni"
        );
        // A Pi 5 has no `model name`; its board is `Model`, its core `CPU part`.
        let pi = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm aes asimdhp asimddp\n\
                  CPU implementer\t: 0x41\nCPU part\t: 0xd0b\n\nprocessor\t: 1\n\n\
                  Model\t\t: Raspberry Pi 5 Model B Rev 1.0\n";
        let c = parse_cpu_info(pi);
        assert_eq!(c.model, "Raspberry Pi 5 Model B Rev 1.0");
        assert_eq!(c.family, "implementer 0x41 part 0xd0b");
        assert_eq!(c.cpus, 2);
        assert_eq!(c.simd, ["asimd", "asimddp", "asimdhp"]);
        assert_eq!(parse_cpu_info("").model, "unknown");
    }
}
