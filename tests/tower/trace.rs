//! The decision span through `tracing-opentelemetry` to an in-process OpenTelemetry
//! exporter, over TCP: each request's `rate_limit.decision` span carries the IETF fields
//! as attributes.

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporterBuilder, SdkTracerProvider};
use ratekeeper_core::{Limit, PrincipalKind};
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{RateLimitLayer, Rule};
use tracing_subscriber::layer::SubscriberExt;

/// Runs [`decision_spans_in_a_process_of_their_own`] alone, in a process of its own:
/// tracing caches each call site's interest for every thread, and a test elsewhere in this
/// binary that first reaches a call site while this one's subscriber is being installed
/// can leave it cached as "never" (tracing's registration race), a flake that is not the
/// layer's.
#[test]
fn a_decision_span_carries_the_ietf_fields_to_opentelemetry() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "trace::decision_spans_in_a_process_of_their_own"])
        .args(["--ignored", "--nocapture"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("1 passed"), "{said}");
}

#[tokio::test]
#[ignore = "run by a_decision_span_carries_the_ietf_fields_to_opentelemetry, alone"]
async fn decision_spans_in_a_process_of_their_own() {
    let exporter = InMemorySpanExporterBuilder::new().build();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("rate-limit-test"));
    // This thread's subscriber: the server runs on this test's one-thread runtime.
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(otel));

    // A log, not a fixed window: no minute boundary can fall between the three requests.
    let limit = Limit::sliding_log("otel-answers", 2, Duration::from_secs(60)).unwrap();
    let who = HeaderKey::new(
        "x-participant-id".parse().unwrap(),
        PrincipalKind::Participant,
    );
    let layer = RateLimitLayer::in_memory().rule(Rule::new(limit, who));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let server = Server::start(app).await.unwrap();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let r = client()
            .get(server.url("/"))
            .header("x-participant-id", "p-1")
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
    provider.force_flush().unwrap();
    let spans: Vec<HashMap<String, String>> = exporter
        .get_finished_spans()
        .unwrap()
        .iter()
        .filter(|s| s.name == "rate_limit.decision")
        .map(|s| {
            s.attributes
                .iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect()
        })
        .collect();
    assert_eq!(spans.len(), 3, "{spans:?}");
    for (span, (remaining, decision)) in
        spans
            .iter()
            .zip([("1", "allowed"), ("0", "allowed"), ("0", "limited")])
    {
        assert_eq!(span["policy"], "otel-answers", "{span:?}");
        assert_eq!(span["quota"], "2");
        assert_eq!(span["window"], "60");
        assert_eq!(span["remaining"], remaining, "{span:?}");
        assert_eq!(span["decision"], decision, "{span:?}");
        assert_eq!(span["fail_open"], "false");
        let reset: u64 = span["reset"].parse().unwrap();
        assert!((1..=60).contains(&reset), "{span:?}");
    }
}
