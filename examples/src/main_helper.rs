//! What every example server's `main` does, written once: logs, metrics from the
//! environment, the store checked at start, the router built, then served on the address
//! its environment names.

use std::fmt::Display;
use std::future::Future;

use axum::Router;
use tokio::net::TcpListener;

/// One example server: its name (in messages), the prefix of its environment variables
/// (`<PREFIX>_BIND`, `<PREFIX>_METRICS`), its default address and metrics port.
#[derive(Debug, Clone, Copy)]
pub struct Binary {
    name: &'static str,
    prefix: &'static str,
    bind: &'static str,
    metrics_port: Option<u16>,
    listening: &'static str,
}

impl Binary {
    /// A server named `name`, configured by `<prefix>_*`, on `bind` by default.
    pub const fn new(name: &'static str, prefix: &'static str, bind: &'static str) -> Self {
        Self {
            name,
            prefix,
            bind,
            metrics_port: None,
            listening: "",
        }
    }

    /// Serves `/metrics` on `port` by default when `<prefix>_METRICS=1`.
    #[must_use]
    pub const fn metrics(mut self, port: u16) -> Self {
        self.metrics_port = Some(port);
        self
    }

    /// Said after the address it listens on (`" (gRPC and HTTP)"`).
    #[must_use]
    pub const fn listening(mut self, note: &'static str) -> Self {
        self.listening = note;
        self
    }

    /// Runs the server: exits 2 when `app` fails (a configuration error), 1 when it
    /// cannot listen or serve.
    pub async fn run<E, S>(
        self,
        app: impl FnOnce() -> Result<Router, E>,
        serve: impl FnOnce(TcpListener, Router) -> S,
    ) where
        E: Display,
        S: Future<Output = std::io::Result<()>>,
    {
        tracing_subscriber::fmt().init();
        let name = self.name;
        let fail = |code: i32, e: &dyn Display| -> ! {
            eprintln!("{name}: {e}");
            std::process::exit(code)
        };
        if let Some(port) = self.metrics_port
            && let Err(e) = crate::metrics_from_env(self.prefix, port).await
        {
            fail(1, &e);
        }
        crate::verify_at_start().await;
        let router = app().unwrap_or_else(|e| fail(2, &e));
        let var = format!("{}_BIND", self.prefix);
        let bind = std::env::var(&var).unwrap_or_else(|_| self.bind.to_owned());
        let listener = TcpListener::bind(&bind)
            .await
            .unwrap_or_else(|e| fail(1, &format!("cannot listen on {bind}: {e}")));
        let addr = listener.local_addr().map_or(bind, |a| a.to_string());
        println!("listening on http://{addr}{}", self.listening);
        if let Err(e) = serve(listener, router).await {
            fail(1, &e);
        }
    }
}
