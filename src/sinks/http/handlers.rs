//! The routes' handlers: overlay page, metrics, caption files (streamed, bounded), live
//! events over Server-Sent Events.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use futures_util::stream::Stream;
use tokio::io::AsyncReadExt;
use tokio::sync::{broadcast, watch};

use super::app_state::AppState;
use super::hub::{ClientGuard, Hub, Msg, PoolSlot};
use crate::common::drops::DropReason;
use crate::common::lock::LockOrRecover;
use crate::sinks::metrics;

const OVERLAY_HTML: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/overlay.html"));

pub(super) async fn overlay() -> Html<&'static str> {
    Html(OVERLAY_HTML)
}

pub(super) async fn metrics_text(State(st): State<AppState>) -> Response {
    match &st.metrics {
        Some(m) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], m.encode()).into_response(),
        None => (StatusCode::NOT_FOUND, "metrics are off (http.metrics)\n").into_response(),
    }
}

/// `503` beyond a cap on responses that stay open; the client may retry later.
fn too_many(what: &'static str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "5")],
        format!("too many {what} at once; retry later\n"),
    )
        .into_response()
}

/// Streams a caption file in chunks, at most `limit_bytes` of it; when the client goes
/// away the body is dropped and reading stops. A download holds one of
/// [`MAX_CAPTION_DOWNLOADS`] slots until it ends: slow readers cannot keep more
/// connection slots than that.
pub(super) async fn caption_file(
    hub: &Arc<Hub>,
    path: Option<&PathBuf>,
    content_type: &'static str,
    limit_bytes: u64,
) -> Response {
    let Some(path) = path else {
        return (
            StatusCode::NOT_FOUND,
            "no caption file configured ([captions])\n",
        )
            .into_response();
    };
    let unavailable = |why: String| {
        log::warn!("http: cannot serve {}: {why}", path.display());
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "caption file not readable\n",
        )
            .into_response()
    };
    let Some(stream) = hub.downloads.take() else {
        return too_many("caption downloads");
    };
    let file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) => return unavailable(e.to_string()),
    };
    let len = match file.metadata().await {
        Ok(m) if m.is_file() => m.len().min(limit_bytes),
        Ok(_) => return unavailable("not a regular file".into()),
        Err(e) => return unavailable(e.to_string()),
    };
    const CHUNK_BYTES: usize = 64 * 1024;
    let chunks = futures_util::stream::unfold(Some((file.take(len), stream)), |state| async move {
        let (mut reader, stream) = state?;
        let mut buf = vec![0u8; CHUNK_BYTES];
        match reader.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some((reader, stream))))
            }
            // The error ends the body; the next poll ends the stream.
            Err(e) => Some((Err(e), None)),
        }
    });
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        [(header::CONTENT_LENGTH, len.to_string())],
        Body::from_stream(chunks),
    )
        .into_response()
}

pub(super) async fn captions_vtt(State(st): State<AppState>) -> Response {
    caption_file(
        &st.hub,
        st.vtt.as_deref(),
        "text/vtt; charset=utf-8",
        st.caption_limit_bytes,
    )
    .await
}

pub(super) async fn captions_srt(State(st): State<AppState>) -> Response {
    caption_file(
        &st.hub,
        st.srt.as_deref(),
        "application/x-subrip; charset=utf-8",
        st.caption_limit_bytes,
    )
    .await
}

/// Live events for one client, while it holds one of `http.max_sse_clients` (beyond it
/// a `503`: 64 held `/events` connections once took every slot from `/healthz`).
pub(super) async fn events(State(st): State<AppState>) -> Response {
    match st.hub.sse.take() {
        Some(slot) => events_stream(st, slot).into_response(),
        None => too_many("SSE clients"),
    }
}

fn events_stream(
    st: AppState,
    stream: PoolSlot,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    let hub = st.hub.clone();
    hub.clients.fetch_add(1, Ordering::Relaxed);
    let guard = ClientGuard(hub.clone());
    // Subscribe before taking the snapshot so nothing falls between the two; the
    // overlay de-duplicates by id.
    let rx = hub.tx.subscribe();
    let mut first: VecDeque<Event> = VecDeque::new();
    first.push_back(
        Event::default()
            .event("hello")
            .data(&hub.hello)
            .retry(Duration::from_millis(1000)),
    );
    if let Some(s) = hub.status.lock_or_recover().as_ref() {
        first.push_back(s.to_event());
    }
    for m in hub.recent.lock_or_recover().iter() {
        first.push_back(m.to_event());
    }
    struct S {
        first: VecDeque<Event>,
        rx: broadcast::Receiver<Arc<Msg>>,
        shutdown: watch::Receiver<bool>,
        _guard: ClientGuard,
        _stream: PoolSlot,
    }
    let s = S {
        first,
        rx,
        shutdown: st.shutdown.clone(),
        _guard: guard,
        _stream: stream,
    };
    let stream = futures_util::stream::unfold(s, |mut s| async move {
        if let Some(e) = s.first.pop_front() {
            return Some((Ok(e), s));
        }
        loop {
            // Deliver what is already queued before honouring shutdown, so the last
            // `finished` status reaches the page.
            let next = tokio::select! {
                biased;
                r = s.rx.recv() => Some(r),
                _ = s.shutdown.wait_for(|v| *v) => None,
            };
            match next {
                Some(Ok(m)) => return Some((Ok(m.to_event()), s)),
                Some(Err(broadcast::error::RecvError::Lagged(n))) => {
                    s._guard.0.drops.add(DropReason::SseClientLagged, n);
                }
                Some(Err(broadcast::error::RecvError::Closed)) | None => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(
        KeepAlive::new()
            .interval(Duration::from_secs(15))
            .text("keepalive"),
    )
}
