//! whisper.cpp's log lines routed into `log`, and its abort callback.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::Once;

pub(super) static LOG_HOOKS: Once = Once::new();

/// Where whisper.cpp's own log lines go in `log` (the target whisper-rs used, so
/// existing `RUST_LOG` filters keep working).
pub(super) const NATIVE_LOG_TARGET: &str = "whisper_rs::whisper_logging_hook";

thread_local! {
    /// Set while a decode on this thread is being abandoned: whisper.cpp then logs
    /// "failed to encode/decode" as an error, which is expected and must not alarm.
    pub(super) static ABANDONING: Cell<bool> = const { Cell::new(false) };
}

/// whisper.cpp's log lines into `log`, like whisper-rs's hook, except that errors of an
/// abandoned decode are debug lines.
pub(super) unsafe extern "C" fn native_log(
    level: whisper_rs::whisper_rs_sys::ggml_log_level,
    text: *const c_char,
    _user_data: *mut c_void,
) {
    if text.is_null() {
        return;
    }
    // SAFETY: whisper.cpp passes a NUL-terminated string valid for this call.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let level = match level {
        whisper_rs::whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_ERROR => log::Level::Error,
        whisper_rs::whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_WARN => log::Level::Warn,
        whisper_rs::whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_INFO => log::Level::Info,
        whisper_rs::whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_DEBUG => log::Level::Debug,
        _ => log::Level::Trace,
    };
    let level = if ABANDONING.with(Cell::get) {
        level.max(log::Level::Debug)
    } else {
        level
    };
    log::log!(target: NATIVE_LOG_TARGET, level, "{text}");
}

/// whisper.cpp's abort callback: `user_data` points at the caller's `&dyn Fn() -> bool`.
pub(super) unsafe extern "C" fn abandon_if(user_data: *mut c_void) -> bool {
    // SAFETY: set in `decode` to a reference that outlives the `full` call.
    let should = unsafe { &*(user_data as *const &dyn Fn() -> bool) };
    let abandon = should();
    if abandon {
        ABANDONING.with(|a| a.set(true));
    }
    abandon
}

pub(super) fn install_log_hooks() {
    // ggml's own lines through whisper-rs; whisper.cpp's through ours.
    whisper_rs::install_logging_hooks();
    // SAFETY: a plain function pointer and no user data.
    unsafe { whisper_rs::whisper_rs_sys::whisper_log_set(Some(native_log), std::ptr::null_mut()) };
}
