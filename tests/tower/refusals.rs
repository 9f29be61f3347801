//! Every answer the layer makes itself, from one typed refusal through one responder: each
//! status (400, 401, 403, 429, 503, a held line's 429) as problem+json with the problem
//! responder, over TCP (as gRPC statuses for a real tonic client: the gRPC tests'
//! package).

use ratekeeper_tests::refusals::{CASES, app};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::{
    Answering, PROBLEM_TYPES, ProblemResponder, QUOTA_EXCEEDED, TEMPORARY_REDUCED_CAPACITY,
};

/// Each case's refusal over HTTP: `before` requests first, then the one refused.
async fn refused(server: &Server, (path, before): (&str, usize)) -> reqwest::Response {
    let send = || {
        let r = client().get(server.url(path));
        if path == "/missing" {
            r
        } else {
            r.header("x-key", "k")
        }
    };
    for _ in 0..before {
        send().send().await.unwrap();
    }
    send().send().await.unwrap()
}

#[tokio::test]
async fn every_refusal_is_problem_details_with_the_problem_responder() {
    let answering = Answering::new().with_responder(ProblemResponder);
    let server = Server::start(app(&answering)).await.unwrap();
    for (path, before, status, code) in CASES {
        let r = refused(&server, (path, before)).await;
        assert_eq!(r.status().as_u16(), status, "{path}");
        assert_eq!(
            r.headers()["content-type"],
            "application/problem+json",
            "{path}"
        );
        if status == 401 {
            assert_eq!(r.headers()["www-authenticate"], "Bearer", "{path}");
        }
        let waits = r.headers().get("retry-after").is_some();
        assert_eq!(waits, matches!(status, 429 | 503), "{path}");
        let body: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert_eq!(body["status"], status, "{path}: {body}");
        let ty = body["type"].as_str().unwrap();
        match status {
            429 => assert_eq!(ty, QUOTA_EXCEEDED, "{path}"),
            503 => assert_eq!(ty, TEMPORARY_REDUCED_CAPACITY, "{path}"),
            _ => assert!(ty.starts_with(PROBLEM_TYPES), "{path}: {ty}"),
        }
        assert!(
            body["title"].is_string() && body["detail"].is_string(),
            "{body}"
        );
        if code == "limit.exceeded" {
            // The draft's type says it; the policy is named.
            assert!(body.get("code").is_none(), "{body}");
            assert_eq!(body["violated-policies"][0], "one", "{body}");
        } else {
            assert_eq!(body["code"], code, "{path}: {body}");
        }
        assert_eq!(body.get("retry-after").is_some(), waits, "{path}: {body}");
    }
}

/// A responder of one's own sees every refusal, and hands the ones it does not answer to
/// a built-in responder.
#[tokio::test]
async fn a_responder_of_ones_own_sees_every_refusal_and_falls_back() {
    use ratekeeper_tower::{Refusal, RefusalKind, Responder};
    use std::sync::{Arc, Mutex};

    struct Mine(Arc<Mutex<Vec<(RefusalKind, &'static str)>>>);
    impl Responder for Mine {
        fn respond(&self, refusal: &Refusal) -> http::Response<bytes::Bytes> {
            self.0
                .lock()
                .unwrap()
                .push((refusal.kind(), refusal.code()));
            match refusal.kind() {
                RefusalKind::Limited => {
                    let mut r = http::Response::new(bytes::Bytes::from_static(b"slow down"));
                    *r.status_mut() = refusal.status();
                    r
                }
                _ => ProblemResponder.respond(refusal),
            }
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let answering = Answering::new().with_responder(Mine(Arc::clone(&seen)));
    let server = Server::start(app(&answering)).await.unwrap();
    for (path, before, status, _) in CASES {
        let r = refused(&server, (path, before)).await;
        assert_eq!(r.status().as_u16(), status, "{path}");
        let body = r.text().await.unwrap();
        if path == "/limited" {
            assert_eq!(body, "slow down");
        } else {
            assert!(body.starts_with("{\"type\":"), "{path}: {body}");
        }
    }
    let codes: Vec<&str> = seen.lock().unwrap().iter().map(|(_, c)| *c).collect();
    // The ban's route refuses once by its limit (the refusal that bans) before the ban.
    let want = [
        "principal.missing",
        "principal.missing",
        "access.denied",
        "limit.exceeded",
        "delay.line_full",
        "limit.exceeded",
        "ban.active",
        "store.unavailable",
    ];
    assert_eq!(
        codes, want,
        "every refusal, in order, seen by the responder"
    );
}
