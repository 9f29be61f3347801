//! TLS to Redis (feature `tls`, with rustls): `rediss://` URLs, verified against the
//! system's roots or the certificate authority the builder was given, and client
//! certificates for servers that ask for them (`tls-auth-clients yes`).

use std::fmt;

use redis::{ConnectionInfo, RedisResult};

/// Certificates given to the builder. Without the feature, always empty.
#[derive(Clone, Default)]
pub(super) struct Tls {
    /// A PEM certificate authority to trust instead of the system's roots.
    pub(super) root: Option<Vec<u8>>,
    /// A PEM client certificate and its key.
    pub(super) client: Option<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for Tls {
    // Never the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("root", &self.root.is_some())
            .field("client", &self.client.is_some())
            .finish()
    }
}

impl Tls {
    #[cfg_attr(not(any(feature = "tls", feature = "sentinel")), allow(dead_code))]
    pub(super) fn is_set(&self) -> bool {
        self.root.is_some() || self.client.is_some()
    }

    /// A client for `info`, with these certificates when any were given.
    pub(super) fn client(&self, info: ConnectionInfo) -> RedisResult<redis::Client> {
        #[cfg(feature = "tls")]
        if self.is_set() {
            return redis::Client::build_with_tls(info, self.certificates());
        }
        redis::Client::open(info)
    }

    #[cfg(feature = "tls")]
    pub(super) fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self.client.clone().map(|(client_cert, client_key)| {
                redis::ClientTlsConfig {
                    client_cert,
                    client_key,
                }
            }),
            root_cert: self.root.clone(),
        }
    }

    /// rustls needs a process-wide crypto provider; installs *ring* unless the
    /// application installed one.
    #[cfg(feature = "tls")]
    pub(super) fn install_provider() {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err: another thread installed one meanwhile, which is as good.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    }
}
