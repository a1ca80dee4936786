//! Process resource usage, for the run summary and benchmarks (no timing in tests).

/// CPU seconds (user + system) used by this process so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Peak resident set size in MB (Linux reports `ru_maxrss` in KiB).
pub fn peak_rss_mb() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
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
