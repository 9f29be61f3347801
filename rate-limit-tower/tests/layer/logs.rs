//! Setup problems with client IPs are logged once per extractor, never per request, and
//! never with the address.

use std::sync::{Arc, Mutex, OnceLock};

use http::{Request, StatusCode};
use rate_limit_tower::Rule;
use rate_limit_tower::extract::ClientIp;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::support::*;

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", f.name(), v));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Lines {
    fn on_event(&self, e: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut f = Fields(format!("{} ", e.metadata().name()));
        e.record(&mut f);
        self.0.lock().unwrap().push(f.0);
    }
}

/// One process-wide subscriber (thread-local ones miss events across parallel tests).
fn lines() -> Lines {
    static L: OnceLock<Lines> = OnceLock::new();
    L.get_or_init(|| {
        let l = Lines::default();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(l.clone()))
            .unwrap();
        l
    })
    .clone()
}

fn count(name: &str) -> usize {
    lines()
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with(&format!("{name} ")))
        .count()
}

#[tokio::test]
async fn a_missing_peer_and_garbage_forwarding_are_each_logged_once() {
    lines();
    let (layer, _) = fresh();
    let svc = app(&layer.rule(Rule::new(minute("logs-ip", 100), ClientIp::new())));
    for _ in 0..5 {
        let r = send(
            svc.clone(),
            Request::builder().uri("/").body(empty()).unwrap(),
        )
        .await;
        assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
    assert_eq!(count("rate_limit.peer_missing"), 1);

    let (layer, _) = fresh();
    let proxy = ClientIp::new().trusted_proxies(["10.0.0.0/8".parse().unwrap()]);
    let svc = app(&layer.rule(Rule::new(minute("logs-xff", 100), proxy)));
    for i in 0..5 {
        let req = from("10.0.0.2:1")
            .header("x-forwarded-for", format!("198.51.100.{i}, not-an-address"))
            .body(empty())
            .unwrap();
        assert_eq!(send(svc.clone(), req).await.status, StatusCode::OK);
    }
    assert_eq!(count("rate_limit.forwarded_invalid"), 1);
    for l in lines()
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("rate_limit."))
    {
        assert!(
            !l.contains("198.51.100") && !l.contains("not-an-address"),
            "client input logged: {l}"
        );
    }
}
