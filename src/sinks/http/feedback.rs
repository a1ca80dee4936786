//! `POST /events/{id}/feedback`: a person says an event was, or was not, sarcastic;
//! `GET /feedback` lists the corrections held and `DELETE /feedback/{n}` takes one back
//! (a mute the room did not mean). Accepted only on a listener with a token (the route is behind the token check, and a
//! token-less listener refuses it: anyone on the network could otherwise teach the
//! room head). Answers are JSON: 201 recorded, 200 unchanged (the same label again),
//! 400 bad input, 403 no token configured, 404 an event the daemon no longer holds,
//! 409 a state that refuses it, 500 the store could not be written.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::app_state::AppState;
use crate::common::feedback::{Feedback, Label, Refusal};

/// Larger bodies are refused before parsing (the whole body is `{"label": "..."}`).
const MAX_BODY_BYTES: usize = 1024;

#[derive(Deserialize)]
struct Body {
    label: String,
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body}\n"),
    )
        .into_response()
}

/// A refusal of the room itself, answered with its status and reason.
fn room_error(e: &Refusal) -> Response {
    answer(
        StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        e.answer(),
    )
}

/// Runs a store write off the runtime's thread (it is synced before the answer) and
/// answers with `ok` or the refusal.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Refusal> + Send + 'static,
    ok: impl FnOnce(T) -> Response,
) -> Response {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(v)) => ok(v),
        Ok(Err(e)) => room_error(&e),
        Err(e) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({ "reason": "internal", "error": format!("did not finish: {e}") }),
        ),
    }
}

fn refuse(st: &AppState, status: StatusCode, reason: &'static str, error: String) -> Response {
    if let Some(r) = &st.room {
        r.count_refused(reason);
    }
    answer(
        status,
        serde_json::json!({ "reason": reason, "error": error }),
    )
}

/// The room, or the answer that refuses: no token configured, or room learning off.
fn room_or_refusal(st: &AppState) -> Result<std::sync::Arc<dyn Feedback>, Box<Response>> {
    if st.token.is_none() {
        return Err(Box::new(refuse(
            st,
            StatusCode::FORBIDDEN,
            "no_token",
            "feedback needs a token: set http.token or http.token_file and send it as Authorization: Bearer".into(),
        )));
    }
    st.room.clone().ok_or_else(|| {
        Box::new(refuse(
            st,
            StatusCode::CONFLICT,
            "disabled",
            Refusal::disabled().to_string(),
        ))
    })
}

/// The path's number (`what` names it in the refusal).
fn number_or_refusal(st: &AppState, text: &str, what: &str) -> Result<u64, Box<Response>> {
    text.parse::<u64>().map_err(|_| {
        Box::new(refuse(
            st,
            StatusCode::BAD_REQUEST,
            "bad_id",
            format!("{what} {text:?} is not a number"),
        ))
    })
}

pub(super) async fn list(State(st): State<AppState>) -> Response {
    match room_or_refusal(&st) {
        Ok(room) => answer(
            StatusCode::OK,
            serde_json::to_value(room.list()).expect("serialises"),
        ),
        Err(r) => *r,
    }
}

pub(super) async fn forget(State(st): State<AppState>, Path(seq): Path<String>) -> Response {
    let room = match room_or_refusal(&st) {
        Ok(room) => room,
        Err(r) => return *r,
    };
    let seq = match number_or_refusal(&st, &seq, "correction") {
        Ok(n) => n,
        Err(r) => return *r,
    };
    off_runtime(
        move || room.forget(seq),
        |c| {
            let mut v = serde_json::to_value(&c).expect("serialises");
            v["status"] = "forgotten".into();
            answer(StatusCode::OK, v)
        },
    )
    .await
}

pub(super) async fn feedback(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let room = match room_or_refusal(&st) {
        Ok(room) => room,
        Err(r) => return *r,
    };
    let id = match number_or_refusal(&st, &id, "event id") {
        Ok(n) => n,
        Err(r) => return *r,
    };
    if body.len() > MAX_BODY_BYTES {
        return refuse(
            &st,
            StatusCode::BAD_REQUEST,
            "bad_body",
            format!("body over {MAX_BODY_BYTES} bytes"),
        );
    }
    let label = match serde_json::from_slice::<Body>(&body) {
        Ok(b) => b.label,
        Err(e) => {
            return refuse(
                &st,
                StatusCode::BAD_REQUEST,
                "bad_body",
                format!("expected {{\"label\": \"sarcastic\"|\"not_sarcastic\"}}: {e}"),
            )
        }
    };
    let label = match label.parse::<Label>() {
        Ok(l) => l,
        Err(e) => {
            room.count_refused(e.reason());
            return room_error(&e);
        }
    };
    off_runtime(
        move || room.correct(Some(id), label, "http"),
        |r| {
            answer(
                StatusCode::from_u16(r.status_code()).unwrap_or(StatusCode::OK),
                serde_json::to_value(&r).expect("serialises"),
            )
        },
    )
    .await
}
