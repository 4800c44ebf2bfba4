//! Running the real system: a `sieve serve` process and `sieve send --json` transfers against it.
//!
//! The lab drives the same binary users run, as separate processes, so a network namespace or a
//! CPU limit can be put around one side only (thesis §5.1: a new connection per transfer).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// The `sieve` binary and a folder with certificates for it.
#[derive(Debug, Clone)]
pub struct Tools {
    pub sieve: PathBuf,
    pub certs: PathBuf,
    /// Whether the binary was built with the (insecure) thesis TLS 1.2 suites.
    pub thesis_suites: bool,
}

/// The thesis's TLS 1.2 suites, by the names `sieve send --insecure-thesis-suite` takes.
pub const THESIS_SUITES: [&str; 2] = ["3des-ede-cbc-sha", "aes256-cbc-sha"];

impl Tools {
    /// Make development certificates in `dir` with `sieve certs`.
    pub fn new(sieve: PathBuf, dir: &Path) -> Result<Tools> {
        let certs = dir.join("certs");
        let st = Command::new(&sieve)
            .args(["certs", "--dir"])
            .arg(&certs)
            .stderr(Stdio::null())
            .status()
            .with_context(|| format!("cannot run {}", sieve.display()))?;
        if !st.success() {
            bail!("`sieve certs` failed");
        }
        let help = Command::new(&sieve)
            .args(["serve", "--help"])
            .output()
            .with_context(|| format!("cannot run {}", sieve.display()))?;
        let thesis_suites =
            String::from_utf8_lossy(&help.stdout).contains("--insecure-thesis-suites");
        Ok(Tools {
            sieve,
            certs,
            thesis_suites,
        })
    }
}

/// How to start a process: directly, or wrapped (network namespace, CPU limit).
pub type Wrap<'a> = &'a dyn Fn(Command) -> Command;

pub fn no_wrap(c: Command) -> Command {
    c
}

/// A running `sieve serve`.
pub struct Receiver {
    child: Child,
    pub tls: SocketAddr,
    pub plain: SocketAddr,
    _out: tempfile::TempDir,
}

impl Receiver {
    /// Start a receiver listening on `ip` (ports chosen by the kernel), with `--discard` unless
    /// `write` is set.
    pub fn start(tools: &Tools, ip: &str, write: bool, wrap: Wrap<'_>) -> Result<Receiver> {
        Receiver::start_with(tools, ip, write, &[], wrap)
    }

    /// [`Receiver::start`] with extra arguments for `sieve serve`.
    pub fn start_with(
        tools: &Tools,
        ip: &str,
        write: bool,
        extra: &[&str],
        wrap: Wrap<'_>,
    ) -> Result<Receiver> {
        let out = tempfile::tempdir()?;
        let mut cmd = Command::new(&tools.sieve);
        cmd.arg("serve")
            .arg("--dir")
            .arg(out.path())
            .arg("--cert")
            .arg(tools.certs.join("server.pem"))
            .arg("--key")
            .arg(tools.certs.join("server.key"))
            .args([
                "--listen",
                &format!("{ip}:0"),
                "--plain-listen",
                &format!("{ip}:0"),
            ])
            .args(["--max-sessions", "256"])
            .args(extra)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1");
        if write {
            // Every round sends the same documents again.
            cmd.arg("--overwrite");
        } else {
            cmd.arg("--discard");
        }
        // Stdio last: wrappers (namespaces, cgroups) build new commands and cannot carry it over.
        let mut cmd = wrap(cmd);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().context("cannot start `sieve serve`")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let deadline = Instant::now() + Duration::from_secs(10);
        let (mut tls, mut plain) = (None, None);
        while Instant::now() < deadline {
            let Some(line) = lines.next() else { break };
            let line = line?;
            if line.contains("receiver listening") {
                tls = field(&line, "tls=").and_then(|s| s.parse().ok());
                plain = field(&line, "plain=").and_then(|s| s.parse().ok());
                break;
            }
        }
        // Keep draining the log so the receiver never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        match (tls, plain) {
            (Some(tls), Some(plain)) => Ok(Receiver {
                child,
                tls,
                plain,
                _out: out,
            }),
            _ => {
                let _ = child.kill();
                bail!("`sieve serve` did not report its addresses")
            }
        }
    }
}

impl Receiver {
    /// CPU time (user + system) the receiver process has used so far, in ms.
    pub fn cpu_ms(&self) -> f64 {
        proc_cpu_ms(self.child.id())
    }
}

/// CPU time of a running process in ms (see [`sieve_transport::cpu::cpu_time`]).
pub fn proc_cpu_ms(pid: u32) -> f64 {
    sieve_transport::cpu::cpu_time(Some(pid)).as_secs_f64() * 1e3
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let i = line.find(key)? + key.len();
    line[i..].split_whitespace().next()
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `sieve send` invocation.
#[derive(Debug, Clone)]
pub struct Send {
    pub mode: &'static str,
    pub n: u8,
    pub m: u8,
    pub split: &'static str,
    pub batch_split: &'static str,
    pub cipher: &'static str,
    pub processing_ms_per_mb: f64,
    pub ranges: Option<PathBuf>,
}

impl Default for Send {
    fn default() -> Self {
        Send {
            mode: "sieve",
            n: 1,
            m: 1,
            split: "dynamic",
            batch_split: "dynamic",
            cipher: "aes128gcm",
            processing_ms_per_mb: 0.0,
            ranges: None,
        }
    }
}

/// The fields of `sieve send --json` the lab uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Session {
    pub mode: String,
    pub docs: usize,
    pub docs_ok: usize,
    pub bytes: u64,
    pub secure_bytes: u64,
    pub plain_bytes: u64,
    pub connect_ms: f64,
    pub connect_first_tls_ms: f64,
    pub connect_extra_tls_ms: f64,
    pub connect_plain_ms: f64,
    pub response_ms: f64,
    pub total_ms: f64,
    pub sieve_ms: f64,
    #[serde(default)]
    pub processing_ms: f64,
    pub split_ms: f64,
    pub transfer_ms: f64,
    pub combine_ms: f64,
    pub integrate_ms: f64,
    pub cpu_ms: f64,
    pub cipher: String,
}

impl Send {
    /// Run one transfer of `files` to `to` and return its measurements.
    pub fn run(
        &self,
        tools: &Tools,
        to: SocketAddr,
        files: &[PathBuf],
        wrap: Wrap<'_>,
    ) -> Result<Session> {
        let mut cmd = Command::new(&tools.sieve);
        cmd.arg("send")
            .args(["--to", &to.to_string(), "--server-name", "localhost"])
            .arg("--ca")
            .arg(tools.certs.join("ca.pem"))
            .args([
                "--mode",
                self.mode,
                "--split",
                self.split,
                "--batch-split",
                self.batch_split,
            ])
            .args(["-n", &self.n.to_string(), "-m", &self.m.to_string()])
            // The thesis's splits show the layout by design; the lab measures them knowingly.
            .arg("--quiet-layout-warning")
            .args(if THESIS_SUITES.contains(&self.cipher) {
                ["--insecure-thesis-suite", self.cipher]
            } else {
                ["--cipher", self.cipher]
            })
            .args([
                "--emulate-processing-ms-per-mb",
                &self.processing_ms_per_mb.to_string(),
            ])
            .arg("--json");
        if let Some(r) = &self.ranges {
            cmd.arg("--ranges").arg(r);
        }
        cmd.args(files);
        let mut cmd = wrap(cmd);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = cmd.output().context("cannot run `sieve send`")?;
        if !out.status.success() {
            bail!(
                "`sieve send` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let s: Session = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "unexpected output of `sieve send`: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })?;
        if s.docs_ok != s.docs {
            bail!(
                "{} of {} documents were not delivered",
                s.docs - s.docs_ok,
                s.docs
            );
        }
        Ok(s)
    }
}
