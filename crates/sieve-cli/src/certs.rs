//! `sieve certs`: a development CA and certificates, so the first run needs nothing else; and
//! further client and server certificates from that CA, so that adding a sender or a receiver
//! never replaces the CA that running peers trust.
//!
//! Files are never replaced without `--force`, and every file is written to a new temporary
//! file beside it and renamed into place ([`crate::output`]): a key is never readable by others
//! (0600 from its creation, whatever was there before). `--force` replaces regular files only: a
//! symbolic link to a file or a folder under a certificate's name is refused before anything is
//! written (never followed, never replaced), and a character device or a pipe is written
//! through.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, KeyIdMethod, KeyPair, KeyUsagePurpose,
};

use crate::output::Output;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: Option<What>,
    /// Folder of the CA and certificates (a new CA writes ca.pem, ca.key, server.pem,
    /// server.key, and with --client client.pem, client.key).
    #[arg(long, default_value = "certs", global = true)]
    pub dir: PathBuf,
    /// Extra names (DNS names or IP addresses) the server certificate is valid for, besides
    /// localhost, 127.0.0.1 and ::1. Repeat or separate with commas.
    #[arg(long = "name", value_delimiter = ',')]
    pub names: Vec<String>,
    /// Also write a client certificate for mutual TLS (`sieve serve --client-ca DIR/ca.pem`).
    #[arg(long)]
    pub client: bool,
    /// Replace files that exist. Replacing the CA breaks every receiver and sender that trusts
    /// the old one; to add a sender or a receiver, issue a certificate from the existing CA with
    /// `sieve certs client NAME` or `sieve certs server --name HOST` instead.
    #[arg(long, global = true)]
    pub force: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Issue a client certificate (mutual TLS) from the CA in --dir: writes DIR/NAME.pem and
    /// DIR/NAME.key, with NAME as the certificate's common name.
    Client {
        /// Letters, digits, '.', '-', '_' or '@' (it names the files, and with `sieve serve
        /// --per-client-dirs` the client's folder).
        name: String,
    },
    /// Issue a server certificate from the CA in --dir for the names given with --name (and
    /// only those): writes DIR/server.pem and DIR/server.key, or DIR/OUT.pem and DIR/OUT.key.
    Server {
        /// DNS names or IP addresses the receiver is reached by. Repeat or separate with commas.
        #[arg(long = "name", value_delimiter = ',', required = true)]
        names: Vec<String>,
        /// Base name of the files to write, for a further receiver (default: server).
        #[arg(long, default_value = "server")]
        out: String,
    },
}

/// The names every certificate of a new CA's receiver is valid for.
const LOCAL_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

pub fn run(args: &Args) -> Result<()> {
    let d = args.dir.display();
    if args.what.is_some() && (args.client || !args.names.is_empty()) {
        bail!(
            "--client and --name before `client` or `server` apply to a new CA; give a server's \
             names after `server` (sieve certs server --name HOST)"
        );
    }
    match &args.what {
        None => {
            let names = make_with(&args.dir, &args.names, args.client, args.force)?;
            let mut wrote = format!(
                "wrote a development CA (ca.pem, ca.key) and a receiver certificate (server.pem, \
                 server.key) for {} to {d}",
                names.join(", ")
            );
            if args.client {
                wrote.push_str(&format!(
                    ", and a client certificate (client.pem, client.key) for \"{CLIENT_CN}\""
                ));
            }
            eprintln!("{wrote}");
            let (client_ca, identity) = if args.client {
                (
                    format!(" --client-ca {d}/ca.pem"),
                    format!(" --client-cert {d}/client.pem --client-key {d}/client.key"),
                )
            } else {
                Default::default()
            };
            let listen = listen_for(args.names.first().map(String::as_str));
            eprintln!(
                "  receiver: sieve serve --dir OUT --cert {d}/server.pem --key {d}/server.key{listen}{client_ca}"
            );
            let to = match args.names.first() {
                Some(n) => format!(" --to {}", host_port(n)),
                None => String::new(),
            };
            eprintln!("  sender:   sieve send --ca {d}/ca.pem{to}{identity} FILE...");
            eprintln!(
                "  more:     sieve certs client NAME (a sender), sieve certs server --name HOST \
                 (a receiver), from the same CA"
            );
        }
        Some(What::Client { name }) => {
            check_base_name(name)?;
            let ca = Ca::load(&args.dir)?;
            let (pem, key) = (format!("{name}.pem"), format!("{name}.key"));
            refuse_existing(
                &args.dir,
                &[&pem, &key],
                args.force,
                "or choose another NAME",
            )?;
            let (cert, k) = ca.client(name)?;
            write_file(&args.dir.join(&pem), &cert, 0o644, args.force)?;
            write_file(&args.dir.join(&key), &k, 0o600, args.force)?;
            eprintln!(
                "wrote {d}/{pem} and {d}/{key}: a client certificate for \"{name}\" from the CA \
                 in {d}/ca.pem"
            );
            eprintln!(
                "  receiver: sieve serve ... --client-ca {d}/ca.pem (add --per-client-dirs to \
                 keep {name}'s documents in OUT/{name})"
            );
            eprintln!(
                "  sender:   sieve send --ca {d}/ca.pem --client-cert {d}/{pem} --client-key \
                 {d}/{key} FILE..."
            );
        }
        Some(What::Server { names, out }) => {
            check_base_name(out)?;
            if out == "ca" {
                bail!("--out ca would replace the CA's own files; choose another name");
            }
            let ca = Ca::load(&args.dir)?;
            let (pem, key) = (format!("{out}.pem"), format!("{out}.key"));
            refuse_existing(
                &args.dir,
                &[&pem, &key],
                args.force,
                "or give a further receiver's files another name with --out NAME",
            )?;
            let (cert, k) = ca.server(names)?;
            write_file(&args.dir.join(&pem), &cert, 0o644, args.force)?;
            write_file(&args.dir.join(&key), &k, 0o600, args.force)?;
            eprintln!(
                "wrote {d}/{pem} and {d}/{key}: a receiver certificate for {} from the CA in \
                 {d}/ca.pem",
                names.join(", ")
            );
            let listen = listen_for(names.first().map(String::as_str));
            eprintln!("  receiver: sieve serve --dir OUT --cert {d}/{pem} --key {d}/{key}{listen}");
            eprintln!(
                "  sender:   sieve send --ca {d}/ca.pem --to {} FILE...",
                host_port(&names[0])
            );
        }
    }
    Ok(())
}

/// The `--listen` a receiver needs to be reached under `name` from another host: its address
/// when `name` is one, every interface when it is a host name (whose address this machine
/// cannot know); nothing for the local names, which the default listener serves.
fn listen_for(name: Option<&str>) -> String {
    match name {
        None => String::new(),
        Some(n) if LOCAL_NAMES.contains(&n) => String::new(),
        Some(n) => match n.parse::<std::net::IpAddr>() {
            Ok(ip) => format!(" --listen {}", host_port(&ip.to_string())),
            Err(_) => " --listen 0.0.0.0:7443".to_string(),
        },
    }
}

/// `host:7443`, with brackets around an IPv6 address.
fn host_port(name: &str) -> String {
    if name.contains(':') {
        format!("[{name}]:7443")
    } else {
        format!("{name}:7443")
    }
}

/// A name that is safe as a file's base name and a certificate's common name.
fn check_base_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'));
    if !ok {
        bail!(
            "'{name}' cannot name certificate files: use 1 to 64 letters, digits, '.', '-', '_' \
             or '@', not beginning with '.'"
        );
    }
    Ok(())
}

/// After a refusal to replace a new CA's files: how to add a peer without replacing the CA.
const KEEP_THE_CA: &str = "to add a sender or a receiver, use `sieve certs client NAME` or \
                           `sieve certs server --name HOST`, which keep the CA";

/// Refuse, before anything is generated, if any of `files` exists in `dir` (unless `force`),
/// or (with `force`) is something [`write_file`] would refuse; `hint` says what else to do.
fn refuse_existing(dir: &Path, files: &[&str], force: bool, hint: &str) -> Result<()> {
    if force {
        for f in files {
            Output::new(&dir.join(f)).check()?;
        }
        return Ok(());
    }
    let there: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| fs::symlink_metadata(dir.join(f)).is_ok())
        .collect();
    if !there.is_empty() {
        bail!(
            "{} already {} in {}: nothing was written. Pass --force to replace {} (receivers and \
             senders using {} must then be given the new files); {hint}",
            there.join(", "),
            if there.len() == 1 { "exists" } else { "exist" },
            dir.display(),
            if there.len() == 1 { "it" } else { "them" },
            if there.len() == 1 { "it" } else { "them" },
        );
    }
    Ok(())
}

/// Write `contents` to `path` with exactly `mode`, by the rule of [`crate::output`]: a new
/// file renamed over `path`, or written through a device or a pipe. Without `force`, an
/// existing `path` is an error (and is never replaced, however it appeared).
fn write_file(path: &Path, contents: &str, mode: u32, force: bool) -> Result<()> {
    Output::new(path)
        .mode(Some(mode))
        .replace(force)
        .write(contents.as_bytes())
}

const CA_CN: &str = "security sieve development CA";
const CLIENT_CN: &str = "security sieve sender";

/// A CA able to sign: its certificate's parameters and its key.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new() -> Result<Ca> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, CA_CN);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert = ca.self_signed(&key)?;
        Ok(Ca { cert, key })
    }

    /// The CA in `dir` (ca.pem and ca.key), to issue more certificates that chain to the same
    /// ca.pem (its subject and key identifier are read from it).
    fn load(dir: &Path) -> Result<Ca> {
        let (pem, key) = (dir.join("ca.pem"), dir.join("ca.key"));
        let read = |p: &Path| {
            fs::read_to_string(p).with_context(|| {
                format!(
                    "cannot read {} (make a CA first with `sieve certs --dir {}`)",
                    p.display(),
                    dir.display()
                )
            })
        };
        let key = KeyPair::from_pem(&read(&key)?)
            .with_context(|| format!("{} is not a PEM private key", key.display()))?;
        let params = ca_params(&read(&pem)?)
            .with_context(|| format!("{} is not a PEM CA certificate", pem.display()))?;
        let cert = params.self_signed(&key).with_context(|| {
            format!(
                "{} does not belong to {}",
                dir.join("ca.key").display(),
                pem.display()
            )
        })?;
        Ok(Ca { cert, key })
    }

    /// A server certificate for `names`: (certificate PEM, key PEM).
    fn server(&self, names: &[String]) -> Result<(String, String)> {
        let mut p = CertificateParams::new(names.to_vec())
            .context("a --name is neither a DNS name nor an IP address")?;
        p.distinguished_name
            .push(DnType::CommonName, "security sieve receiver");
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = p.signed_by(&key, &self.cert, &self.key)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// A client certificate whose common name is `cn`.
    fn client(&self, cn: &str) -> Result<(String, String)> {
        let mut p = CertificateParams::new(Vec::<String>::new())?;
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = p.signed_by(&key, &self.cert, &self.key)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The parameters of the CA certificate in `pem` that matter to the certificates it signs: its
/// subject, attribute by attribute with each value's string type (a verifier matches their
/// issuer against it byte for byte), and its subject key identifier, kept as rcgen's own reader
/// (`CertificateParams::from_ca_cert_pem`) keeps it. That reader needs rcgen's `x509-parser`
/// feature, which turns on x509-parser's signature checks and so links ring beside aws-lc;
/// this reads the fields with x509-parser alone.
fn ca_params(pem: &str) -> Result<CertificateParams> {
    use x509_parser::der_parser::asn1_rs::Tag;
    use x509_parser::extensions::ParsedExtension;

    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| anyhow!("no PEM certificate: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| anyhow!("not an X.509 certificate: {e}"))?;
    let mut dn = DistinguishedName::new();
    for rdn in cert.subject().iter() {
        let mut attrs = rdn.iter();
        let (Some(attr), None) = (attrs.next(), attrs.next()) else {
            bail!("its subject has a name of several attributes");
        };
        let oid: Vec<u64> = attr
            .attr_type()
            .iter()
            .context("its subject has an attribute type out of range")?
            .collect();
        let value = attr.attr_value();
        let text = std::str::from_utf8(value.data)
            .context("its subject has an attribute that is not text")?;
        let value = match value.header.tag() {
            Tag::PrintableString => DnValue::PrintableString(text.try_into()?),
            Tag::Utf8String => DnValue::Utf8String(text.to_owned()),
            Tag::Ia5String => DnValue::Ia5String(text.try_into()?),
            Tag::T61String => DnValue::TeletexString(text.try_into()?),
            t => bail!("its subject has an attribute of type {t}"),
        };
        dn.push(DnType::from_oid(&oid), value);
    }
    let mut params = CertificateParams::default();
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    if let Some(ski) = cert
        .iter_extensions()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0.to_vec()),
            _ => None,
        })
    {
        params.key_identifier_method = KeyIdMethod::PreSpecified(ski);
    }
    Ok(params)
}

/// Write a new CA and a server certificate (and a client one) to `dir`, refusing to replace
/// anything; used by the demo, in a fresh folder.
pub fn make(dir: &Path, extra_names: &[String], client: bool) -> Result<()> {
    make_with(dir, extra_names, client, false).map(|_| ())
}

/// [`make`], replacing files with `force`. Returns the server certificate's names.
fn make_with(dir: &Path, extra_names: &[String], client: bool, force: bool) -> Result<Vec<String>> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut files = vec!["ca.pem", "ca.key", "server.pem", "server.key"];
    if client {
        files.extend(["client.pem", "client.key"]);
    }
    refuse_existing(dir, &files, force, KEEP_THE_CA)?;
    let ca = Ca::new()?;
    let mut names: Vec<String> = LOCAL_NAMES.iter().map(|s| s.to_string()).collect();
    names.extend(extra_names.iter().cloned());
    let (server, server_key) = ca.server(&names)?;
    write_file(&dir.join("ca.pem"), &ca.cert.pem(), 0o644, force)?;
    write_file(&dir.join("ca.key"), &ca.key.serialize_pem(), 0o600, force)?;
    write_file(&dir.join("server.pem"), &server, 0o644, force)?;
    write_file(&dir.join("server.key"), &server_key, 0o600, force)?;
    if client {
        let (c, k) = ca.client(CLIENT_CN)?;
        write_file(&dir.join("client.pem"), &c, 0o644, force)?;
        write_file(&dir.join("client.key"), &k, 0o600, force)?;
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn keys_are_private_and_links_are_neither_followed_nor_replaced() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();
        let key = d.path().join("k.key");
        std::os::unix::fs::symlink(&victim, &key).unwrap();
        // An existing name (even a link) is refused without --force; a link to a file is
        // refused with it too, and stays a link.
        assert!(write_file(&key, "secret", 0o600, false).is_err());
        let e = write_file(&key, "secret", 0o600, true).unwrap_err();
        assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(mode(&victim), 0o644);
        assert_eq!(fs::read_link(&key).unwrap(), victim);
        // A key that existed with wider permissions is replaced by a private one.
        let wide = d.path().join("w.key");
        fs::write(&wide, "old").unwrap();
        fs::set_permissions(&wide, fs::Permissions::from_mode(0o644)).unwrap();
        write_file(&wide, "new", 0o600, true).unwrap();
        assert_eq!(
            (fs::read_to_string(&wide).unwrap().as_str(), mode(&wide)),
            ("new", 0o600)
        );
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(names.is_empty(), "temporary files left: {names:?}");
    }

    #[test]
    fn a_loaded_ca_issues_certificates_that_chain_to_the_same_ca_pem() {
        let d = tempfile::tempdir().unwrap();
        make(d.path(), &[], false).unwrap();
        let ca = Ca::load(d.path()).unwrap();
        let orig = fs::read_to_string(d.path().join("ca.pem")).unwrap();
        let (cert, _) = ca.client("alice").unwrap();
        // The issuer named in the new certificate is the CA's subject, byte for byte (each
        // attribute's string type kept): what a verifier matches against ca.pem.
        use rustls_pki_types::pem::PemObject;
        let der = |pem: &str| {
            rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
                .unwrap()
                .to_vec()
        };
        let orig_der = der(&orig);
        let new_der = der(&cert);
        let (_, o) = x509_parser::parse_x509_certificate(&orig_der).unwrap();
        let (_, n) = x509_parser::parse_x509_certificate(&new_der).unwrap();
        assert_eq!(n.issuer(), o.subject());
        assert_eq!(n.issuer().as_raw(), o.subject().as_raw());
        assert!(n.verify_signature(Some(o.public_key())).is_ok());
        assert!(check_base_name("../x").is_err() && check_base_name(".h").is_err());
        assert!(check_base_name("alice@lab-1").is_ok());
    }
}
