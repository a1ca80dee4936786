#![allow(dead_code)]
//! A small blocking W3C WebDriver client that drives Debian's chromium through
//! chromedriver, for the tests of the caption overlay page.
//!
//! ```ignore
//! let Some(b) = webdriver::Browser::start() else { return }; // prints SKIP
//! b.goto(&format!("{base}/?lines=4")).unwrap();
//! b.wait_for("document.querySelectorAll('.line').length >= 2", Duration::from_secs(20)).unwrap();
//! b.screenshot_png(Path::new("target/overlay.png")).unwrap();
//! ```
//!
//! Set `SARCASMD_REQUIRE_BROWSER=1` to turn the skip into a failure (for CI that has
//! the browser installed and must not silently skip).

use std::fs;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

const SKIP_MSG: &str =
    "SKIP: chromium/chromedriver not installed (scripts/install-system-deps.sh installs them)";

/// A chromedriver process with one chromium session. Dropping it ends the session,
/// stops chromedriver and removes the temporary profile.
pub struct Browser {
    agent: ureq::Agent,
    base: String,
    session: String,
    driver: Option<Child>,
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver and a headless chromium session. Returns None (after printing
    /// a SKIP line) when chromium or chromedriver is not installed; panics on any other
    /// failure, with chromedriver's own message.
    pub fn start() -> Option<Browser> {
        match Self::try_start() {
            Ok(b) => b,
            Err(e) => panic!("cannot start chromium through chromedriver: {e}"),
        }
    }

    /// Like [`Browser::start`], but returns the error instead of panicking.
    pub fn try_start() -> Result<Option<Browser>, String> {
        if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
            if std::env::var_os("SARCASMD_REQUIRE_BROWSER").is_some_and(|v| v == "1") {
                return Err(format!(
                    "{CHROMIUM} or {CHROMEDRIVER} is missing and SARCASMD_REQUIRE_BROWSER=1"
                ));
            }
            println!("{SKIP_MSG}");
            eprintln!("{SKIP_MSG}");
            return Ok(None);
        }
        // A loaded 2-core machine occasionally loses a start (port taken between
        // probing and chromedriver's bind, chromium slow to come up): try again.
        let mut errors = Vec::new();
        for attempt in 1..=3 {
            match Self::launch() {
                Ok(b) => return Ok(Some(b)),
                Err(e) => {
                    eprintln!("webdriver: start attempt {attempt} failed: {e}");
                    errors.push(format!("attempt {attempt}: {e}"));
                }
            }
        }
        Err(errors.join("\n"))
    }

    fn launch() -> Result<Browser, String> {
        let port = free_port()?;
        let profile = unique_temp_dir("sarcasmd-chromium")?;
        let log_path = profile.with_extension("chromedriver.log");
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .arg(format!("--log-path={}", log_path.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                let _ = fs::remove_dir_all(&profile);
                format!("cannot run {CHROMEDRIVER}: {e}")
            })?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        // From here on Drop cleans up whatever was started.
        let mut b = Browser {
            agent,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            driver: Some(driver),
            profile,
        };
        let with_log = |e: String| {
            let log = fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!(
                "{e}\n--- chromedriver log tail ({}) ---\n{}",
                log_path.display(),
                tail.join("\n")
            )
        };
        b.wait_ready(Duration::from_secs(20)).map_err(with_log)?;

        let caps = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "pageLoadStrategy": "normal",
                    "goog:loggingPrefs": { "browser": "ALL" },
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-quic",
                            "--no-first-run",
                            "--disable-background-networking",
                            "--disable-component-update",
                            "--disable-sync",
                            "--disable-dev-shm-usage",
                            "--window-size=1280,720",
                            format!("--user-data-dir={}", b.profile.display()),
                        ]
                    }
                }
            }
        });
        let v = b
            .request("POST", "/session", Some(&caps))
            .map_err(with_log)?;
        b.session = v
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| with_log(format!("new session answered without sessionId: {v}")))?
            .to_string();
        // --window-size includes window decorations even in headless mode (the page
        // gets 1280x577); pin the viewport itself so screenshots are 1280x720.
        b.set_viewport(1280, 720)?;
        Ok(b)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no answer");
        while Instant::now() < deadline {
            if let Some(child) = self.driver.as_mut() {
                if let Ok(Some(st)) = child.try_wait() {
                    return Err(format!("chromedriver exited early ({st})"));
                }
            }
            match self.request("GET", "/status", None) {
                Ok(v) if v.get("ready").and_then(Value::as_bool) == Some(true) => return Ok(()),
                Ok(v) => last = v.to_string(),
                Err(e) => last = e,
            }
            sleep(Duration::from_millis(50));
        }
        Err(format!("chromedriver not ready after {timeout:?}: {last}"))
    }

    /// One WebDriver command. Returns the answer's `value`; an error answer becomes
    /// `Err("<error>: <message>")` with WebDriver's own words.
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let url = format!("{}{}", self.base, path);
        let res = match method {
            "GET" => self.agent.get(&url).call(),
            "DELETE" => self.agent.delete(&url).call(),
            "POST" => {
                let text = body.map(Value::to_string).unwrap_or_else(|| "{}".into());
                self.agent
                    .post(&url)
                    .header("Content-Type", "application/json; charset=utf-8")
                    .send(text)
            }
            other => return Err(format!("unsupported method {other}")),
        };
        let mut res = res.map_err(|e| format!("{method} {path}: {e}"))?;
        let status = res.status().as_u16();
        let text = res
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| format!("{method} {path}: reading the answer: {e}"))?;
        let parsed: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{method} {path}: HTTP {status}, not JSON ({e}): {text:.300}"))?;
        let value = parsed.get("value").cloned().unwrap_or(Value::Null);
        if status >= 400 {
            let error = value
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            let message = value.get("message").and_then(Value::as_str).unwrap_or("");
            return Err(format!("{method} {path}: HTTP {status} {error}: {message}"));
        }
        Ok(value)
    }

    fn cmd(&self, method: &str, rest: &str, body: Option<&Value>) -> Result<Value, String> {
        self.request(method, &format!("/session/{}{}", self.session, rest), body)
    }

    /// Navigates and waits for the page's load event.
    pub fn goto(&self, url: &str) -> Result<(), String> {
        self.cmd("POST", "/url", Some(&json!({ "url": url })))
            .map(|_| ())
    }

    pub fn current_url(&self) -> Result<String, String> {
        Ok(self
            .cmd("GET", "/url", None)?
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Runs `script` as the body of a function (use `return`), with `arguments[i]` =
    /// `args[i]`, and returns its JSON-serialised result.
    pub fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value, String> {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(&json!({ "script": script, "args": args })),
        )
    }

    /// Evaluates the JavaScript expression `predicate` every 100 ms until it is truthy
    /// and returns its value. Exceptions (e.g. an element that is not there yet) count
    /// as "not yet". The error names the expression and its last value or exception.
    pub fn wait_for(&self, predicate: &str, timeout: Duration) -> Result<Value, String> {
        let script =
            format!("var v = ({predicate});\nreturn {{ ok: !!v, v: v === undefined ? null : v }};");
        let deadline = Instant::now() + timeout;
        let mut last: String;
        loop {
            match self.execute(&script, vec![]) {
                Ok(r) if r.get("ok").and_then(Value::as_bool) == Some(true) => {
                    return Ok(r.get("v").cloned().unwrap_or(Value::Null));
                }
                Ok(r) => last = format!("value {}", r.get("v").cloned().unwrap_or(Value::Null)),
                Err(e) if e.contains("javascript error") => last = e,
                Err(e) => return Err(format!("waiting for `{predicate}`: {e}")),
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "timed out after {timeout:?} waiting for `{predicate}`; last: {last}"
                ));
            }
            sleep(Duration::from_millis(100));
        }
    }

    /// Screenshot of the viewport as PNG, written to `path` (parent folders created).
    pub fn screenshot_png(&self, path: &Path) -> Result<(), String> {
        let v = self.cmd("GET", "/screenshot", None)?;
        let b64 = v
            .as_str()
            .ok_or_else(|| format!("screenshot answer is not a string: {v:.100}"))?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| format!("screenshot is not base64: {e}"))?;
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let mut f = fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        f.write_all(&png)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Makes screenshots keep the page's transparency (headless chromium paints a
    /// transparent page on white otherwise), as OBS composites it.
    pub fn transparent_background(&self) -> Result<(), String> {
        self.cdp(
            "Emulation.setDefaultBackgroundColorOverride",
            json!({ "color": { "r": 0, "g": 0, "b": 0, "a": 0 } }),
        )
        .map(|_| ())
    }

    /// Sets the page's viewport (CSS pixels, scale 1); kept across navigations.
    pub fn set_viewport(&self, width: u32, height: u32) -> Result<(), String> {
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
        )
        .map(|_| ())
    }

    /// A Chrome DevTools Protocol command through chromedriver.
    pub fn cdp(&self, cmd: &str, params: Value) -> Result<Value, String> {
        self.cmd(
            "POST",
            "/goog/cdp/execute",
            Some(&json!({ "cmd": cmd, "params": params })),
        )
    }

    /// Browser console messages since the last call (chromedriver's log endpoint):
    /// "LEVEL message" per entry.
    pub fn console_log(&self) -> Result<Vec<String>, String> {
        let v = self.cmd("POST", "/se/log", Some(&json!({ "type": "browser" })))?;
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        format!(
                            "{} {}",
                            e.get("level").and_then(Value::as_str).unwrap_or("?"),
                            e.get("message").and_then(Value::as_str).unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Path of the temporary chromium profile (unique to this Browser).
    pub fn profile_dir(&self) -> &Path {
        &self.profile
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.cmd("DELETE", "", None);
        }
        if let Some(mut child) = self.driver.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // chromium normally quits with the session; if it did not (driver crash, failed
        // DELETE), end the processes that run with our unique profile, and only those.
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let left = pids_with_arg(&format!("--user-data-dir={}", self.profile.display()));
            if left.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                for pid in left {
                    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
                }
                break;
            }
            sleep(Duration::from_millis(50));
        }
        let _ = fs::remove_dir_all(&self.profile);
        let _ = fs::remove_file(self.profile.with_extension("chromedriver.log"));
    }
}

fn free_port() -> Result<u16, String> {
    // (No "is it still free?" connect probe: on loopback a connect to a just-freed
    // ephemeral port can connect to itself and report a false "taken".)
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    Ok(port)
}

fn unique_temp_dir(prefix: &str) -> Result<PathBuf, String> {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Pids of processes one of whose arguments is exactly `arg` (Linux /proc).
fn pids_with_arg(arg: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes()) {
            out.push(pid);
        }
    }
    out
}
