//! X.509 version 1 certificates, which OpenSSL (and so Redis) accepts and webpki refuses:
//! `openssl x509 -req` without extensions makes one, as Redis's own gen-test-certs.sh does for
//! the "generic" certificate a replica presents when it has no client certificate of its own.
//!
//! `AcceptV1` wraps the webpki verifier and is asked only when webpki refused a certificate that
//! is version 1: such a certificate is accepted when a configured CA signed it directly (the
//! signature checked with the crypto provider's algorithms, as webpki checks it) and `now` is
//! within its validity. A version 1 certificate has no extensions, so there is nothing else to
//! check, and it cannot be a CA, so a chain through intermediates is not looked for. Handshake
//! signatures made with its key are checked against its subjectPublicKeyInfo the same way.
//! `verify_certificate` and `handshake_signature` do the same for a server's certificate, for
//! the client side (the replica link, the cluster bus).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

/// A client verifier that also accepts version 1 certificates issued by a configured CA.
#[derive(Debug)]
pub struct AcceptV1 {
    pub inner: Arc<dyn ClientCertVerifier>,
    pub roots: Arc<RootCertStore>,
    pub algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AcceptV1 {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let refused = match self.inner.verify_client_cert(end_entity, intermediates, now) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        let Some(cert) = V1Cert::parse(end_entity) else { return Err(refused) };
        cert.verify(&self.roots, &self.algorithms, now)?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        handshake_signature(cert, message, dss, &self.algorithms, false)
            .unwrap_or_else(|| self.inner.verify_tls12_signature(message, cert, dss))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        handshake_signature(cert, message, dss, &self.algorithms, true)
            .unwrap_or_else(|| self.inner.verify_tls13_signature(message, cert, dss))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A server's certificate that webpki refused, checked as a client certificate is above (the
/// replica link and the cluster bus dial servers whose certificate may be version 1, as
/// gen-test-certs.sh's "generic" one is): None when `der` is not version 1.
pub fn verify_certificate(
    der: &CertificateDer<'_>,
    roots: &RootCertStore,
    algorithms: &WebPkiSupportedAlgorithms,
    now: UnixTime,
) -> Option<Result<(), rustls::Error>> {
    V1Cert::parse(der).map(|cert| cert.verify(roots, algorithms, now))
}

/// A handshake signature made with a version 1 certificate's key: None when `der` is not version 1.
pub fn handshake_signature(
    der: &CertificateDer<'_>,
    message: &[u8],
    dss: &DigitallySignedStruct,
    algorithms: &WebPkiSupportedAlgorithms,
    tls13: bool,
) -> Option<Result<HandshakeSignatureValid, rustls::Error>> {
    let cert = V1Cert::parse(der)?;
    // TLS 1.3 allows no PKCS#1 v1.5 handshake signatures.
    let pkcs1 = matches!(
        dss.scheme,
        SignatureScheme::RSA_PKCS1_SHA256 | SignatureScheme::RSA_PKCS1_SHA384 | SignatureScheme::RSA_PKCS1_SHA512
    );
    if tls13 && pkcs1 {
        return Some(Err(rustls::Error::PeerMisbehaved(
            rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
        )));
    }
    Some(cert.verify_handshake(message, dss, algorithms))
}

/// One DER element: its tag, its content, and the whole encoding.
struct Element<'a> {
    tag: u8,
    content: &'a [u8],
    whole: &'a [u8],
}

/// Reads the first element of `input`; returns it and what follows. Only the definite-length
/// single-byte-tag forms DER allows.
fn element(input: &[u8]) -> Option<(Element<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    let header = input.len() - rest.len();
    let element = Element { tag, content: &rest[..len], whole: &input[..header + len] };
    Some((element, &rest[len..]))
}

/// Reads an element with tag `tag`.
fn expect(input: &[u8], tag: u8) -> Option<(Element<'_>, &[u8])> {
    element(input).filter(|(e, _)| e.tag == tag)
}

const SEQUENCE: u8 = 0x30;
const BIT_STRING: u8 = 0x03;
const INTEGER: u8 = 0x02;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0] EXPLICIT Version`: present in version 2 and 3 certificates only.
const VERSION_TAG: u8 = 0xa0;

/// The parts of a version 1 certificate its verification reads.
struct V1Cert<'a> {
    tbs: &'a [u8],
    signature_alg: &'a [u8],
    signature: &'a [u8],
    issuer: Element<'a>,
    not_before: u64,
    not_after: u64,
    /// The subjectPublicKeyInfo's algorithm (content) and key bits.
    key_alg: &'a [u8],
    key: &'a [u8],
}

impl<'a> V1Cert<'a> {
    /// The certificate's parts when it is a well-formed version 1 certificate.
    fn parse(der: &'a [u8]) -> Option<V1Cert<'a>> {
        let (cert, rest) = expect(der, SEQUENCE)?;
        if !rest.is_empty() {
            return None;
        }
        let (tbs, after) = expect(cert.content, SEQUENCE)?;
        let (signature_alg, after) = expect(after, SEQUENCE)?;
        let (signature, after) = expect(after, BIT_STRING)?;
        if !after.is_empty() {
            return None;
        }
        let fields = tbs.content;
        if fields.first() == Some(&VERSION_TAG) {
            return None;
        }
        let (_serial, fields) = expect(fields, INTEGER)?;
        let (inner_alg, fields) = expect(fields, SEQUENCE)?;
        if inner_alg.content != signature_alg.content {
            return None;
        }
        let (issuer, fields) = expect(fields, SEQUENCE)?;
        let (validity, fields) = expect(fields, SEQUENCE)?;
        let (_subject, fields) = expect(fields, SEQUENCE)?;
        let (spki, fields) = expect(fields, SEQUENCE)?;
        // A version 1 certificate ends with its key: unique identifiers and extensions came later.
        if !fields.is_empty() {
            return None;
        }
        let (not_before, times) = element(validity.content)?;
        let (not_after, _) = element(times)?;
        let (key_alg, key_rest) = expect(spki.content, SEQUENCE)?;
        let (key_bits, _) = expect(key_rest, BIT_STRING)?;
        Some(V1Cert {
            tbs: tbs.whole,
            signature_alg: signature_alg.content,
            signature: bits(signature.content)?,
            issuer,
            not_before: time(&not_before)?,
            not_after: time(&not_after)?,
            key_alg: key_alg.content,
            key: bits(key_bits.content)?,
        })
    }

    /// Issued by one of `roots`, signed by its key, and valid at `now`.
    fn verify(
        &self,
        roots: &RootCertStore,
        algorithms: &WebPkiSupportedAlgorithms,
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let now = now.as_secs();
        if now < self.not_before {
            return Err(CertificateError::NotValidYet.into());
        }
        if now > self.not_after {
            return Err(CertificateError::Expired.into());
        }
        let issuers = roots.roots.iter().filter(|anchor| {
            let subject: &[u8] = anchor.subject.as_ref();
            subject == self.issuer.content || subject == self.issuer.whole
        });
        for anchor in issuers {
            let Some(spki) = anchor_spki(anchor.subject_public_key_info.as_ref()) else { continue };
            let signed = algorithms.all.iter().any(|alg| {
                alg.signature_alg_id().as_ref() == self.signature_alg
                    && alg.public_key_alg_id().as_ref() == spki.0
                    && alg.verify_signature(spki.1, self.tbs, self.signature).is_ok()
            });
            if signed {
                return Ok(());
            }
        }
        Err(CertificateError::UnknownIssuer.into())
    }

    /// A handshake signature made with this certificate's key.
    fn verify_handshake(
        &self,
        message: &[u8],
        dss: &DigitallySignedStruct,
        algorithms: &WebPkiSupportedAlgorithms,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let candidates = algorithms.mapping.iter().filter(|(scheme, _)| *scheme == dss.scheme).flat_map(|(_, a)| *a);
        for alg in candidates.filter(|alg| alg.public_key_alg_id().as_ref() == self.key_alg) {
            if alg.verify_signature(self.key, message, dss.signature()).is_ok() {
                return Ok(HandshakeSignatureValid::assertion());
            }
        }
        Err(rustls::Error::InvalidCertificate(CertificateError::BadSignature))
    }
}

/// A trust anchor's subjectPublicKeyInfo (stored with or without its SEQUENCE header) as its
/// algorithm's content and its key bits.
fn anchor_spki(stored: &[u8]) -> Option<(&[u8], &[u8])> {
    let body = match expect(stored, SEQUENCE) {
        Some((spki, rest)) if rest.is_empty() && expect(spki.content, SEQUENCE).is_some() => spki.content,
        _ => stored,
    };
    let (alg, rest) = expect(body, SEQUENCE)?;
    let (key, _) = expect(rest, BIT_STRING)?;
    Some((alg.content, bits(key.content)?))
}

/// A BIT STRING's bytes; keys and signatures use whole bytes only.
fn bits(content: &[u8]) -> Option<&[u8]> {
    match content.split_first() {
        Some((0, bytes)) => Some(bytes),
        _ => None,
    }
}

/// A UTCTime (YYMMDDHHMMSSZ, years 1950-2049) or GeneralizedTime (YYYYMMDDHHMMSSZ) as Unix
/// seconds.
fn time(e: &Element<'_>) -> Option<u64> {
    let text = e.content;
    let (year, rest) = match (e.tag, text.len()) {
        (UTC_TIME, 13) => {
            let yy = digits(&text[..2])?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &text[2..])
        }
        (GENERALIZED_TIME, 15) => (digits(&text[..4])?, &text[4..]),
        _ => return None,
    };
    if rest[10] != b'Z' {
        return None;
    }
    let (month, day) = (digits(&rest[0..2])?, digits(&rest[2..4])?);
    let (hour, minute, second) = (digits(&rest[4..6])?, digits(&rest[6..8])?, digits(&rest[8..10])?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

fn digits(text: &[u8]) -> Option<u64> {
    text.iter().try_fold(0u64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + u64::from(c - b'0')))
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm); None
/// before 1970.
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let y = if month <= 2 { year.checked_sub(1)? } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_unix_seconds() {
        let utc = Element { tag: UTC_TIME, content: b"700101000000Z", whole: b"" };
        assert_eq!(time(&utc), Some(0));
        let utc = Element { tag: UTC_TIME, content: b"261205031431Z", whole: b"" };
        assert_eq!(time(&utc), Some(1_796_440_471));
        let general = Element { tag: GENERALIZED_TIME, content: b"20500101000000Z", whole: b"" };
        assert_eq!(time(&general), Some(2_524_608_000));
        let bad = Element { tag: UTC_TIME, content: b"7001010000001", whole: b"" };
        assert_eq!(time(&bad), None);
    }

    #[test]
    fn truncated_or_oversized_lengths_are_refused() {
        assert!(element(&[0x30, 0x05, 1, 2]).is_none());
        assert!(element(&[0x30, 0x85, 1, 1, 1, 1, 1]).is_none());
        assert!(element(&[0x30]).is_none());
        let (e, rest) = element(&[0x02, 0x01, 7, 9]).unwrap();
        assert_eq!((e.tag, e.content, rest), (0x02, &[7u8][..], &[9u8][..]));
        assert!(V1Cert::parse(&[0x30, 0x00]).is_none());
    }
}
