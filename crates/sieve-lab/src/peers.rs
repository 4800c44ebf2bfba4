//! Today's tools moving the same bytes as the sieve, for the lab's side-by-side rows.
//!
//! The thesis compared the sieve only with its own secure-only mode. A reader today will ask how
//! both compare with what an administrator would actually use, so every experiment that can runs
//! these beside it, on the same file, link and CPU limit:
//!
//! - [`SocatTcp`]: plain TCP, the floor any sender pays for moving bytes through the kernel;
//! - [`SocatTls`]: the same over OpenSSL TLS, the closest stock analogue of "secure-only";
//! - [`Scp`]: OpenSSH's `scp` against an `sshd` we start ourselves (never the system's);
//! - [`Iperf3`]: memory to memory, the ceiling of the path (no file, no application work).
//!
//! Each run uses a new connection, like the thesis's method (§5.1), and reports the wall time
//! from starting the sender until both sender and receiver have finished (so bytes still in
//! flight when the sender closes are counted) and the sender's CPU time (user + system, including
//! its children, e.g. `ssh` under `scp`), as `wait4` reports it when the sender is reaped (see
//! [`crate::child`]).
//!
//! With a [`NetPair`] in the [`PeerCtx`] the receiver runs in the server namespace and the sender
//! in the client namespace; with a [`CpuLimit`] the sender runs inside that cgroup.

use std::fs;
use std::io::Read;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tempfile::TempDir;

use crate::child::Watched;
use crate::scenario::{run, CpuLimit, NetPair, Side};

/// Where and under which constraints a peer runs. The default is plain loopback, no CPU limit.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PeerCtx<'a> {
    /// Run the receiver in `server_ns` and the sender in `client_ns`; `None` means loopback.
    pub(crate) net: Option<&'a NetPair>,
    /// Run the sender (only) inside this cgroup.
    pub(crate) sender_cpu: Option<&'a CpuLimit>,
    /// Give up on a transfer after this long; `None` allows 30 s plus 1 s per 2 MB, enough for
    /// the slowest emulated link with a heavily limited sender.
    pub(crate) timeout: Option<Duration>,
}

impl PeerCtx<'_> {
    fn host(&self) -> Ipv4Addr {
        self.net.map_or(Ipv4Addr::LOCALHOST, |n| n.server_ip)
    }

    fn timeout_for(&self, bytes: u64) -> Duration {
        self.timeout
            .unwrap_or_else(|| Duration::from_secs(30) + Duration::from_secs(bytes / 2_000_000))
    }

    /// The receiver's command, moved into the server namespace if there is one.
    fn server(&self, mut cmd: Command) -> Command {
        if let Some(net) = self.net {
            net.exec(Side::Server, &mut cmd);
        }
        cmd
    }

    /// The sender's command: namespace innermost (it remounts /sys, hiding the cgroup files),
    /// the cgroup outermost so that all of it is limited. Both wrappers exec the program, so the
    /// process we start and time is the sender itself.
    fn sender(&self, mut cmd: Command) -> Command {
        if let Some(net) = self.net {
            net.exec(Side::Client, &mut cmd);
        }
        match self.sender_cpu {
            Some(limit) => limit.wrap(cmd),
            None => cmd,
        }
    }
}

/// One transfer by one peer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PeerRun {
    /// From starting the sender until sender and receiver have both exited. Includes process
    /// start-up (a few ms for the wrappers) and, for TLS and SSH, the handshake: the thesis's
    /// "total time".
    pub(crate) wall: Duration,
    /// User + system CPU of the sender and the children it waited for.
    pub(crate) sender_cpu: Duration,
    /// Payload bytes moved.
    pub(crate) bytes: u64,
    /// Throughput the tool itself reported, if it reports one (iperf3: receiver side).
    pub(crate) reported_bits_per_second: Option<f64>,
}

impl PeerRun {
    /// Payload bits per second over the whole wall time.
    #[cfg(test)]
    pub(crate) fn bits_per_second(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// A tool that can move a file from the sender to the receiver.
///
/// Methods take `&self` so a list of peers can be iterated and reused across repeated runs (the
/// scp peer keeps its sshd running between transfers behind a mutex).
pub(crate) trait Peer {
    /// Name for tables and plots, e.g. "socat+openssl".
    fn name(&self) -> String;

    /// Move `file` once, over a new connection, in the given context.
    fn transfer_with(&self, file: &Path, ctx: &PeerCtx) -> Result<PeerRun>;

    /// Move `file` once over loopback, without CPU limit.
    fn transfer(&self, file: &Path) -> Result<PeerRun> {
        self.transfer_with(file, &PeerCtx::default())
    }
}

/// Every peer, in table order: socat, socat+openssl, scp with AES-128-GCM and ChaCha20-Poly1305,
/// iperf3. A peer whose tools are missing (or whose set-up failed) is still listed, and its
/// `transfer` fails with the reason, so the lab's report can say "not measured: socat not
/// installed" rather than silently dropping a row.
///
/// `cert_dir` is what `sieve certs --dir` wrote; socat's TLS uses the same certificate as the
/// sieve's receiver.
pub(crate) fn all(cert_dir: &Path) -> Vec<Box<dyn Peer>> {
    fn or_missing<P: Peer + 'static>(name: String, made: Result<P, String>) -> Box<dyn Peer> {
        match made {
            Ok(p) => Box::new(p),
            Err(why) => Box::new(Missing { name, why }),
        }
    }
    let mut peers = vec![
        or_missing("socat".into(), SocatTcp::available().map(|()| SocatTcp)),
        or_missing(
            "socat+openssl".into(),
            SocatTls::available()
                .and_then(|()| SocatTls::new(Some(cert_dir)).map_err(|e| format!("{e:#}"))),
        ),
    ];
    for cipher in [ScpCipher::Aes128Gcm, ScpCipher::Chacha20Poly1305] {
        peers.push(or_missing(
            Scp::label_for(cipher),
            Scp::available().and_then(|()| Scp::new(cipher).map_err(|e| format!("{e:#}"))),
        ));
    }
    peers.push(or_missing(
        "iperf3".into(),
        Iperf3::available().map(|()| Iperf3),
    ));
    peers
}

/// Stands in for a peer that cannot run here.
struct Missing {
    name: String,
    why: String,
}

impl Peer for Missing {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn transfer_with(&self, _: &Path, _: &PeerCtx) -> Result<PeerRun> {
        bail!("{}", self.why)
    }
}

/// Plain TCP with `socat`: the cost of moving a file through sockets with no security at all.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SocatTcp;

impl SocatTcp {
    /// `socat` is installed.
    pub(crate) fn available() -> Result<(), String> {
        need("socat")
    }
}

impl Peer for SocatTcp {
    fn name(&self) -> String {
        "socat".into()
    }

    fn transfer_with(&self, file: &Path, ctx: &PeerCtx) -> Result<PeerRun> {
        let port = free_port()?;
        let mut server = Command::new("socat");
        server.args([
            "-u",
            &format!("TCP-LISTEN:{port},reuseaddr"),
            "OPEN:/dev/null,wronly",
        ]);
        let mut client = Command::new("socat");
        client
            .arg("-u")
            .arg(open_addr(file))
            .arg(format!("TCP:{}:{port}", ctx.host()));
        one_shot(file, ctx, server, port, client, false)
    }
}

/// TLS with `socat`'s OpenSSL addresses, certificate verified by the client as a real client
/// would. Cipher suite: OpenSSL's default choice for TLS 1.3 (AES-256-GCM on x86 with AES-NI).
#[derive(Debug)]
pub(crate) struct SocatTls {
    certs: PathBuf,
    _generated: Option<TempDir>,
}

impl SocatTls {
    /// `socat` built with OpenSSL is installed (and `openssl`, to make certificates if needed).
    pub(crate) fn available() -> Result<(), String> {
        need("socat")?;
        let out = Command::new("socat")
            .arg("-V")
            .output()
            .map_err(|e| format!("socat: {e}"))?;
        if !String::from_utf8_lossy(&out.stdout).contains("WITH_OPENSSL 1") {
            return Err("socat was built without OpenSSL".into());
        }
        Ok(())
    }

    /// Use `cert_dir` (as written by `sieve certs --dir D`: `ca.pem`, `server.pem`, `server.key`
    /// for localhost), or with `None` make a self-signed P-256 certificate for localhost in a
    /// temporary directory removed on drop.
    pub(crate) fn new(cert_dir: Option<&Path>) -> Result<SocatTls> {
        match cert_dir {
            Some(dir) => {
                for f in ["ca.pem", "server.pem", "server.key"] {
                    if !dir.join(f).is_file() {
                        bail!(
                            "{} has no {f} (make it with `sieve certs --dir`)",
                            dir.display()
                        );
                    }
                }
                Ok(SocatTls {
                    certs: dir.to_path_buf(),
                    _generated: None,
                })
            }
            None => {
                let tmp = tempfile::Builder::new().prefix("sieve-lab-tls").tempdir()?;
                let d = tmp.path();
                run(Command::new("openssl")
                    .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
                    .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
                    .args(["-subj", "/CN=localhost"])
                    .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
                    .arg("-keyout")
                    .arg(d.join("server.key"))
                    .arg("-out")
                    .arg(d.join("server.pem")))
                .context("cannot make a certificate with openssl")?;
                fs::copy(d.join("server.pem"), d.join("ca.pem"))?;
                Ok(SocatTls {
                    certs: d.to_path_buf(),
                    _generated: Some(tmp),
                })
            }
        }
    }
}

impl Peer for SocatTls {
    fn name(&self) -> String {
        "socat+openssl".into()
    }

    fn transfer_with(&self, file: &Path, ctx: &PeerCtx) -> Result<PeerRun> {
        let port = free_port()?;
        let d = &self.certs;
        let mut server = Command::new("socat");
        server.arg("-u").arg(format!(
            "OPENSSL-LISTEN:{port},reuseaddr,cert={},key={},verify=0",
            d.join("server.pem").display(),
            d.join("server.key").display()
        ));
        server.arg("OPEN:/dev/null,wronly");
        // The certificate names localhost; in a namespace the address differs, so the name to
        // check is given explicitly (the chain is still verified against ca.pem).
        let mut client = Command::new("socat");
        client.arg("-u").arg(open_addr(file)).arg(format!(
            "OPENSSL:{}:{port},cafile={},commonname=localhost",
            ctx.host(),
            d.join("ca.pem").display()
        ));
        one_shot(file, ctx, server, port, client, false)
    }
}

/// The SSH ciphers worth comparing: what OpenSSH picks on hardware with AES instructions, and the
/// one it picks without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScpCipher {
    /// `aes128-gcm@openssh.com`.
    Aes128Gcm,
    /// `chacha20-poly1305@openssh.com`.
    Chacha20Poly1305,
}

impl ScpCipher {
    /// OpenSSH's name for `-c`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ScpCipher::Aes128Gcm => "aes128-gcm@openssh.com",
            ScpCipher::Chacha20Poly1305 => "chacha20-poly1305@openssh.com",
        }
    }
}

/// `scp` to `/dev/null` on an `sshd` of our own: temporary host and client keys, a minimal
/// configuration, listening on loopback or in the server namespace. The daemon is started on
/// the first transfer (and again if the context moves to another namespace) and stopped on drop.
///
/// Uses the legacy SCP protocol (`-O`): the default SFTP mode tries `fsetstat` on `/dev/null`,
/// which fails with a warning; the bytes moved and the cipher are the same.
pub(crate) struct Scp {
    cipher: ScpCipher,
    /// `scp -C`: ssh compresses the stream (zlib) before encrypting it.
    compress: bool,
    dir: TempDir,
    user: String,
    sshd: Mutex<Option<Sshd>>,
}

/// A running `sshd -D`, killed on drop.
struct Sshd {
    child: Watched,
    /// The namespace it runs in (`None`: the host's loopback).
    ns: Option<String>,
    host: Ipv4Addr,
    port: u16,
    _privsep: PrivsepDir,
}

/// Absolute path the sshd binary must be started with (it re-executes itself).
const SSHD: &str = "/usr/sbin/sshd";

impl Scp {
    /// `scp`, `ssh`, `ssh-keygen` and `/usr/sbin/sshd` are installed, and we are root: sshd
    /// needs its privilege-separation directory (`/run/sshd`, root-owned) and only root can log
    /// in as a user other than itself, so an unprivileged lab skips this peer.
    pub(crate) fn available() -> Result<(), String> {
        if !crate::scenario::is_root() {
            return Err("scp needs root to run its own sshd".into());
        }
        if !Path::new(SSHD).is_file() {
            return Err(format!("{SSHD} not installed (openssh-server)"));
        }
        need("ssh-keygen")?;
        need("scp")?;
        need("ssh")
    }

    /// Make the keys and configuration (the daemon starts on the first transfer).
    pub(crate) fn new(cipher: ScpCipher) -> Result<Scp> {
        let dir = tempfile::Builder::new().prefix("sieve-lab-ssh").tempdir()?;
        for key in ["host_key", "client_key"] {
            run(Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.path().join(key)))
            .context("cannot make ssh keys")?;
        }
        fs::copy(
            dir.path().join("client_key.pub"),
            dir.path().join("authorized_keys"),
        )?;
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .map_or_else(
                || {
                    run(Command::new("id").arg("-un"))
                        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                },
                Ok,
            )?;
        Ok(Scp {
            cipher,
            compress: false,
            dir,
            user,
            sshd: Mutex::new(None),
        })
    }

    /// `scp -C`: the same, with ssh's compression.
    pub(crate) fn compressed(cipher: ScpCipher) -> Result<Scp> {
        Ok(Scp {
            compress: true,
            ..Scp::new(cipher)?
        })
    }

    /// The ssh options every client of our sshd passes (key, no host checking, port).
    fn ssh_options(&self, port: u16) -> Vec<String> {
        let key = self.dir.path().join("client_key");
        [
            "-F",
            "/dev/null",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "IdentitiesOnly=yes",
            "-i",
        ]
        .into_iter()
        .map(String::from)
        .chain([key.display().to_string(), "-p".into(), port.to_string()])
        .collect()
    }

    /// The name in tables: "scp aes128-gcm" or "scp chacha20-poly1305".
    pub(crate) fn label_for(cipher: ScpCipher) -> String {
        format!("scp {}", cipher.name().split('@').next().unwrap_or(""))
    }

    /// Start (or restart, if the namespace changed) our sshd for `ctx`.
    fn ensure_sshd(&self, ctx: &PeerCtx) -> Result<(Ipv4Addr, u16)> {
        let ns = ctx.net.map(|n| n.server_ns.clone());
        let mut slot = self
            .sshd
            .lock()
            .map_err(|_| anyhow!("sshd lock poisoned"))?;
        if let Some(s) = slot.as_ref() {
            if !s.child.exited() && s.ns == ns {
                return Ok((s.host, s.port));
            }
        }
        *slot = None;
        let privsep = PrivsepDir::acquire()?;
        let host = ctx.host();
        let port = free_port()?;
        let d = self.dir.path();
        let cfg = d.join("sshd_config");
        fs::write(
            &cfg,
            format!(
                "Port {port}\nListenAddress {host}\nHostKey {hk}\n\
                 AuthorizedKeysFile {ak}\nPermitRootLogin prohibit-password\n\
                 PubkeyAuthentication yes\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nUseDNS no\n\
                 PidFile {pid}\nSubsystem sftp internal-sftp\nLogLevel ERROR\n",
                hk = d.join("host_key").display(),
                ak = d.join("authorized_keys").display(),
                pid = d.join("sshd.pid").display(),
            ),
        )?;
        let log = fs::File::create(d.join("sshd.log"))?;
        let mut cmd = Command::new(SSHD);
        cmd.arg("-D").arg("-e").arg("-f").arg(&cfg);
        let mut cmd = ctx.server(cmd);
        let child = Watched::spawn(cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log))?;
        let sshd = Sshd {
            child,
            ns,
            host,
            port,
            _privsep: privsep,
        };
        if let Err(e) = wait_listening(sshd.child.id(), port, Duration::from_secs(10)) {
            let running = !sshd.child.exited();
            drop(sshd);
            let log = fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
            bail!(
                "sshd did not start (running: {running}): {e:#}; log: {}",
                log.trim()
            );
        }
        *slot = Some(sshd);
        Ok((host, port))
    }
}

impl Peer for Scp {
    fn name(&self) -> String {
        if self.compress {
            format!("{} -C", Scp::label_for(self.cipher))
        } else {
            Scp::label_for(self.cipher)
        }
    }

    fn transfer_with(&self, file: &Path, ctx: &PeerCtx) -> Result<PeerRun> {
        let (host, port) = self.ensure_sshd(ctx)?;
        let bytes = file_len(file)?;
        let mut client = Command::new("scp");
        client
            .args(["-O", "-q", "-B", "-F", "/dev/null"])
            .args(["-o", "StrictHostKeyChecking=no"])
            .args(["-o", "UserKnownHostsFile=/dev/null"])
            .args(["-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes"])
            .arg("-i")
            .arg(self.dir.path().join("client_key"))
            .args(["-P", &port.to_string(), "-c", self.cipher.name()])
            .args(self.compress.then_some("-C"))
            .arg(file)
            .arg(format!("{}@{host}:/dev/null", self.user));
        let mut client = ctx.sender(client);
        let start = Instant::now();
        let mut child = Watched::spawn(
            client
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
        )?;
        let exit = child.wait_until(start + ctx.timeout_for(bytes))?;
        if !exit.status.success() {
            bail!("scp failed ({}): {}", exit.status, child.read_stderr());
        }
        Ok(PeerRun {
            wall: exit.at - start,
            sender_cpu: exit.cpu,
            bytes,
            reported_bits_per_second: None,
        })
    }
}

/// `rsync -z` over ssh to our own sshd (the same daemon set-up as [`Scp`]): rsync compresses
/// the file's data as one stream (with zstd where both ends have rsync 3.2 or later, which
/// negotiates it for `-z` before zlib) and ssh encrypts it. The file lands in a temporary folder on the
/// receiving side (rsync writes a temporary file and renames it, which `/dev/null` does not
/// allow) and is removed after each transfer; `--whole-file`, since there is nothing to delta
/// against.
pub(crate) struct Rsync {
    ssh: Scp,
    target: TempDir,
}

impl Rsync {
    /// `rsync` as well as what [`Scp`] needs.
    pub(crate) fn available() -> Result<(), String> {
        Scp::available()?;
        need("rsync")
    }

    pub(crate) fn new(cipher: ScpCipher) -> Result<Rsync> {
        Ok(Rsync {
            ssh: Scp::new(cipher)?,
            target: tempfile::Builder::new()
                .prefix("sieve-lab-rsync")
                .tempdir()?,
        })
    }
}

impl Peer for Rsync {
    fn name(&self) -> String {
        "rsync -z".into()
    }

    fn transfer_with(&self, file: &Path, ctx: &PeerCtx) -> Result<PeerRun> {
        let (host, port) = self.ssh.ensure_sshd(ctx)?;
        let bytes = file_len(file)?;
        let mut ssh = vec![
            "ssh".to_string(),
            "-c".into(),
            self.ssh.cipher.name().into(),
        ];
        ssh.extend(self.ssh.ssh_options(port));
        let mut client = Command::new("rsync");
        client
            .args(["-z", "--whole-file", "-q", "-e", &ssh.join(" ")])
            .arg(file)
            .arg(format!(
                "{}@{host}:{}/",
                self.ssh.user,
                self.target.path().display()
            ));
        let mut client = ctx.sender(client);
        let start = Instant::now();
        let mut child = Watched::spawn(
            client
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
        )?;
        let exit = child.wait_until(start + ctx.timeout_for(bytes))?;
        if let Some(name) = file.file_name() {
            let _ = fs::remove_file(self.target.path().join(name));
        }
        if !exit.status.success() {
            bail!("rsync failed ({}): {}", exit.status, child.read_stderr());
        }
        Ok(PeerRun {
            wall: exit.at - start,
            sender_cpu: exit.cpu,
            bytes,
            reported_bits_per_second: None,
        })
    }
}

/// `zstd --adapt | socat OPENSSL`: the whole file compressed with zstd's own adaptive level,
/// inside TLS; the receiver decompresses to `/dev/null`. Unlike the sieve it compresses the
/// classified bytes too, together with everything else, in one stream: exactly what TLS 1.3
/// gave up compression for (CRIME, BREACH). The bar the sieve's cleartext compression is
/// measured against, not a safe way to send secrets.
pub(crate) struct ZstdSocat {
    tls: SocatTls,
}

impl ZstdSocat {
    /// `zstd` and a `socat` with OpenSSL.
    pub(crate) fn available() -> Result<(), String> {
        need("zstd")?;
        SocatTls::available()
    }

    pub(crate) fn new(cert_dir: Option<&Path>) -> Result<ZstdSocat> {
        Ok(ZstdSocat {
            tls: SocatTls::new(cert_dir)?,
        })
    }
}

impl Peer for ZstdSocat {
    fn name(&self) -> String {
        "zstd --adapt | socat+openssl".into()
    }

    fn transfer_with(&self, file: &Path, ctx: &PeerCtx) -> Result<PeerRun> {
        let port = free_port()?;
        let d = &self.tls.certs;
        let mut server = Command::new("sh");
        server.arg("-c").arg(format!(
            "socat -u OPENSSL-LISTEN:{port},reuseaddr,cert={},key={},verify=0 STDOUT \
             | zstd -dq > /dev/null",
            d.join("server.pem").display(),
            d.join("server.key").display()
        ));
        let mut client = Command::new("sh");
        client.arg("-c").arg(format!(
            "zstd --adapt -q -c '{}' | socat -u STDIN OPENSSL:{}:{port},cafile={},commonname=localhost",
            file.display(),
            ctx.host(),
            d.join("ca.pem").display()
        ));
        one_shot(file, ctx, server, port, client, false)
    }
}

/// The peers that compress, in table order: `zstd --adapt | socat OPENSSL`, `scp -C`, `rsync -z`
/// (missing ones say why, as in [`all`]).
pub(crate) fn compressing(cert_dir: &Path) -> Vec<Box<dyn Peer>> {
    fn or_missing<P: Peer + 'static>(name: &str, made: Result<P, String>) -> Box<dyn Peer> {
        match made {
            Ok(p) => Box::new(p),
            Err(why) => Box::new(Missing {
                name: name.into(),
                why,
            }),
        }
    }
    let cipher = ScpCipher::Aes128Gcm;
    vec![
        or_missing(
            "zstd --adapt | socat+openssl",
            ZstdSocat::available()
                .and_then(|()| ZstdSocat::new(Some(cert_dir)).map_err(|e| format!("{e:#}"))),
        ),
        or_missing(
            "scp aes128-gcm -C",
            Scp::available().and_then(|()| Scp::compressed(cipher).map_err(|e| format!("{e:#}"))),
        ),
        or_missing(
            "rsync -z",
            Rsync::available().and_then(|()| Rsync::new(cipher).map_err(|e| format!("{e:#}"))),
        ),
    ]
}

/// Serialises creation and removal of `/run/sshd`, sshd's privilege-separation directory, which
/// the package normally leaves to its init script. We create it when missing and remove it when
/// the last of our daemons in this process stops, if we created it.
static PRIVSEP: Mutex<(usize, bool)> = Mutex::new((0, false));
const PRIVSEP_DIR: &str = "/run/sshd";

#[derive(Debug)]
struct PrivsepDir;

impl PrivsepDir {
    fn acquire() -> Result<PrivsepDir> {
        let mut g = PRIVSEP
            .lock()
            .map_err(|_| anyhow!("privsep lock poisoned"))?;
        if g.0 == 0 && !Path::new(PRIVSEP_DIR).exists() {
            fs::create_dir(PRIVSEP_DIR)
                .with_context(|| format!("sshd needs {PRIVSEP_DIR} and it cannot be made"))?;
            g.1 = true;
        }
        g.0 += 1;
        Ok(PrivsepDir)
    }
}

impl Drop for PrivsepDir {
    fn drop(&mut self) {
        if let Ok(mut g) = PRIVSEP.lock() {
            g.0 = g.0.saturating_sub(1);
            if g.0 == 0 && g.1 {
                let _ = fs::remove_dir(PRIVSEP_DIR);
                g.1 = false;
            }
        }
    }
}

/// `iperf3`, memory to memory: the ceiling of the path. It is asked to send as many bytes as the
/// file has but does not read the file (`-F` would make it a file copier, not a ceiling).
///
/// iperf3 ends the test once the sender has *written* its bytes, and the receiver stops counting
/// then, so over a slow link the bytes still queued are never counted. [`PeerRun::bytes`] is
/// therefore what the receiver reported (for 5 MB over the 100 Mbit/s link, about 4.6 MB), and
/// [`PeerRun::reported_bits_per_second`] the receiver's rate; on loopback both match the request.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Iperf3;

impl Iperf3 {
    /// `iperf3` is installed.
    pub(crate) fn available() -> Result<(), String> {
        need("iperf3")
    }
}

impl Peer for Iperf3 {
    fn name(&self) -> String {
        "iperf3".into()
    }

    fn transfer_with(&self, file: &Path, ctx: &PeerCtx) -> Result<PeerRun> {
        let port = free_port()?;
        let bytes = file_len(file)?.max(1);
        let mut server = Command::new("iperf3");
        server.args(["-s", "-1", "-p", &port.to_string()]);
        let mut client = Command::new("iperf3");
        client
            .args(["-c", &ctx.host().to_string(), "-p", &port.to_string()])
            .args(["-n", &bytes.to_string(), "-J"]);
        one_shot(file, ctx, server, port, client, true)
    }
}

/// The common dance of the one-connection peers: start the receiver, wait until it listens,
/// start the timed sender, wait for both. With `json_report` the sender's stdout is iperf3's JSON.
fn one_shot(
    file: &Path,
    ctx: &PeerCtx,
    server: Command,
    port: u16,
    client: Command,
    json_report: bool,
) -> Result<PeerRun> {
    let bytes = file_len(file)?;
    let timeout = ctx.timeout_for(bytes);
    let mut server = ctx.server(server);
    let mut server = Watched::spawn(
        server
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .context("cannot start the receiver")?;
    if let Err(e) = wait_listening(server.id(), port, Duration::from_secs(10)) {
        server.kill();
        bail!("receiver did not listen: {e:#}; {}", server.read_stderr());
    }
    let mut client = ctx.sender(client);
    let start = Instant::now();
    let mut sender = Watched::spawn(
        client
            .stdin(Stdio::null())
            .stdout(if json_report {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped()),
    )
    .context("cannot start the sender")?;
    // Read the report while the sender runs, so a large one cannot fill the pipe and stall it.
    let report = sender.take_stdout().map(|mut out| {
        thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        })
    });
    let deadline = start + timeout;
    let sent = sender.wait_until(deadline)?;
    let received = server.wait_until(deadline)?;
    let wall = received.at.max(sent.at) - start;
    let report = report.and_then(|h| h.join().ok()).unwrap_or_default();
    if !sent.status.success() {
        bail!("sender failed ({}): {}", sent.status, sender.read_stderr());
    }
    if !received.status.success() {
        bail!(
            "receiver failed ({}): {}",
            received.status,
            server.read_stderr()
        );
    }
    let (bytes, reported) = if json_report {
        let (bps, received) = iperf3_received(&report)?;
        (received, Some(bps))
    } else {
        (bytes, None)
    };
    Ok(PeerRun {
        wall,
        sender_cpu: sent.cpu,
        bytes,
        reported_bits_per_second: reported,
    })
}

/// Receiver-side throughput and byte count from iperf3's `-J` report (what arrived, not what was
/// written into the socket).
fn iperf3_received(json: &str) -> Result<(f64, u64)> {
    let v: serde_json::Value =
        serde_json::from_str(json).context("iperf3 did not print a JSON report")?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        bail!("iperf3: {err}");
    }
    let sum = &v["end"]["sum_received"];
    match (sum["bits_per_second"].as_f64(), sum["bytes"].as_u64()) {
        (Some(bps), Some(bytes)) => Ok((bps, bytes)),
        _ => bail!("iperf3 report has no end.sum_received"),
    }
}

/// Wait until the process `pid` has a TCP socket listening on `port`, as seen in
/// `/proc/<pid>/net/tcp{,6}` — the socket table of *its* network namespace, which works for
/// receivers inside a namespace we cannot connect into from here.
fn wait_listening(pid: u32, port: u16, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut alive = false;
        for table in ["tcp", "tcp6"] {
            match fs::read_to_string(format!("/proc/{pid}/net/{table}")) {
                Ok(text) => {
                    alive = true;
                    if listens_on(&text, port) {
                        return Ok(());
                    }
                }
                Err(_) => continue,
            }
        }
        if !alive {
            bail!("process {pid} exited before listening on port {port}");
        }
        if Instant::now() >= deadline {
            bail!("nothing listened on port {port} within {timeout:?}");
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Whether a `/proc/net/tcp` table has a socket in state LISTEN (0A) on local `port`.
fn listens_on(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() > 3
            && f[3] == "0A"
            && f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
                == Some(port)
    })
}

/// A port free on the host's loopback right now. Inside a fresh namespace every port is free, so
/// the same choice serves both cases.
fn free_port() -> Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot find a free port")?;
    Ok(l.local_addr()?.port())
}

/// socat's address for reading `file`.
fn open_addr(file: &Path) -> String {
    format!("OPEN:{},rdonly", file.display())
}

fn file_len(file: &Path) -> Result<u64> {
    Ok(fs::metadata(file)
        .with_context(|| format!("cannot read {}", file.display()))?
        .len())
}

/// `tool` is an executable on PATH.
fn need(tool: &str) -> Result<(), String> {
    which::which(tool)
        .map(drop)
        .map_err(|_| format!("`{tool}` not installed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_listening_sockets() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n   \
             0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000\n   \
             1: 0100007F:1F91 0100007F:C350 01 00000000:00000000 00:00000000 00000000\n";
        assert!(listens_on(table, 0x1F90));
        assert!(!listens_on(table, 0x1F91), "established, not listening");
        assert!(!listens_on(table, 80));
    }

    #[test]
    fn reads_iperf3_json() {
        let j = r#"{"end":{"sum_sent":{"bytes":100,"bits_per_second":2.0e9},
                    "sum_received":{"bytes":90,"bits_per_second":1.9e9}}}"#;
        assert_eq!(iperf3_received(j).ok(), Some((1.9e9, 90)));
        assert!(iperf3_received(r#"{"error":"busy"}"#).is_err());
        assert!(iperf3_received("not json").is_err());
    }
}
