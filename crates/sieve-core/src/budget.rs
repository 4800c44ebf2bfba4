//! How much frame-buffer memory a receiver needs so that sessions can never all wait for each
//! other, and how large the frames a sender picks may be so as to keep that true.
//!
//! Both ends rely on this arithmetic (the receiver sizes its budget by it, the sender its
//! automatic frames), so it lives in one place that both use.

/// The frame buffer, in KiB, that [`stall_free_buffer_bytes`] counts for every channel: a 256 KiB
/// frame and its DATA prefix.
pub const FRAME_BUFFER_KIB: u64 = 257;

/// The smallest frame-buffer budget with which `sessions` sessions of
/// [`MAX_CHANNELS`](crate::message::MAX_CHANNELS) channels, each receiving frames of 256 KiB +
/// the DATA prefix (257 KiB of buffer), can never all wait for each other.
///
/// A channel that holds its buffer never waits again; a session none of whose channels waits
/// finishes and gives its memory back. So the budget is stuck only if every session has a
/// waiting channel, which needs the channels holding memory (at most `sessions × (channels −
/// 1)`) plus the part of a frame handed to the first waiter (less than one frame) to fill the
/// whole budget. With one frame more than that, it cannot happen.
///
/// Both ends rely on it: the receiver sizes its budget from it, and the sender sizes its
/// automatic frames ([`stall_free_payload`]) so as not to break it.
pub fn stall_free_buffer_bytes(sessions: usize) -> u64 {
    (sessions as u64 * (crate::message::MAX_CHANNELS - 1) + 1) * (FRAME_BUFFER_KIB << 10)
}

/// The largest DATA payload a session of `channels` channels may use on all of them and still
/// fit the reasoning of [`stall_free_buffer_bytes`].
///
/// That bound holds for any sessions whose channels, all but one, hold no more buffer than
/// `MAX_CHANNELS − 1` channels of [`FRAME_BUFFER_KIB`] would. A session with fewer channels may
/// use larger frames: with one secure and one plain channel, up to 31 × 257 KiB. The sender's
/// automatic chunk ([`crate::sender::Chunk::Auto`]) stays below this, so larger frames for large
/// documents never cost the receiver its guarantee that sessions cannot stall each other.
pub fn stall_free_payload(channels: u64) -> u64 {
    let session_kib = (crate::message::MAX_CHANNELS - 1) * FRAME_BUFFER_KIB;
    let per_channel_kib = session_kib / channels.saturating_sub(1).max(1);
    // The receiver's buffer is the payload rounded up to whole KiB: one KiB spare covers the
    // DATA prefix.
    (per_channel_kib - 1) << 10
}
