//! `sieve certs`: a development CA and certificates, so the first run needs nothing else.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Folder to write ca.pem, ca.key, server.pem, server.key (and client.pem, client.key).
    #[arg(long, default_value = "certs")]
    pub dir: PathBuf,
    /// Extra names (DNS names or IP addresses) the server certificate is valid for, besides
    /// localhost and 127.0.0.1. Repeat or separate with commas.
    #[arg(long = "name", value_delimiter = ',')]
    pub names: Vec<String>,
    /// Also write a client certificate for mutual TLS (`sieve serve --client-ca DIR/ca.pem`).
    #[arg(long)]
    pub client: bool,
}

fn write_private(path: &Path, contents: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(contents.as_bytes())?;
    Ok(())
}

pub fn run(args: &Args) -> Result<()> {
    make(&args.dir, &args.names, args.client)?;
    eprintln!(
        "wrote a development CA and certificates for localhost/127.0.0.1 to {}",
        args.dir.display()
    );
    eprintln!(
        "  receiver: sieve serve --cert {0}/server.pem --key {0}/server.key --dir OUT",
        args.dir.display()
    );
    eprintln!(
        "  sender:   sieve send --ca {}/ca.pem FILE...",
        args.dir.display()
    );
    Ok(())
}

/// Write the files; used by the demo too.
pub fn make(dir: &Path, extra_names: &[String], client: bool) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "security sieve development CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;

    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    names.extend(extra_names.iter().cloned());
    let mut server = CertificateParams::new(names)?;
    server
        .distinguished_name
        .push(DnType::CommonName, "security sieve receiver");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate()?;
    let server_cert = server.signed_by(&server_key, &ca_cert, &ca_key)?;

    fs::write(dir.join("ca.pem"), ca_cert.pem())?;
    write_private(&dir.join("ca.key"), &ca_key.serialize_pem())?;
    fs::write(dir.join("server.pem"), server_cert.pem())?;
    write_private(&dir.join("server.key"), &server_key.serialize_pem())?;
    if client {
        let mut c = CertificateParams::new(Vec::<String>::new())?;
        c.distinguished_name
            .push(DnType::CommonName, "security sieve sender");
        c.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = c.signed_by(&key, &ca_cert, &ca_key)?;
        fs::write(dir.join("client.pem"), cert.pem())?;
        write_private(&dir.join("client.key"), &key.serialize_pem())?;
    }
    Ok(())
}
