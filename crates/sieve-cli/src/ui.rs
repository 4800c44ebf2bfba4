//! `sieve ui`: the marking page, a local web page to review, edit, save and send the
//! classified ranges of a document (the GUI the ICPE paper calls for).
//!
//! It serves on 127.0.0.1 and prints an address with a random token, which the first visit
//! exchanges for a session cookie and leaves the address bar (see [`server`] for how access is
//! checked); every asset is embedded in the binary, so the page loads nothing from elsewhere.

mod server;
mod spans;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Parser;
use sieve_mark::Policy;
use sieve_transport::sender::SendConfig;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A document to open (another can be opened or dropped on the page).
    pub file: Option<PathBuf>,
    /// The marking policy that classifies documents as they are opened: a TOML file, or
    /// `default`.
    #[arg(long, default_value = "default", value_name = "FILE|default")]
    pub policy: String,
    /// Address to serve on; it must be a loopback address. Port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Receiver to send documents to from the page (its TLS address, host:port).
    #[arg(long, requires = "ca")]
    pub to: Option<String>,
    /// CA certificate (PEM) that signed the receiver's certificate.
    #[arg(long, requires = "to")]
    pub ca: Option<PathBuf>,
}

/// `sieve send` as the page sends: one document with a ranges file, the command's defaults.
#[derive(Parser)]
struct SendCli {
    #[command(flatten)]
    args: crate::send::Args,
}

/// How the page sends its document: with the ranges the page holds, or, when nothing in it is
/// marked, secure-only (`sieve send`'s rule for a document nobody classified: the page's ranges
/// come from a policy, but nobody chose to send it in the clear by leaving it unmarked).
pub(crate) enum PageSend<'a> {
    Ranges(&'a Path),
    SecureOnly,
}

pub(crate) fn send_config(rx: &server::Receiver, how: PageSend<'_>) -> Result<SendConfig> {
    use std::ffi::OsStr;
    let mut argv: Vec<&OsStr> = vec![
        OsStr::new("send"),
        OsStr::new("--to"),
        OsStr::new(&rx.to),
        OsStr::new("--ca"),
        rx.ca.as_os_str(),
    ];
    match how {
        PageSend::Ranges(ranges) => argv.extend([OsStr::new("--ranges"), ranges.as_os_str()]),
        PageSend::SecureOnly => argv.extend([OsStr::new("--mode"), OsStr::new("secure-only")]),
    }
    argv.push(OsStr::new("document"));
    let cli = SendCli::try_parse_from(argv).context("internal error: the page's send options")?;
    crate::send::config(&cli.args)
}

pub async fn run(args: &Args) -> Result<bool> {
    if !args.listen.ip().is_loopback() {
        bail!(
            "--listen {}: the marking page serves documents and edits them, so it listens on a \
             loopback address only (127.0.0.1 or ::1)",
            args.listen
        );
    }
    let policy = Policy::load(&args.policy)
        .with_context(|| format!("the marking policy {} cannot be used", args.policy))?;
    let receiver = match (&args.to, &args.ca) {
        (Some(to), Some(ca)) => Some(server::Receiver {
            to: to.clone(),
            ca: ca.clone(),
        }),
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let token = server::random_hex();
    let app = server::App::new(token.clone(), addr.port(), policy, receiver)
        .context("cannot create a folder for dropped documents")?;
    if let Some(f) = &args.file {
        app.open(f)?;
    }
    let host = if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    println!("marking page: http://{host}:{}/?token={token}", addr.port());
    eprintln!("open the address above in a browser; stop with Ctrl-C");
    axum::serve(listener, server::router(Arc::clone(&app)))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the marking page's server stopped")?;
    Ok(true)
}
