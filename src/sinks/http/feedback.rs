//! `POST /events/{id}/feedback`: a person says an event was, or was not, sarcastic.
//! Accepted only on a listener with a token (the route is behind the token check, and a
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
use crate::views::room::{Label, RoomError};

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

fn refuse(st: &AppState, status: StatusCode, reason: &'static str, error: String) -> Response {
    if let Some(r) = &st.room {
        r.count_refused(reason);
    }
    answer(
        status,
        serde_json::json!({ "reason": reason, "error": error }),
    )
}

pub(super) async fn feedback(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if st.token.is_none() {
        return refuse(
            &st,
            StatusCode::FORBIDDEN,
            "no_token",
            "feedback needs a token: set http.token or http.token_file and send it as Authorization: Bearer".into(),
        );
    }
    let Some(room) = st.room.clone() else {
        return refuse(
            &st,
            StatusCode::CONFLICT,
            "disabled",
            RoomError::Disabled.to_string(),
        );
    };
    let Ok(id) = id.parse::<u64>() else {
        return refuse(
            &st,
            StatusCode::BAD_REQUEST,
            "bad_id",
            format!("event id {id:?} is not a number"),
        );
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
            return answer(
                StatusCode::BAD_REQUEST,
                serde_json::json!({ "reason": e.reason(), "error": e.to_string() }),
            );
        }
    };
    // The store is synced before the answer: off the runtime's thread.
    let done = tokio::task::spawn_blocking(move || room.correct(Some(id), label, "http")).await;
    match done {
        Ok(Ok(r)) => {
            let status = if r.status == "recorded" {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            answer(status, serde_json::to_value(&r).expect("serialises"))
        }
        Ok(Err(e)) => answer(
            StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            serde_json::json!({ "reason": e.reason(), "error": e.to_string() }),
        ),
        Err(e) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({ "reason": "internal", "error": format!("the correction did not finish: {e}") }),
        ),
    }
}
