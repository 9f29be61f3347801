//! The layer's store errors on a Cluster with a master killed, through a Prometheus
//! recorder (the only one this binary installs) and a real TCP server: every error names
//! the dead node as its failure domain, and no other node's domain appears.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratekeeper_core::{AnyStore, FailurePolicy, Limit, Limiter, PrincipalKind, RedisStore};
use ratekeeper_tests::redis::RedisCluster;
use ratekeeper_tests::{Server, client};
use ratekeeper_tower::extract::HeaderKey;
use ratekeeper_tower::{RateLimitLayer, Rule};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_errors_name_the_dead_cluster_node() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder in this binary");

    let mut cluster = RedisCluster::start_with(&["--cluster-require-full-coverage", "no"]);
    let victim = cluster.nodes()[1].port();
    let store = RedisStore::cluster_builder(cluster.urls()).build().unwrap();
    let limit = Limit::fixed_window("metrics-node", 1_000, Duration::from_secs(60)).unwrap();
    let who = HeaderKey::new(
        "x-participant-id".parse().unwrap(),
        PrincipalKind::Participant,
    );
    let layer = RateLimitLayer::new(Limiter::new(AnyStore::Redis(store)))
        .rule(Rule::new(limit, who).on_store_error(FailurePolicy::Open));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let server = Server::start(app).await.unwrap();
    let send = |i: u32| {
        client()
            .get(server.url("/"))
            .header("x-participant-id", format!("p{i}"))
            .send()
    };
    // Warm: every principal answered once, by its own node.
    for i in 0..60 {
        assert_eq!(send(i).await.unwrap().status(), 200);
    }
    // Other tests of this binary count into the same recorder (a down standalone store's
    // errors are `domain="store"`): only lines naming this cluster's nodes are this test's.
    let ports: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!(":{}\"", n.port()))
        .collect();
    let ours = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("rate_limit_store_errors_total{"))
            .filter(|l| ports.iter().any(|p| l.contains(p.as_str())))
            .map(str::to_owned)
            .collect()
    };
    let before = ours(&handle.render());
    assert!(before.is_empty(), "{before:?}");

    cluster.nodes_mut()[1].kill();
    for i in 0..60 {
        // Open: let through whichever node holds the key.
        assert_eq!(send(i).await.unwrap().status(), 200);
    }
    let text = handle.render();
    let errors = ours(&text);
    assert!(!errors.is_empty(), "{text}");
    let dead = format!(":{victim}\"");
    assert!(
        errors.iter().all(|l| l.contains(&dead)),
        "{errors:?}, dead node :{victim}"
    );
}
