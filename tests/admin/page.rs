//! The operator's page over TCP, on the memory store and a real `redis-server`: a login
//! form, the page for a bearer token, the session cookie, and forms checked for their CSRF
//! token and `Origin`.

use ratekeeper_core::{AnyStore, MemoryStore};
use ratekeeper_tests::redis::RedisServer;
use ratekeeper_tests::{Server, client};

use crate::api::{OPS, VIEWER, answer, answers, app, form, k};

/// The CSRF token in a page's forms.
pub(crate) fn csrf_field(html: &str) -> String {
    html.split("name=csrf value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a CSRF field")
        .to_owned()
}

/// The page: a login form for a browser without a session, the page for a bearer token;
/// the login sets an `HttpOnly; SameSite=Strict` cookie; a form without its CSRF token, or
/// from another origin, changes nothing; with both, the quota changes and a ban is lifted.
async fn page_end_to_end(store: AnyStore) {
    let (app, answers_limit) = app(store);
    let s = Server::start(app).await.unwrap();
    let origin = format!("http://{}", s.addr());
    assert_eq!(
        answers(&s, "mallory", 6).await,
        [200, 200, 200, 429, 429, 429]
    );

    let anon = client()
        .get(s.url("/admin"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status(), 401);
    assert!(
        anon.text().await.unwrap().contains("name=token"),
        "a login form"
    );
    let page = client()
        .get(s.url("/admin"))
        .header("accept", "text/html")
        .bearer_auth(VIEWER)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["cache-control"], "no-store");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("answers") && html.contains(&k("mallory")),
        "limits, hitters, bans"
    );
    assert!(
        !html.contains("name=csrf"),
        "no forms without a writer's session"
    );

    let login = |token: &'static str, origin: Option<String>| {
        let mut r = client()
            .post(s.url("/admin/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[("token", token.to_owned())]));
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r.send()
    };
    assert_eq!(login(OPS, None).await.unwrap().status(), 403, "no Origin");
    assert_eq!(
        login("wrong-token-0123456789abcdef", Some(origin.clone()))
            .await
            .unwrap()
            .status(),
        401
    );
    let ok = login(OPS, Some(origin.clone())).await.unwrap();
    assert_eq!(ok.status(), 303);
    let set = ok.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/admin"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();

    let html = client()
        .get(s.url("/admin"))
        .header("accept", "text/html")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = csrf_field(&html);
    let post = |path: &'static str, fields: Vec<(&'static str, String)>, origin: String| {
        client()
            .post(s.url(path))
            .header("cookie", &cookie)
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&fields))
            .send()
    };
    let quota = |csrf: String| {
        vec![
            ("limit", "answers".to_owned()),
            ("quota", "9".to_owned()),
            ("csrf", csrf),
        ]
    };
    assert_eq!(
        post("/admin/forms/quota", quota(String::new()), origin.clone())
            .await
            .unwrap()
            .status(),
        403,
        "no CSRF token"
    );
    assert_eq!(
        post("/admin/forms/quota", quota("0".repeat(64)), origin.clone())
            .await
            .unwrap()
            .status(),
        403,
        "a forged one"
    );
    assert_eq!(
        post(
            "/admin/forms/quota",
            quota(csrf.clone()),
            "http://evil.example".to_owned()
        )
        .await
        .unwrap()
        .status(),
        403,
        "another origin"
    );
    assert_eq!(answers_limit.quota(), 3, "nothing changed");
    assert_eq!(
        post("/admin/forms/quota", quota(csrf.clone()), origin.clone())
            .await
            .unwrap()
            .status(),
        303
    );
    assert_eq!(answers_limit.quota(), 9);

    let lift = vec![
        ("limit", "answer-ban".to_owned()),
        ("principal", k("mallory")),
        ("csrf", csrf.clone()),
    ];
    assert_eq!(answer(&s, "mallory").await, 429, "banned");
    assert_eq!(
        post("/admin/forms/lift", lift, origin.clone())
            .await
            .unwrap()
            .status(),
        303
    );
    assert_eq!(
        answer(&s, "mallory").await,
        200,
        "lifted, and 9 per minute now"
    );

    let out = post("/admin/logout", vec![("csrf", csrf)], origin)
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    let after = client()
        .get(s.url("/admin"))
        .header("accept", "text/html")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401, "the session is closed");
}

#[tokio::test]
async fn the_page_on_memory() {
    page_end_to_end(AnyStore::Memory(MemoryStore::new())).await;
}

#[tokio::test]
async fn the_page_on_redis() {
    let redis = RedisServer::start();
    page_end_to_end(redis.store()).await;
}
