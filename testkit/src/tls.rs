//! Certificates made for a test: a certificate authority, a server certificate for
//! `127.0.0.1` and `localhost` and a client certificate, both signed by it, written as PEM
//! files to a scratch directory that is removed on drop.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A CA and the certificates it signed.
#[derive(Debug)]
pub struct TestCerts {
    dir: PathBuf,
    /// The CA's certificate (PEM): what a client trusts.
    pub ca_pem: String,
    /// The client certificate (PEM), for servers with `tls-auth-clients yes`.
    pub client_cert_pem: String,
    /// The client certificate's key (PEM).
    pub client_key_pem: String,
}

impl TestCerts {
    /// Makes a fresh CA (`name` goes in its common name) and signs a server and a client
    /// certificate with it.
    ///
    /// # Panics
    ///
    /// If a certificate cannot be made or written.
    pub fn make(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "rate-limit-certs-{}-{name}-{}",
            std::process::id(),
            crate::net::free_port()
        ));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("rate-limit test CA {name}"),
        );
        let ca_key = KeyPair::generate().expect("a CA key");
        let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
        let issuer = Issuer::new(ca, ca_key);
        let sign = |names: Vec<String>| {
            let params = CertificateParams::new(names).expect("params");
            let key = KeyPair::generate().expect("a key");
            let cert = params
                .signed_by(&key, &issuer)
                .expect("a signed certificate");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = sign(vec!["127.0.0.1".into(), "localhost".into()]);
        let (client_cert_pem, client_key_pem) = sign(vec!["client.test".into()]);
        let certs = Self {
            dir,
            ca_pem: ca_cert.pem(),
            client_cert_pem,
            client_key_pem,
        };
        for (file, pem) in [
            ("ca.pem", &certs.ca_pem),
            ("server.pem", &server_cert),
            ("server.key", &server_key),
        ] {
            std::fs::write(certs.dir.join(file), pem).expect("write a PEM file");
        }
        certs
    }

    /// The CA's certificate file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// `redis-server` arguments that serve TLS with the server certificate; `auth_clients`
    /// asks clients for a certificate signed by the CA.
    pub fn server_args(&self, auth_clients: bool) -> Vec<String> {
        let path = |f: &str| self.dir.join(f).display().to_string();
        vec![
            "--tls-cert-file".into(),
            path("server.pem"),
            "--tls-key-file".into(),
            path("server.key"),
            "--tls-ca-cert-file".into(),
            path("ca.pem"),
            "--tls-auth-clients".into(),
            if auth_clients { "yes" } else { "no" }.into(),
        ]
    }
}

impl Drop for TestCerts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
