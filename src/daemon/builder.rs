//! The daemon as a value its caller holds, as pueue's tests hold theirs.
//!
//! Why: a caller that starts the daemon needs to know *when* it is ready (models loaded,
//! HTTP listener bound, stream running), *where* it listens (the listener may be bound to
//! port 0) and *how* a run or a reload ended. Read from a child process's log, each of
//! those is a guess: text that may change, a port picked and released before the daemon
//! binds it, a sleep long enough on one machine. [`Daemon::builder`] answers them as
//! state: [`DaemonHandle::wait_ready`], [`DaemonHandle::reload`] and
//! [`DaemonHandle::stop`] wait on a condition variable with a timeout and return what
//! happened. The binary (`sarcasmd run`, `sarcasmd replay`) builds the same value and
//! only adds argument parsing and signal handling ([`DaemonBuilder::stop_on`],
//! [`DaemonBuilder::reload_on`]).
//!
//! A test can also hand in what it already has: an engine loaded once for the whole test
//! binary ([`DaemonBuilder::engine`]), an audio source ([`DaemonBuilder::source`]) and a
//! sink for the event stream ([`DaemonBuilder::sink`], e.g. a
//! [`MemorySink`](crate::sinks::event::MemorySink)).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::{open_frames, open_source_parts, stdout_sink, DaemonError, DaemonReport};
use crate::common::feedback::Feedback;
use crate::common::lock::LockOrRecover;
use crate::config::{Config, SourceConfig};
use crate::daemon::room_watch::StoreWatch;
use crate::daemon::service;
use crate::pipeline::{self, Engine, PipelineError, RunOptions};
use crate::sinks::event::{EventSink, GapEvent, PartialEvent, UtteranceEvent};
use crate::sinks::file::{EventsFile, SharedEventsFile};
use crate::sinks::output::{End, Lasting, State};
use crate::sinks::{Outputs, SinkSet, StreamOutputs};
use crate::sources::audio::{AudioError, AudioSource};
use crate::views::room::{Room, RoomConfig};

/// Where [`Daemon::builder`] starts.
pub struct Daemon;

impl Daemon {
    /// A daemon for a validated config: it runs until its source ends or it is stopped.
    /// No reloads (there is no file to re-read); a live stdin that ends is a clean end,
    /// as for `sarcasmd replay`.
    pub fn builder(cfg: Config) -> DaemonBuilder {
        DaemonBuilder {
            cfg,
            config_path: None,
            engine: None,
            source: SourceSlot::Config,
            sink: None,
            realtime: None,
            stop: Arc::new(AtomicBool::new(false)),
            reload: Arc::new(AtomicBool::new(false)),
            events_file: None,
            events_lost: Vec::new(),
            kept: Vec::new(),
            room: None,
            streams: 0,
        }
    }

    /// The service `sarcasmd run --config FILE` is: the file is loaded now and re-read,
    /// validated and preflighted on every reload; a live stdin capture that ends is an
    /// error ([`DaemonError::CaptureEnded`]) so a service manager restarts capture.
    pub fn from_file(path: &Path) -> Result<DaemonBuilder, DaemonError> {
        let mut b = Self::builder(Config::load(path)?);
        b.config_path = Some(path.to_path_buf());
        Ok(b)
    }
}

/// The audio of each run: the config's source, or one handed in.
enum SourceSlot {
    Config,
    /// Feeds the first run; a run after a reload opens the config's source.
    Once(Option<Box<dyn AudioSource>>),
    /// Called at the start of every run (the first and each after a reload).
    Each(Box<dyn FnMut() -> Result<Box<dyn AudioSource>, AudioError> + Send>),
}

/// What [`Daemon::builder`] returns; [`run`](Self::run) or [`start`](Self::start) it.
pub struct DaemonBuilder {
    cfg: Config,
    config_path: Option<PathBuf>,
    engine: Option<Arc<Engine>>,
    source: SourceSlot,
    sink: Option<SharedSink>,
    realtime: Option<bool>,
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    /// `output.events`, kept across reloads while the path stays the same: lines that
    /// wait for a missing directory at a reload go on waiting, and the lines lost over
    /// the whole run decide the exit status (see `crate::sinks::file`).
    events_file: Option<Arc<Mutex<EventsFile>>>,
    /// Why earlier events files (before a reload changed the path) lost lines.
    events_lost: Vec<std::io::Error>,
    /// What outputs of the last stream keep for the next (the MQTT connection, while
    /// `[mqtt]` stays the same, so that events it holds for a broker that is down or
    /// stalled at a reload are not dropped).
    kept: Vec<Box<dyn Lasting>>,
    /// The room head and its store, kept across reloads while `[room]` stays the same
    /// (the events a correction may name are forgotten at each new stream), with the
    /// watch that picks up what `sarcasmd feedback` writes (stopped when dropped).
    room: Option<(RoomConfig, Arc<Room>, Option<StoreWatch>)>,
    /// Streams run so far (for the per-stream summary in the log).
    streams: u64,
}

impl DaemonBuilder {
    /// Use this engine instead of loading one: tests load the models once per test
    /// binary. It is used as it is for every run, also after a reload: what it was
    /// loaded with (the models, and the heads with `[fusion]`'s threshold and prior)
    /// stays, while the rest of a reloaded config applies. Give it an engine loaded
    /// for the config it runs.
    pub fn engine(mut self, engine: Arc<Engine>) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Audio for the first run instead of the config's `[source]` (a run after a
    /// reload opens the config's source). Pacing still follows the config
    /// (`source.realtime` of a WAV source) unless [`realtime`](Self::realtime) says.
    pub fn source(mut self, source: Box<dyn AudioSource>) -> Self {
        self.source = SourceSlot::Once(Some(source));
        self
    }

    /// Audio for every run, made by `open` when each run starts (the first one and each
    /// after a reload).
    pub fn sources(
        mut self,
        open: impl FnMut() -> Result<Box<dyn AudioSource>, AudioError> + Send + 'static,
    ) -> Self {
        self.source = SourceSlot::Each(Box::new(open));
        self
    }

    /// Deliver the source's audio at real-time pace (like a microphone) or as fast as it
    /// is read, whatever the config says.
    pub fn realtime(mut self, realtime: bool) -> Self {
        self.realtime = Some(realtime);
        self
    }

    /// The event stream goes to `sink` instead of `output.events`; it is the primary
    /// output (a write error ends the run) and receives every partial, whatever
    /// `output.partials` says. Captions, HTTP and MQTT still follow the config.
    pub fn sink(mut self, sink: impl EventSink + Send + 'static) -> Self {
        self.sink = Some(SharedSink(Arc::new(Mutex::new(Box::new(sink)))));
        self
    }

    /// Stop when `flag` is set (a signal handler's flag); the handle's
    /// [`stop`](DaemonHandle::stop) sets the same flag.
    pub fn stop_on(mut self, flag: Arc<AtomicBool>) -> Self {
        self.stop = flag;
        self
    }

    /// Reload the config file when `flag` is set (SIGHUP's flag); only for
    /// [`Daemon::from_file`].
    pub fn reload_on(mut self, flag: Arc<AtomicBool>) -> Self {
        self.reload = flag;
        self
    }

    /// Run on this thread until the source ends or the stop flag is set.
    pub fn run(self) -> Result<DaemonReport, DaemonError> {
        let shared = Arc::new(Shared::default());
        self.run_with(&shared)
    }

    /// Run on a thread of its own and hand back the handle. Returns at once: wait for
    /// [`DaemonHandle::wait_ready`] before talking to it.
    pub fn start(self) -> std::io::Result<DaemonHandle> {
        let shared = Arc::new(Shared::default());
        let (stop, reload) = (self.stop.clone(), self.reload.clone());
        let can_reload = self.config_path.is_some();
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("daemon".into())
                .spawn(move || {
                    let r = self.run_with(&shared);
                    let how = match &r {
                        Ok(_) => "it finished".to_string(),
                        Err(e) => format!("it failed: {e}"),
                    };
                    shared.update(|p| p.ended = Some(how));
                    r
                })?
        };
        Ok(DaemonHandle {
            shared,
            stop,
            reload,
            can_reload,
            thread: Some(thread),
        })
    }

    fn run_with(mut self, shared: &Arc<Shared>) -> Result<DaemonReport, DaemonError> {
        let r = match self.config_path.take() {
            Some(path) => self.serve(&path, shared),
            None => {
                let (stop, cfg) = (self.stop.clone(), self.cfg.clone());
                let started = AtomicBool::new(false);
                self.run_once(&cfg, stop.clone(), &started, None, shared)
            }
        };
        let grace = self.grace();
        for k in std::mem::take(&mut self.kept) {
            k.stop(grace);
        }
        let closed = self.close_events();
        match (r, closed) {
            (Ok(report), Ok(())) => Ok(report),
            (Ok(_), Err(e)) => Err(e),
            (Err(e), closed) => {
                if let Err(lost) = closed {
                    log::error!("{lost}");
                }
                Err(e)
            }
        }
    }

    /// How long outputs may take to deliver what they hold at the end of a stream: short
    /// when a signal asked the process to stop (systemd expects it gone within 2 s of
    /// SIGTERM).
    fn grace(&self) -> Duration {
        if self.stop.load(Ordering::Relaxed) {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(2)
        }
    }

    /// The primary sink of a stream on `cfg`: stdout, or the events file the daemon
    /// keeps (the one of the previous stream when the path is the same).
    fn events_sink(
        &mut self,
        cfg: &Config,
        counters: Arc<pipeline::Counters>,
    ) -> Box<dyn EventSink> {
        if cfg.output.events == "-" {
            return stdout_sink(cfg);
        }
        let path = Path::new(&cfg.output.events);
        let same = self
            .events_file
            .as_ref()
            .is_some_and(|f| f.lock_or_recover().path() == path);
        if same {
            let f = self.events_file.clone().expect("checked above");
            f.lock_or_recover().attach(cfg.output.partials, counters);
            return Box::new(SharedEventsFile(f));
        }
        if let Some(old) = self.events_file.take() {
            if let Err(e) = old.lock_or_recover().close() {
                log::error!("{e}");
                self.events_lost.push(e);
            }
        }
        let f = Arc::new(Mutex::new(EventsFile::open(
            path,
            cfg.output.partials,
            counters,
        )));
        self.events_file = Some(f.clone());
        Box::new(SharedEventsFile(f))
    }

    /// The end of the run: the events file writes what waits and says whether every
    /// line reached it, over every stream it served.
    fn close_events(&mut self) -> Result<(), DaemonError> {
        if let Some(f) = self.events_file.take() {
            if let Err(e) = f.lock_or_recover().close() {
                self.events_lost.push(e);
            }
        }
        match self.events_lost.drain(..).next() {
            Some(e) => Err(DaemonError::Pipeline(PipelineError::Sink(e))),
            None => Ok(()),
        }
    }

    /// The service loop: run the config, and on a reload re-read the file, validate it
    /// and [`preflight`](crate::daemon::preflight) it *before* touching the running stream. An
    /// invalid file, or one naming files, secrets or models this machine does not have,
    /// is rejected (logged with its file:line:column or field) and the stream keeps
    /// running on the old config; a good one ends the current stream gracefully (the
    /// utterance in progress is finished and flushed) and starts again with the new
    /// config. If the new config still fails to start, the previous one is started
    /// again. Every outcome is logged, shown in the service status, counted
    /// (`sarcasmd_reloads_total{result}`) and handed to [`DaemonHandle::reload`].
    fn serve(
        &mut self,
        config_path: &Path,
        shared: &Arc<Shared>,
    ) -> Result<DaemonReport, DaemonError> {
        let stop = self.stop.clone();
        let reload = self.reload.clone();
        let mut cfg = self.cfg.clone();
        // The config that ran before a reload, until the reloaded one has started.
        let mut previous: Option<Config> = None;
        let mut note: Option<String> = None;
        loop {
            let run_stop = Arc::new(AtomicBool::new(false));
            let done = Arc::new(AtomicBool::new(false));
            let next: Arc<Mutex<Option<Config>>> = Default::default();
            let watcher = {
                let (run_stop, done, next) = (run_stop.clone(), done.clone(), next.clone());
                let (stop, reload, shared) = (stop.clone(), reload.clone(), shared.clone());
                let path = config_path.to_path_buf();
                std::thread::Builder::new()
                    .name("signals".into())
                    .spawn(move || {
                        while !done.load(Ordering::Relaxed) {
                            if stop.load(Ordering::Relaxed) {
                                service::stopping();
                                run_stop.store(true, Ordering::Relaxed);
                                return;
                            }
                            if reload.swap(false, Ordering::Relaxed) {
                                service::reloading();
                                match checked_config(&path) {
                                    Ok(new) => {
                                        log::info!(
                                            "reload: {} is valid; restarting the stream with it",
                                            path.display()
                                        );
                                        *next.lock_or_recover() = Some(new);
                                        run_stop.store(true, Ordering::Relaxed);
                                        return;
                                    }
                                    Err(e) => {
                                        crate::sinks::metrics::RELOADS
                                            .rejected
                                            .fetch_add(1, Ordering::Relaxed);
                                        log::error!(
                                            "reload rejected, still running the previous config: {e}"
                                        );
                                        service::ready(&format!("reload rejected: {e}"));
                                        shared
                                            .reloaded(ReloadOutcome::Rejected(e.to_string()));
                                    }
                                }
                            }
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    })
                    .expect("spawn signal watcher")
            };
            let started = AtomicBool::new(false);
            let report = self.run_once(&cfg, run_stop, &started, note.take().as_deref(), shared);
            done.store(true, Ordering::Relaxed);
            let _ = watcher.join();
            let report = match report {
                Err(e) if !started.load(Ordering::Relaxed) && previous.is_some() => {
                    // The reloaded config passed every check and still did not start (a
                    // port in use, a model failing its checksum): back to the old one.
                    crate::sinks::metrics::RELOADS
                        .failed
                        .fetch_add(1, Ordering::Relaxed);
                    log::error!("reload failed, starting the previous config again: {e}");
                    shared.reloaded(ReloadOutcome::Failed(e.to_string()));
                    note = Some(format!("reload failed: {e}"));
                    cfg = previous.take().expect("checked above");
                    if stop.load(Ordering::Relaxed) {
                        return Err(e);
                    }
                    continue;
                }
                r => r?,
            };
            if previous.take().is_some() {
                crate::sinks::metrics::RELOADS
                    .applied
                    .fetch_add(1, Ordering::Relaxed);
            }
            let pending = next.lock_or_recover().take();
            match pending {
                Some(new) if !stop.load(Ordering::Relaxed) => {
                    previous = Some(std::mem::replace(&mut cfg, new));
                }
                _ if !stop.load(Ordering::Relaxed)
                    && matches!(cfg.source, SourceConfig::Stdin { live: true, .. }) =>
                {
                    return Err(DaemonError::CaptureEnded {
                        audio_s: report.stats.audio_s,
                        events: report.stats.count("events"),
                    })
                }
                _ => return Ok(report),
            }
        }
    }

    /// The room for `cfg` (`None` with `[room]` off), and whether it is the previous
    /// stream's (kept while `[room]` is the same).
    fn room_for(&mut self, cfg: &Config) -> Result<(Option<Arc<Room>>, bool), DaemonError> {
        if !cfg.room.enabled {
            let kept = self.room.take().is_none();
            return Ok((None, kept));
        }
        match &self.room {
            Some((c, r, _)) if *c == cfg.room => Ok((Some(r.clone()), true)),
            _ => {
                let r = Arc::new(Room::open(&cfg.room, cfg.output.include_transcript, None)?);
                // Without the watch corrections still work; only the CLI's wait for a
                // reload or a correction.
                let watch = StoreWatch::start(r.clone())
                    .map_err(|e| {
                        log::warn!("room: cannot watch the store for the CLI's corrections: {e}")
                    })
                    .ok();
                self.room = Some((cfg.room.clone(), r.clone(), watch));
                Ok((Some(r), false))
            }
        }
    }

    /// The build step of one stream on `cfg`, after the config was parsed and validated:
    /// check it against this machine (preflight), open the source, start the outputs,
    /// load the models (once, unless an engine was given) and assemble the sinks.
    fn build(&mut self, cfg: &Config) -> Result<Built, DaemonError> {
        crate::daemon::preflight::check_start(cfg)?;
        for w in cfg.board_warnings() {
            log::warn!("{w}");
        }
        let (source, mic_counters) = match &mut self.source {
            SourceSlot::Once(s @ Some(_)) => (s.take().expect("matched Some"), None),
            SourceSlot::Each(open) => (open()?, None),
            SourceSlot::Config | SourceSlot::Once(None) => {
                let opened = open_source_parts(cfg)?;
                (opened.source, opened.mic_counters)
            }
        };
        log::info!("source: {}", source.describe());
        let (room, same_room) = self.room_for(cfg)?;
        let counters = Arc::new(pipeline::Counters::default());
        let feedback = room.clone().map(|r| r as Arc<dyn Feedback>);
        let sections = cfg.outputs.kinds();
        let mut outputs = Outputs::start(
            StreamOutputs {
                sections: &sections,
                output: &cfg.output,
                asr_model: &cfg.asr.model,
                counters: &counters,
                feedback: feedback.as_ref(),
                same_feedback: same_room,
            },
            std::mem::take(&mut self.kept),
        )?;
        if let Some(m) = mic_counters {
            counters.drops.attach(m);
        }
        outputs.state(State::Loading);
        let engine = match &self.engine {
            Some(e) => e.clone(),
            None => Arc::new(Engine::load(cfg)?),
        };
        log::info!(
            "models loaded in {:.0} ms: {:?}",
            engine.load_ms,
            engine.models
        );
        outputs
            .reports()
            .set_model_load_seconds(engine.load_ms / 1000.0);
        if let Some(r) = &room {
            // Corrections made with another text encoder cannot be compared with this one's.
            r.set_text_encoder(engine.models.get("text_encoder").cloned());
            r.new_stream();
        }
        let primary: Box<dyn EventSink> = match &self.sink {
            Some(s) => Box::new(s.clone()),
            None => self.events_sink(cfg, counters.clone()),
        };
        Ok(Built {
            source,
            outputs,
            counters,
            room,
            engine,
            primary,
        })
    }

    /// One stream on `cfg` until its source ends or `stop` is set. The builder's own
    /// stop flag says whether that is the process being asked to exit (short shutdown
    /// budget) rather than a reload. `started` is set once the stream runs; `note` is
    /// added to the service status then (e.g. a failed reload).
    fn run_once(
        &mut self,
        cfg: &Config,
        stop: Arc<AtomicBool>,
        started: &AtomicBool,
        note: Option<&str>,
        shared: &Shared,
    ) -> Result<DaemonReport, DaemonError> {
        let Built {
            source,
            mut outputs,
            counters,
            room,
            engine,
            primary,
        } = self.build(cfg)?;
        let engine: &Engine = &engine;
        let http_addr = outputs.listening();
        let realtime = self.realtime.unwrap_or(matches!(
            cfg.source,
            SourceConfig::Wav { realtime: true, .. }
        ));
        let opts = RunOptions {
            realtime,
            // The room head compares text embeddings and stores prosody.
            with_features: room.is_some(),
            room,
            stop,
            counters: counters.clone(),
            ..Default::default()
        };
        outputs.state(State::Running);
        started.store(true, Ordering::Relaxed);
        let running = format!(
            "running: {} ({} ms to load models){}",
            cfg.asr.model,
            engine.load_ms.round(),
            note.map(|n| format!("; {n}")).unwrap_or_default()
        );
        service::ready(&running);
        // A note is only set when the previous config starts again after a failed reload.
        shared.started(http_addr, engine.load_ms, note.is_some());
        let watchdog = service::Watchdog::start(counters.clone());
        let status_watch = service::StatusWatch::start(counters.clone(), running);
        let cpu0 = crate::common::resources::cpu_seconds();
        let frames_stop = Arc::new(AtomicBool::new(false));
        let frames = open_frames(cfg, &counters, frames_stop.clone());
        let opts = RunOptions {
            frame_source_stop: Some(frames_stop),
            ..opts
        };
        let mut sink = SinkSet::new(primary, &mut outputs);
        let result = pipeline::run_stream_av(engine, cfg, source, frames, &mut sink, &opts);
        // A reload starts a new stream in this process: give the old one's memory back.
        crate::common::resources::release_freed_memory();
        drop(watchdog);
        drop(status_watch);
        let stream_cpu_s = crate::common::resources::cpu_seconds() - cpu0;
        drop(sink);
        let stats = result
            .as_ref()
            .ok()
            .map(|st| serde_json::to_value(st).unwrap_or_default());
        self.kept = outputs.finish(&End {
            stats: stats.as_ref(),
            grace: self.grace(),
        });
        self.streams += 1;
        if let Ok(st) = &result {
            // One line per stream: what a reload ended is otherwise in no summary.
            let dropped: Vec<String> = st
                .dropped
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            log::info!(
                "stream {} ended: {} utterances, {} events, dropped: {}",
                self.streams,
                st.count("utterances"),
                st.count("events"),
                if dropped.is_empty() {
                    "none".to_string()
                } else {
                    dropped.join(", ")
                }
            );
        }
        Ok(DaemonReport {
            stats: result?,
            stream_cpu_s,
            model_load_ms: engine.load_ms,
            http_addr,
        })
    }
}

/// One stream, built and not yet running.
struct Built {
    source: Box<dyn AudioSource>,
    outputs: Outputs,
    counters: Arc<pipeline::Counters>,
    room: Option<Arc<Room>>,
    engine: Arc<Engine>,
    /// The event stream (`output.events`, or the caller's sink).
    primary: Box<dyn EventSink>,
}

/// A config file parsed, validated and preflighted (what a reload must pass).
fn checked_config(path: &Path) -> Result<Config, DaemonError> {
    let cfg = Config::load(path)?;
    crate::daemon::preflight::check(&cfg)?;
    Ok(cfg)
}

/// The caller's sink, shared so that every run (the first and each after a reload)
/// writes to the same one.
#[derive(Clone)]
struct SharedSink(Arc<Mutex<Box<dyn EventSink + Send>>>);

impl EventSink for SharedSink {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.0.lock_or_recover().write(ev)
    }
    fn gap(&mut self, g: &GapEvent) -> std::io::Result<()> {
        self.0.lock_or_recover().gap(g)
    }
    fn partial(&mut self, p: &PartialEvent) -> std::io::Result<()> {
        self.0.lock_or_recover().partial(p)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock_or_recover().flush()
    }
}

/// The stream is running: what [`DaemonHandle::wait_ready`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Ready {
    /// Where the HTTP listener is bound (the real port when `http.bind` asked for 0).
    pub http_addr: Option<SocketAddr>,
    /// Milliseconds the models took to load (an injected engine's own load time).
    pub model_load_ms: f64,
    /// Streams started so far: 1 for the first, one more after each reload (applied,
    /// or failed and the previous config started again).
    pub runs: u64,
}

/// How a reload ended, as [`DaemonHandle::reload`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum ReloadOutcome {
    /// The new config passed every check and its stream runs.
    Applied(Ready),
    /// The file is invalid or names what this machine lacks; the old stream runs on.
    Rejected(String),
    /// The new config passed its checks but did not start (e.g. its port is taken); the
    /// previous config was started again.
    Failed(String),
}

#[derive(Default)]
struct Progress {
    /// The latest stream's readiness, None before the first one runs.
    ready: Option<Ready>,
    reloads: Vec<ReloadOutcome>,
    /// Set once `run` has returned, with how it ended.
    ended: Option<String>,
}

/// What the daemon thread reports to its handle: a state under a mutex and a condition
/// variable that is notified on every change.
#[derive(Default)]
struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut Progress)) {
        f(&mut self.progress.lock_or_recover());
        self.changed.notify_all();
    }

    /// A stream runs; `previous_again` when it is the previous config started again
    /// after a failed reload (that reload's outcome is already reported).
    fn started(&self, http_addr: Option<SocketAddr>, model_load_ms: f64, previous_again: bool) {
        self.update(|p| {
            let runs = p.ready.as_ref().map_or(0, |r| r.runs) + 1;
            let ready = Ready {
                http_addr,
                model_load_ms,
                runs,
            };
            // Any stream after the first is a reloaded config that started, unless it is
            // the previous one started again.
            if runs > 1 && !previous_again {
                p.reloads.push(ReloadOutcome::Applied(ready.clone()));
            }
            p.ready = Some(ready);
        });
    }

    fn reloaded(&self, outcome: ReloadOutcome) {
        self.update(|p| p.reloads.push(outcome));
    }

    /// Wait up to `timeout` for `f` to find what it wants in the progress.
    fn wait<T>(&self, timeout: Duration, mut f: impl FnMut(&Progress) -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut p = self.progress.lock_or_recover();
        loop {
            if let Some(t) = f(&p) {
                return Some(t);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            p = match self.changed.wait_timeout(p, left) {
                Ok((g, _)) => g,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// Errors of holding a daemon: it did not get where it was asked to in time, or it ended
/// (with the daemon's own error when that is how it ended).
#[derive(Debug, Error)]
pub enum HandleError {
    #[error("the daemon was not {what} within {timeout:?}")]
    Timeout {
        what: &'static str,
        timeout: Duration,
    },
    #[error("the daemon ended before it was {what}: {how}")]
    Ended { what: &'static str, how: String },
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    #[error("the daemon thread panicked")]
    Panicked,
    #[error("a reload re-reads the config file: build the daemon with Daemon::from_file")]
    NoConfigFile,
}

/// A daemon running on its own thread ([`DaemonBuilder::start`]). Dropping it asks the
/// daemon to stop and does not wait; [`stop`](Self::stop) waits and says how it ended.
pub struct DaemonHandle {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    can_reload: bool,
    thread: Option<std::thread::JoinHandle<Result<DaemonReport, DaemonError>>>,
}

impl DaemonHandle {
    /// Wait until the stream runs: models loaded, HTTP listener bound, source open.
    /// After a reload this is the newest stream's readiness.
    pub fn wait_ready(&self, timeout: Duration) -> Result<Ready, HandleError> {
        let what = "ready";
        let r = self.shared.wait(timeout, |p| match (&p.ready, &p.ended) {
            (Some(r), _) => Some(Ok(r.clone())),
            (None, Some(how)) => Some(Err(HandleError::Ended {
                what,
                how: how.clone(),
            })),
            (None, None) => None,
        });
        r.unwrap_or(Err(HandleError::Timeout { what, timeout }))
    }

    /// Whether the daemon has ended (its source ended, it was stopped, or it failed).
    pub fn has_ended(&self) -> bool {
        self.shared.progress.lock_or_recover().ended.is_some()
    }

    /// Ask for a reload (as SIGHUP does) and wait up to `timeout` for its outcome: an
    /// applied reload is reported once the new stream runs.
    pub fn reload(&self, timeout: Duration) -> Result<ReloadOutcome, HandleError> {
        if !self.can_reload {
            return Err(HandleError::NoConfigFile);
        }
        let seen = self.shared.progress.lock_or_recover().reloads.len();
        self.reload.store(true, Ordering::Relaxed);
        let what = "reloaded";
        let r = self.shared.wait(timeout, |p| {
            if let Some(o) = p.reloads.get(seen) {
                return Some(Ok(o.clone()));
            }
            p.ended.as_ref().map(|how| {
                Err(HandleError::Ended {
                    what,
                    how: how.clone(),
                })
            })
        });
        r.unwrap_or(Err(HandleError::Timeout { what, timeout }))
    }

    /// Ask the daemon to stop (as SIGTERM does) and wait up to `timeout` for the end of
    /// the run: its report, or the error it ended with.
    pub fn stop(self, timeout: Duration) -> Result<DaemonReport, HandleError> {
        self.stop.store(true, Ordering::Relaxed);
        self.join(timeout)
    }

    /// Wait up to `timeout` for the run to end by itself (its source ended).
    pub fn join(mut self, timeout: Duration) -> Result<DaemonReport, HandleError> {
        let what = "finished";
        self.shared
            .wait(timeout, |p| p.ended.as_ref().map(|_| ()))
            .ok_or(HandleError::Timeout { what, timeout })?;
        let thread = self.thread.take().expect("joined once");
        Ok(thread.join().map_err(|_| HandleError::Panicked)??)
    }
}

impl Drop for DaemonHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST_OR_NEW: bool = false;
    const PREVIOUS_AGAIN: bool = true;

    fn ready(shared: &Shared) -> Option<Ready> {
        shared.wait(Duration::ZERO, |p| p.ready.clone())
    }

    #[test]
    fn a_wait_ends_at_its_timeout_or_when_another_thread_reports() {
        let shared = Arc::new(Shared::default());
        let t0 = Instant::now();
        assert_eq!(
            shared.wait(Duration::from_millis(30), |p| p.ready.clone()),
            None
        );
        assert!(t0.elapsed() >= Duration::from_millis(30));
        let reporter = {
            let shared = shared.clone();
            std::thread::spawn(move || shared.started(None, 5.0, FIRST_OR_NEW))
        };
        let r = shared.wait(Duration::from_secs(30), |p| p.ready.clone());
        reporter.join().unwrap();
        assert_eq!(r.map(|r| r.runs), Some(1));
    }

    #[test]
    fn a_reload_is_applied_when_its_stream_starts_not_when_the_previous_restarts() {
        let shared = Shared::default();
        shared.started(None, 5.0, FIRST_OR_NEW);
        assert!(shared.progress.lock_or_recover().reloads.is_empty());
        // A failed reload: its outcome, then the previous config starts again.
        shared.reloaded(ReloadOutcome::Failed("port taken".into()));
        shared.started(None, 5.0, PREVIOUS_AGAIN);
        // A good reload: its stream starts.
        shared.started(None, 5.0, FIRST_OR_NEW);
        let reloads = shared.progress.lock_or_recover().reloads.clone();
        assert_eq!(reloads.len(), 2, "{reloads:?}");
        assert_eq!(reloads[0], ReloadOutcome::Failed("port taken".into()));
        assert!(matches!(&reloads[1], ReloadOutcome::Applied(r) if r.runs == 3));
        assert_eq!(ready(&shared).map(|r| r.runs), Some(3));
    }
}
