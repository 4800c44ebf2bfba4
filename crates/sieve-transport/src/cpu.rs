//! CPU time of a process, as the thesis's metrics and the laboratory report it.
//!
//! Read from the kernel's CPU-time clock of the whole process (`clock_gettime` on the clock that
//! `clock_getcpuclockid` names): user plus system time of every thread the process has run,
//! threads that have already ended included, in nanoseconds. The alternatives are worse for
//! transfers that last milliseconds: `/proc/PID/stat` counts in clock ticks (10 ms at the usual
//! 100 Hz), and summing `/proc/PID/task/*/schedstat` forgets every thread that has exited, such
//! as a runtime's blocking-pool workers. `getrusage` only sees this process or its waited-for
//! children, not a running receiver started by someone else.

use std::io;
use std::time::Duration;

use rustix::time::ClockId;

/// The cores this process may run on (at least 1), read once per process:
/// `available_parallelism` reads the cgroup's CPU quota and the affinity mask every time it is
/// asked (25-70 µs on this project's machines), and a sender asks once per document. The
/// command line's runtime takes its worker count from here too, so a send reads it once in all.
/// A long-lived receiver, whose cgroup may change, asks the system itself for what it sizes
/// while it runs.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// CPU time (user + system) the calling thread has used so far: what a compression costs, as
/// ACCENT's CD and `auto`'s speeds count it (other threads and waiting do not count). Zero if it
/// cannot be read.
pub(crate) fn thread_cpu_time() -> Duration {
    duration(rustix::time::clock_gettime(ClockId::ThreadCPUTime))
}

/// A clock reading as a duration (a CPU-time clock never reads negative).
fn duration(ts: rustix::time::Timespec) -> Duration {
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// CPU time (user + system) used so far by process `pid`, or by this process for `None`.
///
/// Zero when it cannot be read (the process has ended, or `pid` is not a process id); use
/// [`cpu_time_of`] to tell that apart from a process that has not run yet.
pub fn cpu_time(pid: Option<u32>) -> Duration {
    cpu_time_of(pid.unwrap_or(0)).unwrap_or(Duration::ZERO)
}

/// CPU time (user + system) used so far by process `pid` (0: this process).
///
/// Fails with `ESRCH` when no such process exists (any more), and with `InvalidInput` for a
/// `pid` beyond the kernel's range.
#[allow(unsafe_code)]
pub fn cpu_time_of(pid: u32) -> io::Result<Duration> {
    if pid == 0 {
        return Ok(duration(rustix::time::clock_gettime(
            ClockId::ProcessCPUTime,
        )));
    }
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::ErrorKind::InvalidInput)?;
    // Another process's CPU clock has no safe wrapper (rustix has none for
    // `clock_getcpuclockid`, nor a clock id from a number), so these two calls stay unsafe.
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock_getcpuclockid` only writes a `clockid_t` through the pointer, which points
    // to a live, properly aligned local of that type.
    let rc = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
    if rc != 0 {
        // Unlike most calls it returns the error number instead of setting errno.
        return Err(io::Error::from_raw_os_error(rc));
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` only writes a `timespec` through the pointer, which points to a
    // live, properly aligned local of that type; an invalid clock is reported by its result.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(ts.tv_nsec).unwrap_or(0);
    Ok(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Busy the calling thread until it has used `d` of CPU (however loaded the machine is).
    fn spin(d: Duration) {
        let start = thread_cpu_time();
        let mut x = 0u64;
        while thread_cpu_time() < start + d {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
    }

    #[test]
    fn a_busy_loop_shows_up_and_an_ended_process_is_zero() {
        let before = cpu_time(None);
        spin(Duration::from_millis(20));
        assert!(cpu_time(None) >= before + Duration::from_millis(20));
        assert!(cpu_time(Some(std::process::id())) > Duration::ZERO);
        assert_eq!(cpu_time(Some(u32::MAX)), Duration::ZERO);
        assert_eq!(
            cpu_time_of(u32::MAX).map_err(|e| e.kind()),
            Err(io::ErrorKind::InvalidInput)
        );
    }

    /// Another process's clock counts its work, and the process's clock keeps the work of a
    /// thread that has ended (the reason for the clock rather than summing
    /// /proc/PID/task/*/schedstat).
    #[test]
    fn another_process_and_an_ended_thread_are_counted() {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .expect("sh runs");
        let pid = child.id();
        let mut used = Duration::ZERO;
        for _ in 0..1000 {
            std::thread::sleep(Duration::from_millis(10));
            let now = cpu_time_of(pid).expect("child's clock");
            if now > Duration::from_millis(20) && now == used {
                break; // the loop is done: the shell sleeps
            }
            used = now;
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(used > Duration::from_millis(20), "{used:?}");
        assert!(cpu_time_of(pid).is_err(), "a reaped process has no clock");

        let before = cpu_time(None);
        std::thread::spawn(|| spin(Duration::from_millis(30)))
            .join()
            .expect("thread ends");
        assert!(cpu_time(None) >= before + Duration::from_millis(30));
    }
}
