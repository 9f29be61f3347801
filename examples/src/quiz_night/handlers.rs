//! The quiz's handlers: small, canned answers; the limits are the point.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Response};
use ratekeeper_axum::RejectionResponse;
use ratekeeper_core::store::Dedupe;
use ratekeeper_core::{Chain, FailurePolicy, Principal, PrincipalKind};
use serde::Deserialize;
use serde_json::json;

use super::{QuizState, pages};

const DAY: Duration = Duration::from_secs(86_400);

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

pub(super) async fn home() -> Html<&'static str> {
    Html(pages::HOME)
}

/// The friendly page, saying the wait the layer put in its query (`?wait=45`): in seconds
/// up to an hour, past that as the date and time it ends (a calendar quota's wait runs to
/// its period's end, days away); a wait that is not a number of seconds up to 400 days
/// (anyone can type the URL) says "a few seconds".
pub(super) async fn limited_page(uri: axum::http::Uri) -> Html<String> {
    use ratekeeper_core::calendar::Timestamp;
    let wait = uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|p| p.strip_prefix("wait="))
        .and_then(|w| w.parse::<i64>().ok())
        .filter(|&w| (1..=400 * 86_400).contains(&w));
    let until = wait
        .filter(|&w| w > 3_600)
        .and_then(|w| Timestamp::from_second(Timestamp::now().as_second() + w).ok());
    let wait = match (wait, until) {
        (_, Some(at)) => format!("until {} UTC", at.strftime("%Y-%m-%d %H:%M")),
        (Some(1), _) => "1 second".to_owned(),
        (Some(secs), _) => format!("{secs} seconds"),
        (None, _) => "a few seconds".to_owned(),
    };
    Html(pages::TOO_MANY_REQUESTS.replace("{wait}", &wait))
}

pub(super) async fn play() -> Html<&'static str> {
    Html(pages::PLAY)
}

pub(super) async fn robots() -> &'static str {
    pages::ROBOTS
}

pub(super) async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "ok": true }))
}

pub(super) async fn poll(Path(game): Path<String>) -> Json<serde_json::Value> {
    Json(json!({ "game": game, "question": null, "open": true }))
}

pub(super) async fn answer(Path(game): Path<String>) -> Json<serde_json::Value> {
    Json(json!({ "game": game, "accepted": true }))
}

pub(super) async fn next_question(Path(game): Path<String>) -> Json<serde_json::Value> {
    Json(json!({ "game": game, "advanced": true }))
}

#[derive(Deserialize)]
struct SignInForm {
    email: String,
    password: String,
}

/// Client IP, then account, as ONE chain inside the handler (the account is in the body).
/// Every attempt counts per IP, right or wrong; per account only failed ones do: the unit
/// is reserved before the password is checked and given back when it was right. An
/// account's 6th failure in 15 minutes and later ones are held (1 s, doubling to 8 s, one
/// at a time in one line, where a full line of 5 turns away only an address already in
/// it: the owner is made to wait, never refused), then answered as usual. An attempt the IP limit refuses
/// stops there and charges nothing to the account, so an exhausted IP cannot slow anyone
/// down. Fails closed.
pub(super) async fn sign_in(State(s): State<QuizState>, parts: Parts, body: Bytes) -> Response {
    let Ok(creds) = serde_json::from_slice::<SignInForm>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "expected JSON {\"email\", \"password\"}",
        );
    };
    let ip = match s.client.resolve(&parts) {
        Ok(ip) => ip,
        Err(r) => return RejectionResponse(r).into_response(),
    };
    let account = creds.email.trim().to_lowercase();
    let chain = Chain::count_attempts()
        .check(&s.limits.sign_in_ip, Principal::ip(ip))
        .check(
            &s.limits.sign_in_account,
            Principal::personal(PrincipalKind::User, &account),
        );
    let reserved = match s
        .limiter
        .reserve(&chain, FailurePolicy::Closed, &parts.headers)
        .await
    {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    if account == "demo@example.com" && creds.password == "quiz" {
        // The right password: the account's unit goes back; the IP's stays.
        let admitted = reserved.give_back_only(|i, _| i == 1).await;
        (admitted, Json(json!({ "ok": true, "user": "demo" }))).into_response()
    } else {
        (
            reserved.keep(),
            error(StatusCode::UNAUTHORIZED, "invalid credentials"),
        )
            .into_response()
    }
}

#[derive(Deserialize)]
struct Ask {
    question: String,
}

pub(super) async fn ask(body: Bytes) -> Response {
    match serde_json::from_slice::<Ask>(&body) {
        Ok(a) if !a.question.trim().is_empty() => Json(json!({
            "answer": "The answer is on the host's screen: no model was called for this demo."
        }))
        .into_response(),
        _ => error(StatusCode::BAD_REQUEST, "expected JSON {\"question\"}"),
    }
}

/// A delivery is processed once in 24 h across every instance sharing the store. A
/// delivery that fails processing is released, so the sender's retry is processed.
pub(super) async fn payment_webhook(
    State(s): State<QuizState>,
    parts: Parts,
    body: Bytes,
) -> Response {
    let id = match parts.headers.get("x-delivery-id").map(|v| v.to_str()) {
        Some(Ok(id))
            if !id.is_empty()
                && id.len() <= 128
                && id.bytes().all(|b| (0x21..=0x7e).contains(&b)) =>
        {
            id.to_owned()
        }
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "the x-delivery-id header is required",
            );
        }
    };
    let first =
        tokio::time::timeout(Duration::from_millis(500), s.store.first_seen(&id, DAY)).await;
    match first {
        Ok(Ok(false)) => return Json(json!({ "duplicate": true })).into_response(),
        Ok(Ok(true)) => {}
        // The store cannot say: process it. A dropped payment event is worse than a
        // duplicate, and processing is idempotent downstream.
        _ => {
            tracing::warn!(name: "quiz.dedupe_unavailable", "processing a delivery without de-duplication")
        }
    }
    if serde_json::from_slice::<serde_json::Value>(&body).is_err() {
        let _ = s.store.release(&id).await;
        return error(StatusCode::BAD_REQUEST, "the payment event is not JSON");
    }
    Json(json!({ "processed": true })).into_response()
}
