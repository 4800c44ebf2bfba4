//! Socket options that neither std nor rustix sets (`SO_RCVLOWAT`, `TCP_NOTSENT_LOWAT`): one
//! `setsockopt` call for an `int` option, so that the unsafe block and its proof live once.

use std::os::fd::RawFd;

/// Set the `int` option `name` at `level` on `fd` to `value` (clamped to `c_int`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn set_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: usize,
) -> std::io::Result<()> {
    let v = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
    // SAFETY: `setsockopt` reads exactly `size_of::<c_int>()` bytes from the pointer, which
    // points at `v`, alive for the whole call; it writes nothing. The descriptor is a plain
    // integer the kernel checks: one that is closed, or not a socket, or a socket without this
    // option, fails with an error and nothing is touched. Which socket it must be is the
    // callers' contract, not a matter of memory safety.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
