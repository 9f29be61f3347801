//! Many clones of one service, used at once on a multi-thread runtime, admit exactly the limit.

use http::StatusCode;
use ratekeeper_tower::Rule;
use ratekeeper_tower::extract::Global;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clones_share_counters_and_admit_exactly_the_limit() {
    for rep in 0..10 {
        let (layer, _) = fresh();
        let svc = app(&layer.rule(Rule::new(minute(&format!("shared-{rep}"), 100), Global)));
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let svc = svc.clone();
            tasks.push(tokio::spawn(async move {
                let mut ok = 0u32;
                for _ in 0..20 {
                    let r = send(svc.clone(), from("1.2.3.4:5").body(empty()).unwrap()).await;
                    ok += u32::from(r.status == StatusCode::OK);
                }
                ok
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        assert_eq!(total, 100, "repetition {rep}");
    }
}
