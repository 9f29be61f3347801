//! ask-ai: the rest of its table, each limit run to exhaustion on memory and Redis — docs
//! runs, page retries and publishes per org, Ask AI per project (500 a day) and for
//! everybody (5 000 a day), and the local visitor — and each with the failure policy the
//! table gives it when the store is down (signed-in actions and the AI update job open, Ask
//! AI closed).

use ratekeeper_core::{AnyStore, Limiter, MemoryStore};
use ratekeeper_examples::ask_ai::{AskLimits, ai_update_after_push, app_with_store};
use ratekeeper_tests::redis::{RedisServer, down_store};
use ratekeeper_tests::{Server, client};
use reqwest::StatusCode;

/// `path` posted until refused: how many were admitted, and the refusal's limit header.
async fn to_exhaustion(http: &reqwest::Client, url: &str, most: usize) -> (usize, String) {
    for i in 0..=most {
        let r = http.post(url).send().await.unwrap();
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            let limit = r.headers()["ratelimit-limit"].to_str().unwrap().to_owned();
            return (i, limit);
        }
        assert_eq!(r.status(), StatusCode::OK, "{url} #{i}");
    }
    panic!("{url}: {most} admitted and more");
}

async fn the_rest(store: AnyStore) {
    let server = Server::start(app_with_store(store).unwrap()).await.unwrap();
    let http = client();
    // Per org, a day: 10 docs runs, 50 page retries, 50 publishes; another org untouched.
    for (route, max) in [("docs-runs", 10), ("page-retries", 50), ("publishes", 50)] {
        let url = server.url(&format!("/orgs/acme/{route}"));
        assert_eq!(
            to_exhaustion(&http, &url, max).await,
            (max, max.to_string())
        );
        let other = server.url(&format!("/orgs/globex/{route}"));
        assert_eq!(
            http.post(other).send().await.unwrap().status(),
            200,
            "{route}"
        );
    }
    let ask = |project: String, visitor: Option<String>| {
        let mut r = http
            .post(server.url(&format!("/projects/{project}/ask")))
            .body("{\"question\":\"How do I start?\"}");
        if let Some(v) = visitor {
            r = r.header("cf-connecting-ip", v);
        }
        r.send()
    };
    // No cf-connecting-ip (local development): one visitor, `local`, 20 a minute.
    for i in 0..20 {
        let r = ask(format!("local{i}"), None).await.unwrap();
        assert_eq!(r.status(), 200, "{i}");
    }
    let r = ask("local20".into(), None).await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["ratelimit-limit"], "20");
    // 500 a day per project: 34 visitors asking 15 each, the 501st refused by `ask-site`.
    let mut admitted = 0;
    let refusal = 'site: {
        for v in 0..34 {
            for _ in 0..15 {
                let r = ask("big".into(), Some(format!("198.51.100.{v}")))
                    .await
                    .unwrap();
                if r.status() == 429 {
                    break 'site r;
                }
                admitted += 1;
            }
        }
        panic!("510 asks admitted on one project");
    };
    assert_eq!(admitted, 500);
    assert_eq!(refusal.headers()["ratelimit-limit"], "500");
    // 5 000 a day for everybody: 250 visitors on 20 projects each (none past its own
    // limits); 520 were spent above (a refusal spends nothing), so 4 480 more, and the
    // next is refused by `ask-all`.
    let mut everybody = 520;
    let refusal = 'all: {
        for v in 0..250u32 {
            let visitor = format!("203.0.{}.{}", v / 250, v % 250);
            for p in 0..20 {
                let r = ask(format!("p{p}"), Some(visitor.clone())).await.unwrap();
                if r.status() == 429 {
                    break 'all r;
                }
                assert_eq!(r.status(), 200);
                everybody += 1;
            }
        }
        panic!("5 000 asks and more admitted");
    };
    assert_eq!(everybody, 5_000);
    assert_eq!(refusal.headers()["ratelimit-limit"], "5000");
}

#[tokio::test]
async fn the_rest_of_the_table_on_the_memory_store() {
    the_rest(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn the_rest_of_the_table_on_redis() {
    let redis = RedisServer::start();
    the_rest(redis.store()).await;
}

/// With the store down, every signed-in action and the AI update job go on (open); Ask AI
/// is refused with 503 and a retry hint (closed), with or without a visitor header.
#[tokio::test]
async fn with_the_store_down_each_limit_takes_its_own_policy() {
    let server = Server::start(app_with_store(down_store()).unwrap())
        .await
        .unwrap();
    let http = client();
    for route in ["docs-runs", "page-retries", "publishes"] {
        let r = http
            .post(server.url(&format!("/orgs/acme/{route}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{route} fails open");
    }
    for visitor in [None, Some("198.51.100.1")] {
        let mut r = http
            .post(server.url("/projects/p/ask"))
            .body("{\"question\":\"?\"}");
        if let Some(v) = visitor {
            r = r.header("cf-connecting-ip", v);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 503, "ask fails closed ({visitor:?})");
        assert!(r.headers().contains_key("retry-after"));
    }
    let limiter = Limiter::new(down_store());
    let limits = AskLimits::new().unwrap();
    assert!(
        ai_update_after_push(&limiter, &limits, "acme", 2)
            .await
            .unwrap(),
        "the AI update job fails open"
    );
}
