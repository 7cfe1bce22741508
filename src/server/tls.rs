//! TLS as Redis 7.0 configures it (the `tls-*` directives), on rustls: the server context that
//! the TLS listeners hand their sockets to, and the client context the replica link dials with
//! (`tls-replication yes`). Both are built from the files at startup and again on CONFIG SET of a
//! TLS directive; a build that fails leaves the current contexts in place (connections already
//! open keep the context they were accepted with), and the error is logged with Redis's lines.
//!
//! Crypto provider: ring. It builds with `cc` alone; aws-lc-rs (rustls's default) needs cmake,
//! which this machine and a fresh CI image lack, and would add minutes of C build for no
//! behaviour Redis's directives can reach (both offer the same TLS 1.2 ECDHE and TLS 1.3 suites).
//!
//! Where rustls and OpenSSL differ, and what Ferrodis does about it:
//! - Protocols: TLSv1.2 and TLSv1.3 only. `tls-protocols` naming TLSv1 or TLSv1.1 drops them with a
//!   warning; naming nothing else is a configuration error.
//! - Ciphers: only AEAD suites with ECDHE key exchange exist (AES-GCM and ChaCha20-Poly1305, RSA or
//!   ECDSA certificates). `tls-ciphers` is read as an OpenSSL cipher string (names, `!`/`-`/`+`
//!   prefixes, `+`-joined keywords such as `ECDHE+AESGCM`, `DEFAULT`, `HIGH`, `ALL`); names rustls
//!   lacks (`AES128-SHA256`, CBC and static-RSA suites) select nothing, as an unknown name does in
//!   OpenSSL, and a string that selects nothing fails with Redis's `Failed to configure ciphers`
//!   plus a line naming the directive and what is available. `tls-ciphersuites` likewise.
//! - `tls-dh-params-file` is checked (it must be a readable PEM DH parameters file, as Redis
//!   requires) and otherwise unused: rustls has no finite-field Diffie-Hellman; key exchange is
//!   ECDHE (X25519, P-256, P-384) always.
//! - `tls-key-file-pass` decrypts PKCS#8 keys (`BEGIN ENCRYPTED PRIVATE KEY`, what OpenSSL 3 writes);
//!   legacy `Proc-Type: 4,ENCRYPTED` keys are refused with the reason.
//! - Session caching, as OpenSSL does it: stateless tickets (TLS 1.2 and 1.3) whose lifetime is
//!   `tls-session-cache-timeout`, and a server-side cache of `tls-session-cache-size` TLS 1.2
//!   session IDs for clients that do not take tickets; `tls-session-caching no` disables both.
//! - Certificates are checked by webpki, which refuses X.509 v1 certificates (OpenSSL accepts them):
//!   a v1 client certificate goes to `tls_v1`, which checks it as OpenSSL would. Redis does not check the master's host name on the
//!   replica link, nor does Ferrodis; the chain is checked against the CA.
//!
//! Must not touch: the executor's state. The listeners (`listener`) decide when to hand a socket
//! to `acceptor()`.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, ProducesTickets, StoresServerSessions, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme,
    SupportedCipherSuite, SupportedProtocolVersion,
};

use crate::config::Config;

/// The most ciphertext a client's TLS session holds that the socket has not taken (rustls's
/// default is 64 KiB). Those bytes are memory no client's output figure shows, so they count
/// against maxmemory: a replica that stopped reading made its master evict keys when its
/// session filled up (unit/maxmemory's "replica buffer don't induce eviction" leaves 32 KiB of
/// room). OpenSSL, Redis's TLS, holds about one record the same way; 16 KiB is one record's
/// payload, and what does not fit stays in the connection's buffers, which are counted.
pub const SEND_BUFFER_LIMIT: usize = 16 * 1024;

/// The contexts new connections use, replaced whole by a successful configuration.
struct Contexts {
    acceptor: tokio_rustls::TlsAcceptor,
    connector: tokio_rustls::TlsConnector,
}

static CURRENT: RwLock<Option<Arc<Contexts>>> = RwLock::new(None);

/// A directive's CONFIG GET text.
fn opt(cfg: &Config, name: &str) -> String {
    crate::config::lookup(name).map(|d| cfg.get(d)).unwrap_or_default()
}

/// The TLS port (0: none).
pub fn port(cfg: &Config) -> u16 {
    opt(cfg, "tls-port").parse().unwrap_or(0)
}

/// Whether the configuration asks for TLS anywhere (a TLS port, replication or cluster bus), so
/// the contexts must be built, as Redis's `tlsConfigure` runs at startup in that case.
pub fn wanted(cfg: &Config) -> bool {
    port(cfg) != 0 || opt(cfg, "tls-replication") == "yes" || opt(cfg, "tls-cluster") == "yes"
}

/// Builds the contexts from `cfg` and makes them current. On failure the old ones stay, the
/// reason is logged as Redis logs it, and Err carries it.
pub fn configure(cfg: &Config) -> Result<(), String> {
    match build(cfg) {
        Ok(ctx) => {
            crate::executor::migrate_cache::set_tls_client(ctx.connector.config().clone());
            *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(ctx));
            Ok(())
        }
        Err(lines) => {
            for l in &lines {
                tracing::warn!("{l}");
            }
            Err(lines.join("; "))
        }
    }
}

/// Whether contexts have been built (by startup or a CONFIG SET).
pub fn configured() -> bool {
    CURRENT.read().unwrap_or_else(|p| p.into_inner()).is_some()
}

/// The server side of the current context (None until configured).
pub fn acceptor() -> Option<tokio_rustls::TlsAcceptor> {
    CURRENT.read().unwrap_or_else(|p| p.into_inner()).as_ref().map(|c| c.acceptor.clone())
}

/// The client side of the current context, for the replica link (None until configured).
pub fn connector() -> Option<tokio_rustls::TlsConnector> {
    CURRENT.read().unwrap_or_else(|p| p.into_inner()).as_ref().map(|c| c.connector.clone())
}

/// The server name a TLS client presents: the host as given (an IP address or a DNS name).
fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("invalid host name {host}: {e}"))
}

/// The replica link's connection to its master: plain TCP, or TLS with `tls-replication yes`.
pub enum ClientStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl ClientStream {
    /// Connects TLS over `tcp` when `tls`, presenting the client certificate and checking the
    /// master's chain against the CA.
    pub async fn start(tcp: TcpStream, host: &str, tls: bool) -> Result<ClientStream, String> {
        if !tls {
            return Ok(ClientStream::Plain(tcp));
        }
        let connector = connector().ok_or("TLS is not configured")?;
        let stream = connector.connect(server_name(host)?, tcp).await.map_err(|e| e.to_string())?;
        Ok(ClientStream::Tls(Box::new(stream)))
    }

    /// The TCP socket under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            ClientStream::Plain(s) => s,
            ClientStream::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A client's TLS stream, shared by its connection task (which locks it only inside each poll,
/// never across an await) and a busy script (`executor::handoff::PlainIo`).
pub struct SharedTls(pub Arc<Mutex<tokio_rustls::server::TlsStream<TcpStream>>>);

impl super::connection::Unsent for SharedTls {
    fn holds_unsent(&self) -> bool {
        self.lock().get_ref().1.wants_write()
    }
}

impl SharedTls {
    fn lock(&self) -> std::sync::MutexGuard<'_, tokio_rustls::server::TlsStream<TcpStream>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl AsyncRead for SharedTls {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.lock()).poll_read(cx, buf)
    }
}

impl AsyncWrite for SharedTls {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.lock()).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.lock()).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.lock()).poll_shutdown(cx)
    }
}

/// Non-blocking reads and writes on a socket's descriptor, for the TLS session to use while
/// the connection task is parked (its readiness state is unaffected: a read that finds nothing
/// later simply waits again).
struct RawSocket(std::os::fd::RawFd);

impl std::io::Read for RawSocket {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // SAFETY: recv writes at most `buf.len()` bytes into `buf`; the descriptor is the open
        // socket of a stream the caller holds locked.
        let n = unsafe { libc::recv(self.0, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_DONTWAIT) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl std::io::Write for RawSocket {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // SAFETY: send reads `buf.len()` bytes from `buf`; the descriptor is as for `read`.
        let n = unsafe {
            libc::send(self.0, buf.as_ptr() as *const libc::c_void, buf.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl crate::executor::handoff::PlainIo for tokio_rustls::server::TlsStream<TcpStream> {
    fn peek(&mut self) -> &[u8] {
        let (tcp, conn) = self.get_mut();
        let mut socket = RawSocket(std::os::fd::AsRawFd::as_raw_fd(tcp));
        while conn.wants_read() {
            match conn.read_tls(&mut socket) {
                Ok(n) if n > 0 && conn.process_new_packets().is_ok() => {}
                _ => break,
            }
        }
        conn.reader().into_first_chunk().unwrap_or(&[])
    }

    fn consume(&mut self, n: usize) {
        std::io::BufRead::consume(&mut self.get_mut().1.reader(), n);
    }

    fn send(&mut self, bytes: &[u8]) -> usize {
        let (tcp, conn) = self.get_mut();
        let mut socket = RawSocket(std::os::fd::AsRawFd::as_raw_fd(tcp));
        if std::io::Write::write_all(&mut conn.writer(), bytes).is_err() {
            return bytes.len();
        }
        while conn.wants_write() {
            match conn.write_tls(&mut socket) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
        bytes.len()
    }

    fn flush(&mut self) -> bool {
        let (tcp, conn) = self.get_mut();
        let mut socket = RawSocket(std::os::fd::AsRawFd::as_raw_fd(tcp));
        while conn.wants_write() {
            match conn.write_tls(&mut socket) {
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                // The peer is gone: nothing will ever be taken.
                _ => return true,
            }
        }
        true
    }
}

/// Whether a socket's first bytes can open a TLS handshake (a handshake record, 0x16). Anything
/// else, a plain-text client most often, is closed without a TLS alert: OpenSSL sends none for
/// "wrong version number" either, so such a client reads a closed connection, as from Redis.
pub async fn starts_handshake(stream: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 0x16)
}

fn io_reason(e: &std::io::Error) -> String {
    e.raw_os_error().map(crate::config::strerror).unwrap_or_else(|| e.to_string())
}

fn build(cfg: &Config) -> Result<Contexts, Vec<String>> {
    let one = |s: String| vec![s];
    let cert_file = opt(cfg, "tls-cert-file");
    let key_file = opt(cfg, "tls-key-file");
    if cert_file.is_empty() {
        return Err(one("No tls-cert-file configured!".into()));
    }
    if key_file.is_empty() {
        return Err(one("No tls-key-file configured!".into()));
    }
    let auth = opt(cfg, "tls-auth-clients");
    let ca_file = opt(cfg, "tls-ca-cert-file");
    let ca_dir = opt(cfg, "tls-ca-cert-dir");
    let needs_ca = auth != "no" || opt(cfg, "tls-replication") == "yes" || opt(cfg, "tls-cluster") == "yes";
    if needs_ca && ca_file.is_empty() && ca_dir.is_empty() {
        return Err(one("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, \
                        tls-replication or tls-auth-clients are enabled!"
            .into()));
    }
    let versions = protocols(&opt(cfg, "tls-protocols"))?;
    let mut suites = Vec::new();
    if versions.contains(&&rustls::version::TLS12) {
        let list = opt(cfg, "tls-ciphers");
        suites.extend(chosen_suites(&list, TLS12_SUITES, ciphers, ("ciphers", "cipher", "rustls, TLSv1.2"))?);
    }
    if versions.contains(&&rustls::version::TLS13) {
        let list = opt(cfg, "tls-ciphersuites");
        suites.extend(chosen_suites(&list, TLS13_SUITES, ciphersuites, ("ciphersuites", "suite", "rustls"))?);
    }
    let provider = Arc::new(ring_provider(suites));

    let certs = load_certs(&cert_file).map_err(|e| one(format!("Failed to load certificate: {cert_file}: {e}")))?;
    let key = load_key(&key_file, &opt(cfg, "tls-key-file-pass"))
        .map_err(|e| one(format!("Failed to load private key: {key_file}: {e}")))?;
    let client_cert_file = opt(cfg, "tls-client-cert-file");
    let client_key_file = opt(cfg, "tls-client-key-file");
    // Without a client certificate of its own, the server's serves as the replica link's.
    let (client_certs, client_key) = if client_cert_file.is_empty() || client_key_file.is_empty() {
        (certs.clone(), key.clone_key())
    } else {
        let c = load_certs(&client_cert_file)
            .map_err(|e| one(format!("Failed to load certificate: {client_cert_file}: {e}")))?;
        let k = load_key(&client_key_file, &opt(cfg, "tls-client-key-file-pass"))
            .map_err(|e| one(format!("Failed to load private key: {client_key_file}: {e}")))?;
        (c, k)
    };
    let server_key =
        certified(&provider, certs, key).map_err(|e| one(format!("Failed to load private key: {key_file}: {e}")))?;
    let client_key = certified(&provider, client_certs, client_key).map_err(|e| {
        let file = if client_key_file.is_empty() { &key_file } else { &client_key_file };
        one(format!("Failed to load private key: {file}: {e}"))
    })?;
    let dh = opt(cfg, "tls-dh-params-file");
    if !dh.is_empty() {
        let text = std::fs::read(&dh).map_err(|e| one(format!("Failed to load {dh}: {}", io_reason(&e))))?;
        if !String::from_utf8_lossy(&text).contains("-----BEGIN DH PARAMETERS-----") {
            return Err(one(format!("Failed to load DH params file: {dh}: no DH parameters found")));
        }
        tracing::debug!("tls-dh-params-file {dh} is not used: rustls key exchange is ECDHE only");
    }
    let roots = Arc::new(
        load_roots(&ca_file, &ca_dir)
            .map_err(|e| one(format!("Failed to configure CA certificate(s) file/directory: {e}")))?,
    );

    let client_auth = match auth.as_str() {
        "no" => WebPkiClientVerifier::no_client_auth(),
        mode => {
            let b = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
            let b = if mode == "optional" { b.allow_unauthenticated() } else { b };
            let webpki =
                b.build().map_err(|e| one(format!("Failed to configure CA certificate(s) file/directory: {e}")))?;
            Arc::new(super::tls_v1::AcceptV1 {
                inner: webpki,
                roots: roots.clone(),
                algorithms: provider.signature_verification_algorithms,
            })
        }
    };
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| one(format!("Failed to configure TLS protocols: {e}")))?
        .with_client_cert_verifier(client_auth)
        .with_cert_resolver(Arc::new(SingleCertAndKey::from(server_key)));
    server.ignore_client_order = opt(cfg, "tls-prefer-server-ciphers") == "yes";
    if opt(cfg, "tls-session-caching") == "yes" {
        let size = opt(cfg, "tls-session-cache-size").parse().unwrap_or(20480);
        let timeout = opt(cfg, "tls-session-cache-timeout").parse().unwrap_or(300);
        server.session_storage = Arc::new(SessionCache::new(size, Duration::from_secs(timeout)));
        let tickets = rustls::crypto::ring::Ticketer::new()
            .map_err(|e| one(format!("Failed to configure TLS session tickets: {e}")))?;
        server.ticketer =
            Arc::new(TimedTickets { inner: tickets, lifetime: u32::try_from(timeout).unwrap_or(u32::MAX) });
    } else {
        server.session_storage = Arc::new(NoServerSessionStorage {});
        server.send_tls13_tickets = 0;
    }

    let verifier = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| one(format!("Failed to configure CA certificate(s) file/directory: {e}")))?;
    let algorithms = provider.signature_verification_algorithms;
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| one(format!("Failed to configure TLS protocols: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly { webpki: verifier, roots: roots.clone(), algorithms }))
        .with_client_cert_resolver(Arc::new(SingleCertAndKey::from(client_key)));
    Ok(Contexts {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
        connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
    })
}

/// ring's provider with the chosen suites. rustls 0.23.48 deprecates ring's `default_provider` for
/// lacking post-quantum hybrid key exchange (X25519MLKEM768, aws-lc-rs only); OpenSSL 3.0, which
/// Redis 7.0 links, does not offer it either, so nothing Redis clients negotiate is lost.
#[allow(deprecated)]
fn ring_provider(suites: Vec<SupportedCipherSuite>) -> CryptoProvider {
    CryptoProvider { cipher_suites: suites, ..rustls::crypto::ring::default_provider() }
}

/// A certificate chain with its key, checked to belong together where webpki can read the
/// certificate. (rustls's own builders refuse a certificate webpki cannot parse, an X.509 v1 one
/// for instance, which OpenSSL serves; so the pair is built here and handed over as a resolver.)
fn certified(
    provider: &CryptoProvider,
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>, String> {
    let signing = provider.key_provider.load_private_key(key).map_err(|e| e.to_string())?;
    let pair = CertifiedKey::new(certs, signing);
    if let Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) = pair.keys_match() {
        return Err("key values mismatch".into());
    }
    Ok(Arc::new(pair))
}

/// `tls-protocols`: Redis's words (case-insensitive, space-separated); empty means TLSv1.2 and
/// TLSv1.3, as in Redis.
fn protocols(text: &str) -> Result<Vec<&'static SupportedProtocolVersion>, Vec<String>> {
    let mut out = Vec::new();
    let mut dropped = Vec::new();
    if text.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS12, &rustls::version::TLS13]);
    }
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => dropped.push(word),
            "tlsv1.2" => out.push(&rustls::version::TLS12),
            "tlsv1.3" => out.push(&rustls::version::TLS13),
            _ => {
                return Err(vec!["Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', \
                                 'TLSv1.2' and 'TLSv1.3'."
                    .into()])
            }
        }
    }
    if out.is_empty() {
        return Err(vec![format!(
            "tls-protocols: {} not supported by this build (rustls speaks TLSv1.2 and TLSv1.3 only)",
            dropped.join(" ")
        )]);
    }
    if !dropped.is_empty() {
        tracing::warn!("tls-protocols: {} ignored (rustls speaks TLSv1.2 and TLSv1.3 only)", dropped.join(" "));
    }
    out.dedup();
    Ok(out)
}

/// A suite with its OpenSSL name and the OpenSSL keywords that select it (besides the name).
struct Suite {
    name: &'static str,
    suite: SupportedCipherSuite,
    tags: &'static str,
}

/// The TLS 1.2 suites rustls offers, in its order of preference.
static TLS12_SUITES: &[Suite] = {
    use rustls::crypto::ring::cipher_suite::*;
    &[
        Suite {
            name: "ECDHE-ECDSA-AES256-GCM-SHA384",
            suite: TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            tags: "aECDSA ECDSA AESGCM AES AES256 SHA384",
        },
        Suite {
            name: "ECDHE-ECDSA-AES128-GCM-SHA256",
            suite: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            tags: "aECDSA ECDSA AESGCM AES AES128 SHA256",
        },
        Suite {
            name: "ECDHE-ECDSA-CHACHA20-POLY1305",
            suite: TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            tags: "aECDSA ECDSA CHACHA20 SHA256",
        },
        Suite {
            name: "ECDHE-RSA-AES256-GCM-SHA384",
            suite: TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            tags: "aRSA RSA AESGCM AES AES256 SHA384",
        },
        Suite {
            name: "ECDHE-RSA-AES128-GCM-SHA256",
            suite: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            tags: "aRSA RSA AESGCM AES AES128 SHA256",
        },
        Suite {
            name: "ECDHE-RSA-CHACHA20-POLY1305",
            suite: TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            tags: "aRSA RSA CHACHA20 SHA256",
        },
    ]
};

/// Keywords that select every TLS 1.2 suite above.
const TLS12_COMMON: &[&str] =
    &["ALL", "DEFAULT", "HIGH", "TLSv1.2", "ECDHE", "EECDH", "kECDHE", "kEECDH", "AEAD", "SECURE128", "SUITEB128"];

/// The TLS 1.3 suites rustls offers (their names are the same in OpenSSL).
static TLS13_SUITES: &[Suite] = {
    use rustls::crypto::ring::cipher_suite::*;
    &[
        Suite { name: "TLS_AES_256_GCM_SHA384", suite: TLS13_AES_256_GCM_SHA384, tags: "" },
        Suite { name: "TLS_AES_128_GCM_SHA256", suite: TLS13_AES_128_GCM_SHA256, tags: "" },
        Suite { name: "TLS_CHACHA20_POLY1305_SHA256", suite: TLS13_CHACHA20_POLY1305_SHA256, tags: "" },
    ]
};

/// The suites a `tls-<directive>` list selects among `offered` (all of them for an empty list);
/// selecting none is refused, naming the directive. `words`: the directive's suffix, what it
/// lists, and what offers them (for the error).
fn chosen_suites(
    list: &str,
    offered: &[Suite],
    parse: fn(&str) -> Vec<SupportedCipherSuite>,
    words: (&str, &str, &str),
) -> Result<Vec<SupportedCipherSuite>, Vec<String>> {
    let chosen = if list.is_empty() { offered.iter().map(|s| s.suite).collect() } else { parse(list) };
    if chosen.is_empty() {
        let (directive, noun, offerer) = words;
        return Err(vec![
            format!("Failed to configure {directive}: {list}"),
            format!("tls-{directive}: '{list}' selects no {noun} this build offers ({offerer}: {})", names(offered)),
        ]);
    }
    Ok(chosen)
}

fn names(suites: &[Suite]) -> String {
    suites.iter().map(|s| s.name).collect::<Vec<_>>().join(":")
}

/// The TLS 1.2 suites an element of an OpenSSL cipher string selects: a name or keyword, or
/// several joined by `+` (all must apply).
fn selected(element: &str) -> Vec<usize> {
    (0..TLS12_SUITES.len())
        .filter(|&i| {
            let s = &TLS12_SUITES[i];
            element
                .split('+')
                .all(|part| part == s.name || TLS12_COMMON.contains(&part) || s.tags.split(' ').any(|t| t == part))
        })
        .collect()
}

/// `tls-ciphers` read as OpenSSL reads a cipher string (`:`, `,` or space separated; `!` removes
/// for good, `-` removes, `+` moves to the end, `@...` directives ignored), over the suites rustls
/// has. Unknown names select nothing, as in OpenSSL.
fn ciphers(list: &str) -> Vec<SupportedCipherSuite> {
    let mut chosen: Vec<usize> = Vec::new();
    let mut banned: Vec<usize> = Vec::new();
    for element in list.split([':', ',', ' ']).filter(|e| !e.is_empty()) {
        let (op, body) = match element.as_bytes()[0] {
            b'!' | b'-' | b'+' => (element.as_bytes()[0], &element[1..]),
            _ => (0, element),
        };
        if body.starts_with('@') {
            continue;
        }
        let set = selected(body);
        match op {
            b'!' => {
                chosen.retain(|i| !set.contains(i));
                banned.extend(set);
            }
            b'-' => chosen.retain(|i| !set.contains(i)),
            b'+' => {
                let (moved, kept): (Vec<usize>, Vec<usize>) = chosen.iter().partition(|i| set.contains(i));
                chosen = kept;
                chosen.extend(moved);
            }
            _ => {
                if set.is_empty() {
                    tracing::debug!("tls-ciphers: {body} is not available (rustls), ignored");
                }
                for i in set {
                    if !chosen.contains(&i) && !banned.contains(&i) {
                        chosen.push(i);
                    }
                }
            }
        }
    }
    chosen.into_iter().map(|i| TLS12_SUITES[i].suite).collect()
}

/// `tls-ciphersuites`: TLS 1.3 suite names separated by `:`; names rustls lacks are ignored.
fn ciphersuites(list: &str) -> Vec<SupportedCipherSuite> {
    let mut out = Vec::new();
    for name in list.split(':').filter(|n| !n.is_empty()) {
        match TLS13_SUITES.iter().find(|s| s.name == name) {
            Some(s) if !out.contains(&s.suite) => out.push(s.suite),
            Some(_) => {}
            None => tracing::debug!("tls-ciphersuites: {name} is not available (rustls), ignored"),
        }
    }
    out
}

fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| io_reason(&e))?;
    let certs = CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate found".into());
    }
    Ok(certs)
}

/// A private key in PEM (PKCS#1, PKCS#8 or SEC1), or an encrypted PKCS#8 key opened with `pass`.
fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = std::fs::read(path).map_err(|e| io_reason(&e))?;
    let text = String::from_utf8_lossy(&pem);
    const ENC_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const ENC_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    if let Some(start) = text.find(ENC_BEGIN) {
        let end = text[start..].find(ENC_END).map(|e| start + e + ENC_END.len()).ok_or("truncated PEM key")?;
        if pass.is_empty() {
            return Err("the key is encrypted and tls-key-file-pass is not set".into());
        }
        let (_, doc) = pkcs8::SecretDocument::from_pem(&text[start..end]).map_err(|e| e.to_string())?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes()).map_err(|e| e.to_string())?;
        let plain = info.decrypt(pass.as_bytes()).map_err(|_| "bad decrypt".to_string())?;
        return Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()));
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err("legacy encrypted PEM keys are not supported; convert it with `openssl pkcs8 -topk8`".into());
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| e.to_string())
}

/// The trusted CAs: every certificate of the file, and of each file in the directory.
fn load_roots(file: &str, dir: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if !file.is_empty() {
        for cert in load_certs(file)? {
            roots.add(cert).map_err(|e| e.to_string())?;
        }
    }
    if !dir.is_empty() {
        let entries = std::fs::read_dir(dir).map_err(|e| io_reason(&e))?;
        for entry in entries.flatten() {
            if let Ok(pem) = std::fs::read(entry.path()) {
                let certs = CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok);
                roots.add_parsable_certificates(certs);
            }
        }
    }
    Ok(roots)
}

/// Checks a server's certificate chain against the CA but not its name, as Redis's replica link
/// and cluster bus (OpenSSL with SSL_VERIFY_PEER and no host check) do; a version 1 certificate
/// goes to `tls_v1`.
#[derive(Debug)]
struct ChainOnly {
    webpki: Arc<WebPkiServerVerifier>,
    roots: Arc<RootCertStore>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the chain before the name: a name error means the chain is good.
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            Err(refused) => match super::tls_v1::verify_certificate(end_entity, &self.roots, &self.algorithms, now) {
                Some(v1) => v1.map(|()| ServerCertVerified::assertion()),
                None => Err(refused),
            },
            verified => verified,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::tls_v1::handshake_signature(cert, message, dss, &self.algorithms, false)
            .unwrap_or_else(|| self.webpki.verify_tls12_signature(message, cert, dss))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::tls_v1::handshake_signature(cert, message, dss, &self.algorithms, true)
            .unwrap_or_else(|| self.webpki.verify_tls13_signature(message, cert, dss))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Session tickets as OpenSSL issues them: stateless (the session is sealed into the ticket under a
/// key the server rotates), with `tls-session-cache-timeout` as the lifetime clients are told.
/// Stateless matters beyond resumption: a stateful TLS 1.3 ticket keeps the session (client
/// certificate chain included) in server memory for every connection ever made, which Redis, whose
/// OpenSSL tickets are stateless, never holds.
#[derive(Debug)]
struct TimedTickets {
    inner: Arc<dyn ProducesTickets>,
    lifetime: u32,
}

impl ProducesTickets for TimedTickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.lifetime
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.inner.decrypt(cipher)
    }
}

/// The server's session cache: at most `size` sessions (0: no limit, as OpenSSL's cache size),
/// each forgotten `timeout` after it was stored.
#[derive(Debug)]
struct SessionCache {
    size: usize,
    timeout: Duration,
    inner: Mutex<SessionMap>,
}

#[derive(Debug, Default)]
struct SessionMap {
    map: HashMap<Vec<u8>, (Vec<u8>, Instant)>,
    /// Keys in insertion order (a key may be stale: removed or replaced since).
    order: VecDeque<(Vec<u8>, Instant)>,
}

impl SessionCache {
    fn new(size: usize, timeout: Duration) -> SessionCache {
        SessionCache { size, timeout, inner: Mutex::new(SessionMap::default()) }
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let now = Instant::now();
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        // Forget what expired, then the oldest while full.
        while let Some((k, at)) = s.order.front().cloned() {
            let live = s.map.get(&k).is_some_and(|(_, t)| *t == at);
            let expired = now.duration_since(at) >= self.timeout;
            let full = self.size != 0 && s.map.len() >= self.size;
            if live && !expired && !full {
                break;
            }
            s.order.pop_front();
            if live {
                s.map.remove(&k);
            }
        }
        s.order.push_back((key.clone(), now));
        s.map.insert(key, (value, now));
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        s.map.get(key).filter(|(_, at)| at.elapsed() < self.timeout).map(|(v, _)| v.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        s.map.remove(key).filter(|(_, at)| at.elapsed() < self.timeout).map(|(v, _)| v)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite_names(v: &[SupportedCipherSuite]) -> Vec<&'static str> {
        v.iter().map(|s| TLS12_SUITES.iter().find(|x| x.suite == *s).map_or("?", |x| x.name)).collect()
    }

    #[test]
    fn cipher_strings_as_openssl_reads_them() {
        assert_eq!(ciphers("DEFAULT").len(), 6);
        assert_eq!(ciphers("DEFAULT:-AES128-SHA256").len(), 6);
        assert!(ciphers("AES128-SHA256:AES256-SHA256").is_empty());
        assert_eq!(
            suite_names(&ciphers("ECDHE+AESGCM:!aECDSA")),
            ["ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES128-GCM-SHA256"]
        );
        assert_eq!(
            suite_names(&ciphers("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305:+AES128")),
            ["ECDHE-RSA-CHACHA20-POLY1305", "ECDHE-RSA-AES128-GCM-SHA256"]
        );
        assert!(ciphers("!ALL:HIGH").is_empty());
        assert_eq!(ciphersuites("TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256").len(), 1);
    }

    #[test]
    fn protocol_words() {
        assert_eq!(protocols("").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocols("tlsv1 TLSv1.3").unwrap().len(), 1);
        assert!(protocols("TLSv1 TLSv1.1").is_err());
        assert!(protocols("TLSv1.4").unwrap_err()[0].starts_with("Invalid tls-protocols specified."));
    }

    #[test]
    fn session_cache_limits() {
        let c = SessionCache::new(2, Duration::from_secs(60));
        for k in [b"a", b"b", b"c"] {
            c.put(k.to_vec(), k.to_vec());
        }
        assert!(c.get(b"a").is_none());
        assert_eq!(c.get(b"c"), Some(b"c".to_vec()));
        let c = SessionCache::new(0, Duration::from_millis(0));
        c.put(b"a".to_vec(), b"1".to_vec());
        assert!(c.get(b"a").is_none());
    }
}
