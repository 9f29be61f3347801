//! The operator's page: rendered here (no script, no external asset), a login form that
//! exchanges a token for a session cookie, and forms that carry a CSRF token and must
//! come with this host's `Origin`.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::{Extension, Form};
use ratekeeper_axum::core::Principal;
use serde::Deserialize;

use crate::Admin;
use crate::api::bans_json;
use crate::auth::{
    COOKIE, Caller, Client, Locked, Role, SESSION, Session, audit, cookie, locked_out, same,
};
use crate::html::esc;
use crate::views::{fleet_line, hitters_section};

const STYLE: &str = "body{font:15px system-ui,sans-serif;margin:2em;max-width:70em}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}\
th{background:#f3f3f3}form.inline{display:inline}input[type=number]{width:7em}.err{color:#b00}";

fn doc(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{}</title>\
         <style>{STYLE}</style></head><body>{body}</body></html>",
        esc(title)
    )
}

fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, Html(body)).into_response();
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"),
    );
    r
}

fn login_page(a: &Admin, status: StatusCode, note: &str) -> Response {
    let m = esc(&a.inner.mount);
    let note = if note.is_empty() {
        String::new()
    } else {
        format!("<p class=err>{}</p>", esc(note))
    };
    let body = format!(
        "<h1>Rate limits: sign in</h1>{note}<form method=post action=\"{m}/login\">\
         <label>Admin token <input type=password name=token autocomplete=off required></label> \
         <button>Sign in</button></form>"
    );
    html(status, doc("Sign in", &body))
}

fn wants_html(h: &HeaderMap) -> bool {
    h.get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"))
}

/// A form whose session ended: the sign-in page, 401.
pub(crate) fn sign_in_again(a: &Admin) -> Response {
    login_page(a, StatusCode::UNAUTHORIZED, "Sign in again.")
}

impl Admin {
    /// The live session a request's cookie names.
    pub(crate) fn session(&self, h: &HeaderMap) -> Option<Session> {
        cookie(h).and_then(|id| self.inner.sessions.get(id))
    }
}

pub(crate) async fn show(State(a): State<Admin>, h: HeaderMap) -> Response {
    let (caller, session) = match (a.session(&h), a.bearer(&h)) {
        (Some(s), _) => (s.caller.clone(), Some(s)),
        (None, Ok(c)) => (c, None),
        (None, Err(unauthorized)) => {
            return if wants_html(&h) {
                login_page(&a, StatusCode::UNAUTHORIZED, "")
            } else {
                unauthorized
            };
        }
    };
    match render(&a, &caller, session.as_ref()).await {
        Ok(body) => html(StatusCode::OK, doc("Rate limits", &body)),
        Err(r) => r,
    }
}

/// A form's hidden CSRF field, and what it posts to.
fn form(m: &str, to: &str, csrf: &str, fields: &str, button: &str) -> String {
    format!(
        "<form class=inline method=post action=\"{m}/forms/{to}\">{fields}\
         <input type=hidden name=csrf value=\"{}\"><button>{button}</button></form>",
        esc(csrf)
    )
}

async fn render(a: &Admin, caller: &Caller, session: Option<&Session>) -> Result<String, Response> {
    let m = esc(&a.inner.mount);
    // Forms only in a session a writer opened: the CSRF token is the session's.
    let csrf = session
        .filter(|s| s.caller.role == Role::ReadWrite)
        .map(|s| s.csrf.as_str());
    let mut b = format!(
        "<h1>Rate limits</h1><p>Signed in as <b>{}</b>{}.</p>",
        esc(&caller.name),
        if caller.role == Role::ReadOnly {
            " (read only)"
        } else {
            ""
        }
    );
    if let Some(c) = session.map(|s| s.csrf.as_str()) {
        let _ = write!(
            b,
            "<form method=post action=\"{m}/logout\"><input type=hidden name=csrf value=\"{}\"><button>Sign out</button></form>",
            esc(c)
        );
    }
    fleet_line(&mut b, a);
    limits_section(&mut b, a, &m, csrf);
    hitters_section(&mut b, a).await;
    bans_section(&mut b, a, &m, csrf).await?;
    lists_section(&mut b, a);
    Ok(b)
}

fn limits_section(b: &mut String, a: &Admin, m: &str, csrf: Option<&str>) {
    b.push_str("<h2>Limits</h2><table><tr><th>limit</th><th>algorithm</th><th>quota</th><th>window (s)</th><th>overrides</th><th>change</th></tr>");
    for l in &a.inner.limits {
        let overrides: Vec<String> = l
            .overrides()
            .iter()
            .map(|(p, q)| format!("{}: {q}", esc(p)))
            .collect();
        let change = csrf.map_or_else(String::new, |c| {
            let fields = format!(
                "<input type=hidden name=limit value=\"{}\"><input type=number name=quota min=1 value={} aria-label=\"quota of {}\">",
                esc(l.name()),
                l.quota(),
                esc(l.name())
            );
            form(m, "quota", c, &fields, "Set quota")
        });
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td class=quota>{}</td><td>{}</td><td>{}</td><td>{change}</td></tr>",
            esc(l.name()),
            l.kind().as_str(),
            l.quota(),
            l.window().as_secs_f64(),
            overrides.join("<br>")
        );
    }
    b.push_str("</table>");
}

async fn bans_section(
    b: &mut String,
    a: &Admin,
    m: &str,
    csrf: Option<&str>,
) -> Result<(), Response> {
    b.push_str(
        "<h2>Bans</h2><table><tr><th>ban</th><th>principal</th><th>left (s)</th><th></th></tr>",
    );
    for ban in bans_json(a).await? {
        let (limit, who) = (
            ban["limit"].as_str().unwrap_or_default(),
            ban["principal"].as_str().unwrap_or_default(),
        );
        let lift = csrf.map_or_else(String::new, |c| {
            let fields = format!(
                "<input type=hidden name=limit value=\"{}\"><input type=hidden name=principal value=\"{}\">",
                esc(limit),
                esc(who)
            );
            form(m, "lift", c, &fields, "Lift")
        });
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{:.0}</td><td>{lift}</td></tr>",
            esc(limit),
            esc(who),
            ban["remaining_seconds"].as_f64().unwrap_or_default()
        );
    }
    b.push_str("</table>");
    Ok(())
}

fn lists_section(b: &mut String, a: &Admin) {
    if let Some(access) = &a.inner.access {
        let (allow, deny) = access.lists();
        for (name, l) in [("Allow list", allow), ("Deny list", deny)] {
            let mut items: Vec<String> = l.addresses().map(esc).collect();
            items.extend(l.principals().into_iter().map(esc));
            let _ = write!(
                b,
                "<h2>{name}</h2><p>{}</p>",
                if items.is_empty() {
                    "(empty)".to_owned()
                } else {
                    items.join(", ")
                }
            );
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Login {
    token: String,
}

fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

pub(crate) fn forbidden(why: &str) -> Response {
    html(
        StatusCode::FORBIDDEN,
        doc("Refused", &format!("<p class=err>{}</p>", esc(why))),
    )
}

/// The sign-in form: the gate checked the `Origin`; a wrong token counts against the
/// client's address, or while it is locked out is answered 429 (uncounted). The right
/// token signs in, locked out or not.
pub(crate) async fn login(
    State(a): State<Admin>,
    Extension(Client(who)): Extension<Client>,
    Extension(Locked(lock)): Extension<Locked>,
    Form(f): Form<Login>,
) -> Response {
    let Some(caller) = a.token_for(f.token.trim().as_bytes()) else {
        if let Some(wait) = lock {
            return locked_out(wait);
        }
        a.inner.guard.failed(&who).await;
        return login_page(&a, StatusCode::UNAUTHORIZED, "That token is not valid.");
    };
    let Some(id) = a.inner.sessions.open(caller) else {
        return html(
            StatusCode::SERVICE_UNAVAILABLE,
            doc("Error", "<p>No randomness for a session.</p>"),
        );
    };
    let mut r = see_other(&a.inner.mount);
    let cookie = format!(
        "{COOKIE}={id}; Path={}; Max-Age={}; HttpOnly; SameSite=Strict{}",
        a.inner.mount,
        SESSION.as_secs(),
        if a.inner.secure_cookie {
            "; Secure"
        } else {
            ""
        }
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// A form's session (the gate checked the `Origin`): a live session, a writer's, and the
/// CSRF token the session's.
fn checked(a: &Admin, h: &HeaderMap, csrf: &str) -> Result<Session, Response> {
    let Some(s) = a.session(h) else {
        return Err(login_page(a, StatusCode::UNAUTHORIZED, "Sign in again."));
    };
    if !same(&s.csrf, csrf) {
        return Err(forbidden("This form is stale or forged (CSRF token)."));
    }
    if s.caller.role != Role::ReadWrite {
        return Err(forbidden("This token may read, not change."));
    }
    Ok(s)
}

/// Sign-out (the gate checked the `Origin` and that a cookie came): the session the cookie
/// names is closed on the server, with or without the form's CSRF token (a forged
/// sign-out could only sign the operator out, and a cross-site one fails the `Origin`
/// check and carries no `SameSite=Strict` cookie), and the cookie cleared. Its body is
/// never read.
pub(crate) async fn logout(State(a): State<Admin>, h: HeaderMap) -> Response {
    if let Some(id) = cookie(&h) {
        a.inner.sessions.close(id);
    }
    signed_out(&a)
}

/// To the page, with the session cookie cleared.
pub(crate) fn signed_out(a: &Admin) -> Response {
    let mut r = see_other(&a.inner.mount);
    let gone = format!(
        "{COOKIE}=; Path={}; Max-Age=0; HttpOnly; SameSite=Strict",
        a.inner.mount
    );
    if let Ok(v) = HeaderValue::from_str(&gone) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize)]
pub(crate) struct QuotaForm {
    limit: String,
    quota: String,
    csrf: String,
}

pub(crate) async fn set_quota(
    State(a): State<Admin>,
    h: HeaderMap,
    Form(f): Form<QuotaForm>,
) -> Response {
    let s = match checked(&a, &h, &f.csrf) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let Some(limit) = a.limit(&f.limit) else {
        return html(
            StatusCode::NOT_FOUND,
            doc("Error", "<p class=err>No limit of that name.</p>"),
        );
    };
    let set = async |q: u64| match &a.inner.fleet {
        // For every instance: written to the store first (refused when it is down).
        Some(fleet) => fleet
            .set_quota(limit.name(), q)
            .await
            .map(|_| q)
            .map_err(|e| e.to_string()),
        None => limit.set_quota(q).map(|()| q).map_err(|e| e.to_string()),
    };
    let parsed = f.quota.trim().parse::<u64>().map_err(|e| e.to_string());
    let result = match parsed {
        Ok(q) => set(q).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(q) => {
            audit(&s.caller, "set_quota", limit.name(), "", &q.to_string());
            see_other(&a.inner.mount)
        }
        Err(e) => html(
            StatusCode::BAD_REQUEST,
            doc("Error", &format!("<p class=err>{}</p>", esc(&e))),
        ),
    }
}

#[derive(Deserialize)]
pub(crate) struct LiftForm {
    limit: String,
    principal: String,
    csrf: String,
}

pub(crate) async fn lift(
    State(a): State<Admin>,
    h: HeaderMap,
    Form(f): Form<LiftForm>,
) -> Response {
    let s = match checked(&a, &h, &f.csrf) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (Some(limit), Some(p)) = (a.limit(&f.limit), Principal::from_rendered(&f.principal)) else {
        return html(
            StatusCode::BAD_REQUEST,
            doc("Error", "<p class=err>No such ban.</p>"),
        );
    };
    if let Err(e) = a.reset_principal(limit, &p).await {
        return html(
            StatusCode::SERVICE_UNAVAILABLE,
            doc(
                "Error",
                &format!("<p class=err>{}</p>", esc(&e.to_string())),
            ),
        );
    }
    audit(&s.caller, "lift_ban", limit.name(), p.as_str(), "");
    see_other(&a.inner.mount)
}
