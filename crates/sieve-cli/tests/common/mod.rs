//! Helpers shared by the tests that run the real `sieve` binary.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SIEVE: &str = env!("CARGO_BIN_EXE_sieve");

pub fn sieve() -> Command {
    let mut c = Command::new(SIEVE);
    c.env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    c
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run sieve")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Remove ANSI colour sequences, in case the log is coloured anyway.
pub fn plain_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Send `sig` to process `pid` (SIGSTOP and SIGCONT hold a process at a protocol event).
pub fn signal(pid: u32, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    rustix::process::kill_process(pid, sig).expect("signal");
}

pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("list folder")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

pub fn partials(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| n.starts_with(".sieve-partial-"))
        .collect()
}

pub fn finals(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| !n.starts_with(".sieve-partial-"))
        .collect()
}

/// `sieve certs --dir root/certs`; the folder.
pub fn certs(root: &Path) -> PathBuf {
    let certs = root.join("certs");
    let o = sieve()
        .args(["certs", "--dir"])
        .arg(&certs)
        .output()
        .expect("run sieve certs");
    assert!(o.status.success(), "sieve certs: {}", text(&o.stderr));
    for f in ["ca.pem", "server.pem", "server.key"] {
        assert!(certs.join(f).is_file(), "sieve certs wrote no {f}");
    }
    certs
}

/// A `sieve serve` process on ports chosen by the system (read back from its log). Killed when
/// dropped.
pub struct Server {
    pub certs: PathBuf,
    pub addr: SocketAddr,
    pub plain: SocketAddr,
    pub child: Child,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// `ulimit`: run it under `ulimit ULIMIT` (e.g. `-n 128`: soft and hard open-file limits).
    pub fn start(certs: &Path, out: &Path, ulimit: Option<&str>, extra: &[&str]) -> Server {
        Server::start_env(certs, out, ulimit, extra, &[])
    }

    pub fn start_env(
        certs: &Path,
        out: &Path,
        ulimit: Option<&str>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut cmd = match ulimit {
            Some(u) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit {u} && exec \"$0\" \"$@\""))
                    .arg(SIEVE)
                    .env("NO_COLOR", "1")
                    .env_remove("RUST_LOG")
                    .stdin(Stdio::null());
                c
            }
            None => sieve(),
        };
        let mut child = cmd
            .args(["serve", "--dir"])
            .arg(out)
            .arg("--cert")
            .arg(certs.join("server.pem"))
            .arg("--key")
            .arg(certs.join("server.key"))
            .args(["--listen", "127.0.0.1:0", "--plain-listen", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sieve serve");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().expect("piped stderr");
        let l = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let line = plain_text(&line);
                if line.contains("receiver listening") {
                    let field = |k: &str| {
                        line.split_whitespace()
                            .find_map(|w| w.strip_prefix(k))
                            .and_then(|a| a.parse::<SocketAddr>().ok())
                    };
                    let _ = tx.send(field("tls=").zip(field("plain=")));
                }
                let mut l = l.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let (addr, plain) = rx
            .recv_timeout(Duration::from_secs(20))
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                panic!(
                    "sieve serve did not say where it listens:\n{}",
                    log.lock().unwrap()
                )
            });
        Server {
            certs: certs.to_path_buf(),
            addr,
            plain,
            child,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Every session the receiver started has ended (finished or failed).
    pub fn sessions_settled(&self) -> bool {
        let log = self.log();
        log.matches("session started").count()
            == log.matches("session finished").count() + log.matches("session failed").count()
    }

    /// The CA that signed the receiver's certificate.
    pub fn ca(&self) -> PathBuf {
        self.certs.join("ca.pem")
    }

    /// `sieve send --to ADDR --ca CA ARGS...`
    pub fn send(&self) -> Command {
        let mut c = sieve();
        c.arg("send")
            .arg("--to")
            .arg(self.addr.to_string())
            .arg("--ca")
            .arg(self.ca());
        c
    }

    pub fn send_ok(&self, files: &[PathBuf]) {
        let o = self
            .send()
            .args(["-n", "2", "-m", "2"])
            .args(files)
            .output()
            .expect("run sieve send");
        assert!(
            o.status.success(),
            "sieve send failed: {}\nreceiver log:\n{}",
            text(&o.stderr),
            self.log()
        );
    }

    pub fn assert_running(&mut self) {
        assert!(
            self.child.try_wait().expect("query sieve serve").is_none(),
            "sieve serve exited:\n{}",
            self.log()
        );
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A named pipe at `path`, and a thread that reads it to the end once a writer has opened and
/// closed it. The thread blocks until then: check that `path` is still a pipe before joining.
pub fn fifo_reader(path: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let o = Command::new("mkfifo").arg(path).output().expect("mkfifo");
    assert!(o.status.success(), "mkfifo: {}", text(&o.stderr));
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::open(&p).expect("open the pipe"), &mut v)
            .expect("read the pipe");
        v
    })
}

/// Whether `path` itself (not what it may link to) is a named pipe.
pub fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

/// Where a symbolic link at `path` points, if it is one.
pub fn link_target(path: &Path) -> Option<PathBuf> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_symlink())
        .and_then(|_| std::fs::read_link(path).ok())
}
