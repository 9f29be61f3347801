//! A client of quiz-night through the client pacing layer reads our own answers: after a
//! host spent its burst of "next question" (a token bucket of 10, +2 a second), the paced
//! client is refused at most once in a row — it waits out our `Retry-After`, then keeps to
//! the pace our `RateLimit-Policy` states.

use std::time::Duration;

use ratekeeper_core::pace::{Aimd, SharedPacer};
use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_examples::quiz_night::{QuizConfig, app_with_store};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::client::{Head, PaceLayer};
use tower::{Service, ServiceBuilder, ServiceExt};

#[tokio::test]
async fn a_paced_client_of_quiz_night_is_never_refused_twice_in_a_row() {
    let app = app_with_store(&QuizConfig::default(), AnyStore::Memory(MemoryStore::new())).unwrap();
    let quiz = Server::start(app).await.unwrap();
    let url = quiz.url("/host/games/g1/next");
    // The burst spent by an unpaced client.
    for _ in 0..10 {
        let r = client()
            .post(&url)
            .bearer_auth("host-1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let pacer = SharedPacer::new(
        AnyStore::Memory(MemoryStore::new()),
        "quiz-host",
        Aimd {
            initial: 50.0,
            ..Aimd::default()
        },
    )
    .unwrap();
    let by_token = |h: &Head<'_>| {
        h.headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let mut paced = ServiceBuilder::new()
        .layer(
            PaceLayer::new(pacer)
                .scope(by_token)
                // The host's wait (half a second) plus the room's jitter (up to 5 s): a
                // refusal may say `Retry-After: 6`, and a paced client honours it.
                .max_wait(Duration::from_secs(10)),
        )
        .service(ratekeeper_tests::reqwest_service());
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let req = http::Request::post(&url)
            .header("authorization", "Bearer host-1")
            .body(String::new())
            .unwrap();
        let answer = paced.ready().await.unwrap().call(req).await.unwrap();
        statuses.push(answer.status().as_u16());
    }
    println!("paced after the burst: {statuses:?}");
    assert!(
        !statuses.windows(2).any(|w| w == [429, 429]),
        "refused twice in a row: {statuses:?}"
    );
    assert!(
        statuses.iter().filter(|&&s| s == 200).count() >= 5,
        "{statuses:?}"
    );
}
