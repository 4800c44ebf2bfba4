//! Child processes the lab starts and times: watched through a pidfd, reaped with `wait4` for
//! the kernel's own account of their CPU time, and killed from Rust when they overrun.
//!
//! Why not `std::process::Child::wait`: it returns the exit status only, and the CPU time a
//! child used (with its waited-for descendants, e.g. `ssh` under `scp`) is what `wait4` hands
//! back with it, exact to the microsecond, with no wrapper such as bash's `time` to parse. Why a
//! pidfd: a deadline needs a wait that can time out (`poll` on the pidfd, which becomes readable
//! when the process exits), and a kill that cannot hit another process that reused the pid
//! (`pidfd_send_signal` refers to this process only, reaped or not).

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ChildStderr, ChildStdout, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

/// How a watched child ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exit {
    pub(crate) status: ExitStatus,
    /// User + system CPU time of the child and of its descendants it waited for.
    pub(crate) cpu: Duration,
    /// When the exit was seen.
    pub(crate) at: Instant,
}

/// A running child, killed and reaped on drop if it has not been waited for.
pub(crate) struct Watched {
    child: std::process::Child,
    pidfd: OwnedFd,
    reaped: bool,
}

impl Watched {
    /// Spawn `cmd` (its stdio already configured) and open a pidfd for it.
    pub(crate) fn spawn(cmd: &mut Command) -> Result<Watched> {
        let what = format!("{:?}", cmd.get_program());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {what}"))?;
        // Nobody but us reaps the child, so the pid still names it (running or a zombie).
        let pid = Pid::from_raw(child.id() as i32).context("child without a pid")?;
        match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(pidfd) => Ok(Watched {
                child,
                pidfd,
                reaped: false,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("cannot watch {what}: pidfd_open: {e}")
            }
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Everything the child wrote to its (piped) stderr, trimmed; empty if not piped.
    pub(crate) fn read_stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s.trim().to_string()
    }

    pub(crate) fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Whether the child has exited (without reaping it).
    pub(crate) fn exited(&self) -> bool {
        self.wait_readable(Some(Duration::ZERO)).unwrap_or(false)
    }

    /// Wait for the child to exit, at most until `deadline`; past it the child is killed and an
    /// error says so. The exit is timed when `poll` sees it, before it is reaped.
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> Result<Exit> {
        let left = deadline.saturating_duration_since(Instant::now());
        let done = self
            .wait_readable(Some(left))
            .context("cannot wait for a child process")?;
        if !done {
            let _ = pidfd_send_signal(&self.pidfd, Signal::KILL);
            let _ = self.reap();
            bail!("killed after running past its deadline");
        }
        let at = Instant::now();
        let (status, cpu) = self.reap()?;
        Ok(Exit { status, cpu, at })
    }

    /// Kill the child (if it still runs) and reap it.
    pub(crate) fn kill(&mut self) {
        if !self.reaped {
            let _ = pidfd_send_signal(&self.pidfd, Signal::KILL);
            let _ = self.reap();
        }
    }

    /// `poll` the pidfd: true once the process has exited.
    fn wait_readable(&self, timeout: Option<Duration>) -> rustix::io::Result<bool> {
        let ts = timeout.map(|d| Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        loop {
            match poll(&mut fds, ts.as_ref()) {
                Ok(n) => return Ok(n > 0),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// `wait4` the child: its exit status and resource usage. Blocks until it exits.
    #[allow(unsafe_code)]
    fn reap(&mut self) -> Result<(ExitStatus, Duration)> {
        let pid = self.child.id() as libc::pid_t;
        let mut status: libc::c_int = 0;
        // SAFETY: all-zero bytes are a valid `rusage` (a plain C struct of integers).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: `wait4` writes an int and a `rusage` through the two pointers, which point
            // to live, properly aligned locals of those types. The pid is our own child, which
            // only this struct reaps (std's `Child::wait` is never called on it).
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            if r == pid {
                break;
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err).context("wait4 failed");
            }
        }
        self.reaped = true;
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Ok((
            ExitStatus::from_raw(status),
            tv(usage.ru_utime) + tv(usage.ru_stime),
        ))
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    #[test]
    fn reports_status_and_the_cpu_of_the_child_and_its_children() {
        let far = Instant::now() + Duration::from_secs(30);
        // The busy loop runs in a grandchild that the shell waits for: it must be counted.
        let mut w = Watched::spawn(&mut sh(
            "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; exit 3",
        ))
        .unwrap();
        let exit = w.wait_until(far).unwrap();
        assert_eq!(exit.status.code(), Some(3));
        assert!(exit.cpu > Duration::from_millis(50), "{:?}", exit.cpu);

        let mut w = Watched::spawn(&mut sh("echo oops >&2; exit 0")).unwrap();
        assert!(w.wait_until(far).unwrap().status.success());
        assert_eq!(w.read_stderr(), "oops");
    }

    #[test]
    fn a_child_past_its_deadline_is_killed() {
        let mut w = Watched::spawn(&mut sh("sleep 30")).unwrap();
        let t = Instant::now();
        let err = w
            .wait_until(Instant::now() + Duration::from_millis(200))
            .unwrap_err();
        assert!(err.to_string().contains("deadline"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(10));
        assert!(w.reaped);
        assert!(!Watched::spawn(&mut sh("sleep 30")).unwrap().exited());
    }
}
