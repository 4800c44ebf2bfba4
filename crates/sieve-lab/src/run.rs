//! Running the real system: a `sieve serve` process and `sieve send --json` transfers against it.
//!
//! The lab drives the same binary users run, as separate processes, so a network namespace or a
//! CPU limit can be put around one side only (thesis §5.1: a new connection per transfer).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use sieve_core::report::SessionReport;

use crate::child::Watched;

/// The `sieve` binary, the `sieve-lab` one, and a folder with certificates for `sieve`.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub(crate) sieve: PathBuf,
    /// The laboratory's own binary, for `sieve-lab speeds` in a process of its own.
    pub(crate) lab: PathBuf,
    pub(crate) certs: PathBuf,
    /// Whether the binary was built with the (insecure) thesis TLS 1.2 suites.
    pub(crate) thesis_suites: bool,
    /// Whether the binary was built with the laboratory's knobs (its `lab` feature):
    /// `sieve send --emulate-processing-ms-per-mb`, the thesis's additional processing time.
    pub(crate) emulates_processing: bool,
}

/// The thesis's TLS 1.2 suites, by the names `sieve send --insecure-thesis-suite` takes.
/// [`SendOptions::cipher`] when no suite is named: the sender offers AES-128-GCM first where
/// aws-lc runs AES-GCM in hardware and ChaCha20-Poly1305 first where it does not.
pub(crate) const DEFAULT_SUITE: &str = "default";
pub(crate) const THESIS_SUITES: [&str; 2] = ["3des-ede-cbc-sha", "aes256-cbc-sha"];

impl Tools {
    /// Make development certificates in `dir` with `sieve certs`.
    pub(crate) fn new(sieve: PathBuf, lab: PathBuf, dir: &Path) -> Result<Tools> {
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
        let help = Command::new(&sieve)
            .args(["send", "--help"])
            .output()
            .with_context(|| format!("cannot run {}", sieve.display()))?;
        let emulates_processing =
            String::from_utf8_lossy(&help.stdout).contains("--emulate-processing-ms-per-mb");
        Ok(Tools {
            sieve,
            lab,
            certs,
            thesis_suites,
            emulates_processing,
        })
    }
}

/// How to start a process: directly, or wrapped (network namespace, CPU limit).
pub(crate) type Wrap<'a> = &'a dyn Fn(Command) -> Command;

pub(crate) fn no_wrap(c: Command) -> Command {
    c
}

/// A running `sieve serve`, stopped on drop.
pub(crate) struct Receiver {
    child: Watched,
    pub(crate) tls: SocketAddr,
    _work: tempfile::TempDir,
}

/// What `sieve serve --ready-file` writes once both listeners are bound.
#[derive(Deserialize)]
struct Ready {
    tls: SocketAddr,
}

impl Receiver {
    /// Start a receiver listening on `ip` (ports chosen by the kernel), with `--discard` unless
    /// `write` is set.
    pub(crate) fn start(tools: &Tools, ip: &str, write: bool, wrap: Wrap<'_>) -> Result<Receiver> {
        Receiver::start_with(tools, ip, write, &[], wrap)
    }

    /// [`Receiver::start`] with extra arguments for `sieve serve`. Ready when the receiver has
    /// written its `--ready-file`; its log is kept for the error if it never gets there.
    pub(crate) fn start_with(
        tools: &Tools,
        ip: &str,
        write: bool,
        extra: &[&str],
        wrap: Wrap<'_>,
    ) -> Result<Receiver> {
        let work = tempfile::tempdir()?;
        let ready_file = work.path().join("ready.json");
        let mut cmd = Command::new(&tools.sieve);
        cmd.arg("serve")
            .arg("--dir")
            .arg(work.path())
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
            .arg("--ready-file")
            .arg(&ready_file)
            .args(extra)
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
        let mut child = Watched::spawn(&mut cmd).context("cannot start `sieve serve`")?;
        // Keep draining the log so the receiver never blocks on a full pipe; keep its end.
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.take_stderr() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Ok(mut l) = log.lock() {
                        if l.len() > 16 << 10 {
                            l.clear();
                        }
                        l.push_str(&line);
                        l.push('\n');
                    }
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(text) = std::fs::read(&ready_file) {
                let ready: Ready = serde_json::from_slice(&text)
                    .context("`sieve serve` wrote a ready file the lab cannot read")?;
                return Ok(Receiver {
                    child,
                    tls: ready.tls,
                    _work: work,
                });
            }
            if child.exited() || Instant::now() >= deadline {
                child.kill();
                let log = log.lock().map(|l| l.clone()).unwrap_or_default();
                bail!("`sieve serve` did not get ready:\n{}", log.trim());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// CPU time (user + system) the receiver process has used so far, in ms.
    pub(crate) fn cpu_ms(&self) -> f64 {
        proc_cpu_ms(self.child.id())
    }

    /// Bytes received so far on the loopback interface of the receiver's network namespace:
    /// in a namespace of its own ([`crate::scenario::LoopbackNs`]) that is what its senders
    /// sent it (plus the acknowledgements going back, a fraction of a per cent), counted as it
    /// arrives rather than per finished session.
    pub(crate) fn loopback_rx_bytes(&self) -> Result<u64> {
        crate::scenario::loopback_rx_bytes(self.child.id())
    }
}

/// CPU time of a running process in ms (see [`sieve_transport::cpu::cpu_time`]).
pub(crate) fn proc_cpu_ms(pid: u32) -> f64 {
    sieve_transport::cpu::cpu_time(Some(pid)).as_secs_f64() * 1e3
}

/// The options of one `sieve send` invocation.
#[derive(Debug, Clone)]
pub(crate) struct SendOptions {
    pub(crate) mode: &'static str,
    pub(crate) n: u8,
    pub(crate) m: u8,
    pub(crate) split: &'static str,
    pub(crate) batch_split: &'static str,
    /// The suite (`--cipher`), or [`DEFAULT_SUITE`]: none named, the sender's choice.
    pub(crate) cipher: &'static str,
    /// The thesis's additional processing time AP, ms per MB sent over TLS (0: none; anything
    /// else needs a laboratory build of `sieve`, see [`Tools::emulates_processing`]).
    pub(crate) processing_ms_per_mb: f64,
    pub(crate) ranges: Option<PathBuf>,
    /// `--compress` (`None`: the sender's default, auto).
    pub(crate) compress: Option<String>,
    /// `--compress-classified`.
    pub(crate) compress_classified: bool,
    /// The sender's `XDG_CACHE_HOME` (its calibration and what it remembers of paths), if not
    /// the user's.
    pub(crate) cache_home: Option<PathBuf>,
}

impl SendOptions {
    /// The defaults, in secure-only mode.
    pub(crate) fn secure_only() -> SendOptions {
        SendOptions {
            mode: "secure-only",
            ..SendOptions::default()
        }
    }
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions {
            mode: "sieve",
            n: 1,
            m: 1,
            split: "dynamic",
            batch_split: "dynamic",
            cipher: "aes128gcm",
            processing_ms_per_mb: 0.0,
            ranges: None,
            compress: None,
            compress_classified: false,
            cache_home: None,
        }
    }
}

impl SendOptions {
    /// The `sieve send --json` command of one transfer of `files` to `to` (stdio not set).
    pub(crate) fn command(&self, tools: &Tools, to: SocketAddr, files: &[PathBuf]) -> Command {
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
            // The thesis's documents are classified by their marks, and an x-0 file, with none,
            // goes in the clear there: the lab says so rather than have it sent secure-only.
            .arg("--allow-clear")
            .args(if self.cipher == DEFAULT_SUITE {
                vec![]
            } else if THESIS_SUITES.contains(&self.cipher) {
                vec!["--insecure-thesis-suite", self.cipher]
            } else {
                vec!["--cipher", self.cipher]
            })
            .arg("--json");
        // Only a laboratory build of `sieve` has the knob ([`Tools::emulates_processing`]).
        if self.processing_ms_per_mb != 0.0 {
            cmd.args([
                "--emulate-processing-ms-per-mb",
                &self.processing_ms_per_mb.to_string(),
            ]);
        }
        if let Some(r) = &self.ranges {
            cmd.arg("--ranges").arg(r);
        }
        if let Some(c) = &self.compress {
            cmd.args(["--compress", c]);
        }
        if self.compress_classified {
            cmd.arg("--compress-classified");
        }
        if let Some(dir) = &self.cache_home {
            cmd.env("XDG_CACHE_HOME", dir);
        }
        cmd.args(files);
        cmd
    }

    /// Run one transfer of `files` to `to` and return its measurements.
    pub(crate) fn run(
        &self,
        tools: &Tools,
        to: SocketAddr,
        files: &[PathBuf],
        wrap: Wrap<'_>,
    ) -> Result<SessionReport> {
        let cmd = self.command(tools, to, files);
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
        let s: SessionReport = serde_json::from_slice(&out.stdout).with_context(|| {
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
