//! What a failure means to the person who ran the command, in one sentence.
//!
//! Errors from below (the kernel, rustls) name what they saw ("peer closed connection without
//! sending TLS close_notify", "received fatal alert: CertificateRequired"), often with a link to
//! a library's manual. A user wants to know what happened and what to do; these functions find
//! the cause in an error's chain and say that.

use std::io;

use rustls::AlertDescription;

/// The rustls error somewhere in `e`'s chain (tokio-rustls wraps it in an `io::Error`).
fn rustls_error(e: &anyhow::Error) -> Option<&rustls::Error> {
    e.chain().find_map(|c| {
        c.downcast_ref::<rustls::Error>().or_else(|| {
            c.downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        })
    })
}

/// What a TLS failure means for a sender, if `e` is one: the receiver wants a client
/// certificate, did not accept ours, or its own certificate is not trusted.
pub(crate) fn tls_failure(e: &anyhow::Error) -> Option<String> {
    Some(match rustls_error(e)? {
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the receiver requires a client certificate (it runs with --client-ca): pass \
             --client-cert and --client-key"
                .into()
        }
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::DecryptError
            | AlertDescription::CertificateUnknown
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateRevoked
            | AlertDescription::AccessDenied,
        ) => "the receiver did not accept the client certificate: it must be signed by the CA \
              the receiver trusts (its --client-ca) and still valid"
            .into(),
        rustls::Error::InvalidCertificate(why) => untrusted(why),
        other => format!(
            "the TLS handshake failed: {}",
            without_urls(&other.to_string())
        ),
    })
}

/// Why the receiver's certificate was not trusted, in words (rustls's own `Debug` form, e.g.
/// `NotValidForNameContext { expected: DnsName(..), .. }`, means nothing to a user).
fn untrusted(why: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    match why {
        C::NotValidForNameContext {
            expected,
            presented,
        } => {
            let name = expected.to_str();
            let valid = match presented.as_slice() {
                [] => "no name".to_string(),
                names => names.join(", "),
            };
            format!(
                "the receiver's certificate is valid for {valid}, not for {name}: connect by a \
                 name it is valid for (--to, or --server-name), or give the receiver a \
                 certificate for {name} (sieve certs server --name {name})"
            )
        }
        C::NotValidForName => "the receiver's certificate is not valid for the name used: \
             connect by a name it is valid for (--to, or --server-name)"
            .into(),
        C::UnknownIssuer | C::BadSignature => "the receiver's certificate is not signed by the \
             CA in --ca: give the CA that signed it (its ca.pem)"
            .into(),
        C::Expired | C::ExpiredContext { .. } => "the receiver's certificate has expired: \
             give it a new one (or check this machine's clock)"
            .into(),
        C::NotValidYet | C::NotValidYetContext { .. } => "the receiver's certificate is not \
             valid yet: check the clocks of both machines"
            .into(),
        C::Revoked => "the receiver's certificate has been revoked".into(),
        other => format!(
            "the receiver's certificate is not trusted ({other}): check that --ca is the CA \
             that signed it and that it is valid for the name used (--to, or --server-name)"
        ),
    }
}

/// What a lost connection means: the peer closed or reset it, or something else went wrong
/// (said without library links).
pub(crate) fn connection_lost(e: &anyhow::Error, peer: &str) -> String {
    if let Some(t) = tls_failure(e).filter(|_| !is_eof(e)) {
        return t;
    }
    let io = e.chain().find_map(|c| c.downcast_ref::<io::Error>());
    match io.map(|io| io.kind()) {
        Some(io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe) => {
            format!("{peer} closed the connection (it stopped or was stopped)")
        }
        Some(io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted) => {
            format!("{peer} reset the connection (it stopped or was stopped)")
        }
        _ if is_eof(e) => format!("{peer} closed the connection (it stopped or was stopped)"),
        _ => format!(
            "the connection to {peer} failed: {}",
            without_urls(&format!("{e:#}"))
        ),
    }
}

/// Whether the chain says the stream ended (including rustls's "closed without close_notify").
fn is_eof(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::UnexpectedEof)
            || c.to_string().contains("closed the connection")
            || c.to_string().contains("closed inside a frame")
    })
}

/// `s` without links to manuals (`: https://...` and the like), which help a developer of the
/// library, not a user of this program.
pub fn without_urls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, word) in s.split(' ').enumerate() {
        if word.starts_with("https://") || word.starts_with("http://") {
            continue;
        }
        if i > 0 && !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out.trim_end_matches([':', ' ']).replace(": :", ":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_dropped() {
        assert_eq!(
            without_urls(
                "reading a frame header: peer closed connection without sending TLS \
                 close_notify: https://docs.rs/rustls/latest/rustls/manual/_03_howto/index.html#unexpected-eof"
            ),
            "reading a frame header: peer closed connection without sending TLS close_notify"
        );
        assert_eq!(without_urls("plain words"), "plain words");
    }

    #[test]
    fn tls_alerts_say_what_to_do() {
        let required = anyhow::Error::new(io::Error::other(rustls::Error::AlertReceived(
            AlertDescription::CertificateRequired,
        )));
        assert!(tls_failure(&required).unwrap().contains("--client-cert"));
        let refused =
            anyhow::Error::new(rustls::Error::AlertReceived(AlertDescription::DecryptError))
                .context("reading SESSION");
        assert!(tls_failure(&refused)
            .unwrap()
            .contains("did not accept the client certificate"));
        assert!(tls_failure(&anyhow::anyhow!("nothing to do with TLS")).is_none());
    }

    #[test]
    fn an_untrusted_certificate_is_explained_in_words() {
        let wrong_name = anyhow::Error::new(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForNameContext {
                expected: rustls::pki_types::ServerName::try_from("files.example")
                    .unwrap()
                    .to_owned(),
                presented: vec!["localhost".into(), "127.0.0.1".into()],
            },
        ));
        let s = tls_failure(&wrong_name).unwrap();
        assert_eq!(
            s,
            "the receiver's certificate is valid for localhost, 127.0.0.1, not for \
             files.example: connect by a name it is valid for (--to, or --server-name), or give \
             the receiver a certificate for files.example (sieve certs server --name \
             files.example)"
        );
        assert!(!s.contains('{') && !s.contains("DnsName"), "{s}");
        let unknown = anyhow::Error::new(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        assert!(tls_failure(&unknown)
            .unwrap()
            .contains("not signed by the CA in --ca"));
    }

    #[test]
    fn a_closed_connection_is_one_plain_sentence() {
        let eof = anyhow::Error::new(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "peer closed connection without sending TLS close_notify: https://docs.rs/x",
        ))
        .context("reading a frame header");
        let s = connection_lost(&eof, "the receiver");
        assert_eq!(
            s,
            "the receiver closed the connection (it stopped or was stopped)"
        );
        assert!(!s.contains("https://"));
    }
}
