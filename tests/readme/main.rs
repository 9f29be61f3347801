//! The README's Tower example, served as written: the router in `app.rs` is the README's
//! block to the letter (checked here), served over TCP with axum's connect info.

#[allow(dead_code, reason = "the README block's own main is not called here")]
mod readme {
    include!("app.rs");

    pub(crate) fn router() -> axum::Router {
        app().expect("the README's configuration is valid")
    }
}

mod doc_paths;

use ratekeeper_tests::{Server, client};
use reqwest::StatusCode;

#[test]
fn the_readme_shows_this_router_to_the_letter() {
    let readme = include_str!("../../README.md");
    let block = format!("```rust\n{}```\n", include_str!("app.rs"));
    assert!(
        readme.contains(&block),
        "README.md and tests/readme/app.rs differ"
    );
}

#[tokio::test]
async fn the_readme_router_answers_200_then_429_over_tcp() {
    let server = Server::start(readme::router()).await.unwrap();
    let http = client();
    let poll = || {
        http.get(server.url("/api/poll"))
            .header("x-participant-id", "p1")
            .send()
    };
    for i in 0..20 {
        let r = poll().await.unwrap();
        assert_eq!(
            r.status(),
            StatusCode::OK,
            "request {i}: {:?}",
            r.text().await
        );
    }
    let r = poll().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["ratelimit-limit"], "20");
    // A browser is sent to the page, which the guard never limits.
    let r = http
        .get(server.url("/api/poll"))
        .header("x-participant-id", "p1")
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = http
        .get(server.url("/too-many-requests"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // A wrong method is a 405 and spends nothing.
    let r = http.post(server.url("/api/poll")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
}
