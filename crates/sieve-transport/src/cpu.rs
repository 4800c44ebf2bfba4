//! CPU time of a process, as the thesis's metrics and the laboratory report it.

use std::time::Duration;

/// CPU time (user + system) used so far by process `pid`, or by this process for `None`.
///
/// Summed over the threads' scheduler statistics (nanoseconds of run time,
/// /proc/PID/task/*/schedstat); /proc/PID/stat's 10 ms ticks, the fallback, are too coarse for
/// transfers of a few milliseconds. Zero when neither can be read (the process has ended).
pub fn cpu_time(pid: Option<u32>) -> Duration {
    let proc = pid.map_or_else(|| "/proc/self".to_string(), |p| format!("/proc/{p}"));
    let from_tasks = std::fs::read_dir(format!("{proc}/task")).ok().map(|dir| {
        dir.filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_to_string(e.path().join("schedstat")).ok())
            .filter_map(|s| {
                s.split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .sum::<u64>()
    });
    if let Some(ns) = from_tasks.filter(|&ns| ns > 0) {
        return Duration::from_nanos(ns);
    }
    // Fields 14 and 15 of /proc/PID/stat are utime and stime in clock ticks (USER_HZ, 100 on
    // Linux); the command name before them may hold spaces, so count from its closing ')'.
    let Ok(stat) = std::fs::read_to_string(format!("{proc}/stat")) else {
        return Duration::ZERO;
    };
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
        return Duration::ZERO;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((tick(11) + tick(12)) * 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_loop_shows_up_and_an_ended_process_is_zero() {
        // Spin until 10 ms of CPU show up (however busy the machine is), within a generous
        // deadline that only a broken clock would reach.
        let before = cpu_time(None);
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while cpu_time(None) < before + Duration::from_millis(10) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "CPU time never advanced"
            );
        }
        assert!(cpu_time(Some(std::process::id())) > Duration::ZERO);
        assert_eq!(cpu_time(Some(u32::MAX)), Duration::ZERO);
    }
}
