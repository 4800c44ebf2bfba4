//! Running a piece of the lab's own code inside one of its network namespaces.
//!
//! A network namespace belongs to a thread, not to a process: `setns(2)` moves only the calling
//! thread. So the lab runs such code on a thread of its own that moves in, does its work (creates
//! a TUN interface, binds a socket) and ends; the lab's other threads, its main thread included,
//! stay in the host's namespace. (Were the main thread moved, `ip netns pids` would list the lab
//! itself and the namespace's removal would kill it.) Sockets and devices made in there keep
//! belonging to the namespace after the thread has ended.

use std::fs::File;
use std::os::fd::AsFd;

use anyhow::{anyhow, Context, Result};
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};

/// Run `f` on a new thread inside the named network namespace (`ip netns add NAME`) and return
/// what it returns.
pub(crate) fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let path = format!("/run/netns/{ns}");
    let handle = File::open(&path).with_context(|| format!("cannot open {path}"))?;
    std::thread::scope(|s| {
        s.spawn(move || {
            move_into_link_name_space(handle.as_fd(), Some(LinkNameSpaceType::Network))
                .with_context(|| format!("cannot enter the network namespace {ns}"))?;
            f()
        })
        .join()
        .map_err(|_| anyhow!("a thread inside the namespace {ns} panicked"))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_namespace_is_an_error_not_a_panic() {
        let err = in_netns("sieve-lab-no-such-namespace", || Ok(())).unwrap_err();
        assert!(format!("{err:#}").contains("/run/netns/"), "{err:#}");
    }
}
