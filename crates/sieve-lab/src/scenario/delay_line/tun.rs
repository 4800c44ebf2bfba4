//! A TUN device: a network interface whose packets a process reads and writes through a file
//! descriptor. The kernel hands every IP packet routed to the interface to `read`, and takes
//! every packet `write` gives it as if it had arrived on the interface.
//!
//! With offloads on (`IFF_VNET_HDR` and `TUNSETOFFLOAD`), each packet is prefixed with a
//! `virtio_net_hdr`, and the kernel may hand over TCP segments of up to 64 KiB that it would
//! otherwise have cut into MTU-sized frames (TSO), to be cut on the far side's receive path only
//! if needed. TCP still sizes its window and congestion window in MTU-sized segments, so its
//! behaviour on the emulated link is that of a 1500-byte link; what the offload saves is one read
//! and one write per 1500 bytes, the difference between about 1 and well over 1 Gbit/s through a
//! userspace forwarder on this machine. This is how QEMU and mahimahi's successors get their speed.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use anyhow::{bail, Context, Result};

/// Length of the `virtio_net_hdr` before each packet when offloads are on (the kernel's default
/// for `IFF_VNET_HDR`).
pub(crate) const VNET_HDR_LEN: usize = 10;

/// `virtio_net_hdr.gso_type` values (`include/uapi/linux/virtio_net.h`).
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;

/// An open TUN device; the interface exists while this is open.
#[derive(Debug)]
pub(crate) struct Tun {
    pub(crate) file: File,
    /// Whether packets carry a `virtio_net_hdr` (offloads on).
    pub(crate) vnet_hdr: bool,
}

impl Tun {
    /// Create the interface `name` in the calling thread's network namespace, non-blocking, with
    /// TCP segmentation offload when `offload` is set.
    pub(crate) fn create(name: &str, offload: bool) -> Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            bail!("interface name {name:?} must have 1 to 15 bytes");
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .context("cannot open /dev/net/tun (is the tun module loaded?)")?;
        let mut flags = libc::IFF_TUN | libc::IFF_NO_PI;
        if offload {
            flags |= libc::IFF_VNET_HDR;
        }
        set_iff(&file, name, flags as libc::c_short)
            .with_context(|| format!("cannot create the TUN interface {name}"))?;
        if offload {
            let features = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6;
            set_offload(&file, features).context("cannot turn on TUN offloads")?;
        }
        Ok(Tun {
            file,
            vnet_hdr: offload,
        })
    }

    pub(crate) fn header_len(&self) -> usize {
        if self.vnet_hdr {
            VNET_HDR_LEN
        } else {
            0
        }
    }
}

/// `TUNSETIFF`: attach the descriptor to a new interface `name` with `flags`.
#[allow(unsafe_code)]
fn set_iff(file: &File, name: &str, flags: libc::c_short) -> Result<()> {
    // SAFETY: `ifreq` is a plain C struct (a name array and a union of integers and a pointer);
    // all-zero bytes are a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = flags;
    // SAFETY: TUNSETIFF reads (and may write back the chosen name into) one `ifreq`, which
    // `req` is, alive and aligned for the duration of the call; the name is NUL-terminated since
    // it is shorter than IFNAMSIZ and the rest is zero.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// `TUNSETOFFLOAD`: which offloads the reader accepts.
#[allow(unsafe_code)]
fn set_offload(file: &File, features: libc::c_uint) -> Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned long of flags) and touches
    // no memory of ours.
    let r = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            libc::c_ulong::from(features),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// Bytes the packet `buf` (as read from a TUN device with `header` bytes of `virtio_net_hdr`
/// before it) would occupy on an Ethernet wire: every frame the kernel would cut it into, each
/// with `frame_overhead` bytes of framing. A segment carried by offload counts as the frames it
/// stands for.
pub(crate) fn wire_bytes(buf: &[u8], header: usize, frame_overhead: u64) -> u64 {
    let ip = buf.len().saturating_sub(header) as u64;
    if header < VNET_HDR_LEN || buf.len() < header {
        return ip + frame_overhead;
    }
    let gso_type = buf[1] & !GSO_ECN;
    let gso_size = u64::from(u16::from_le_bytes([buf[4], buf[5]]));
    if gso_type == GSO_NONE || gso_size == 0 {
        return ip + frame_overhead;
    }
    let packet = &buf[header..];
    let headers = match gso_type {
        GSO_TCPV4 => ipv4_tcp_header_len(packet),
        GSO_TCPV6 => ipv6_tcp_header_len(packet),
        _ => None,
    }
    .unwrap_or(40)
    .min(ip);
    let payload = ip - headers;
    let frames = payload.div_ceil(gso_size).max(1);
    payload + frames * (headers + frame_overhead)
}

/// IPv4 header (IHL) plus TCP header (data offset) lengths.
fn ipv4_tcp_header_len(p: &[u8]) -> Option<u64> {
    let ihl = u64::from(p.first()? & 0x0f) * 4;
    let tcp = u64::from(p.get(ihl as usize + 12)? >> 4) * 4;
    Some(ihl + tcp)
}

/// IPv6 fixed header plus TCP header (extension headers are not expected on our link).
fn ipv6_tcp_header_len(p: &[u8]) -> Option<u64> {
    let tcp = u64::from(p.get(40 + 12)? >> 4) * 4;
    Some(40 + tcp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TSO packet of 10 segments of 1448 bytes (IPv4 20 + TCP 32 header bytes) counts as ten
    /// frames with their headers and framing; a plain packet as itself plus framing.
    #[test]
    fn offloaded_segments_count_as_the_frames_they_stand_for() {
        let mut buf = vec![0u8; VNET_HDR_LEN];
        buf[1] = GSO_TCPV4;
        buf[4..6].copy_from_slice(&1448u16.to_le_bytes());
        let mut ip = vec![0u8; 52 + 10 * 1448];
        ip[0] = 0x45; // IPv4, 20-byte header
        ip[20 + 12] = 8 << 4; // TCP, 32-byte header
        buf.extend_from_slice(&ip);
        assert_eq!(wire_bytes(&buf, VNET_HDR_LEN, 38), 10 * (1448 + 52 + 38));
        buf[1] = GSO_NONE;
        assert_eq!(wire_bytes(&buf, VNET_HDR_LEN, 38), ip.len() as u64 + 38);
        assert_eq!(wire_bytes(&ip[..100], 0, 38), 138);
    }
}
