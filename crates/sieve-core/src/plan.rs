//! Plans: which bytes of which stream each channel carries, in what order.
//!
//! Every split algorithm of the thesis (ES, SS, BFS, BES, BSS) and the dynamic chunk scheduler
//! produce the same thing: for each channel, an ordered list of [`Piece`]s. A plan is a pure
//! function of the stream lengths the manifest carries and the channel count, so the receiver can
//! recompute it: no in-band `order` string is ever sent.

/// A contiguous run of one document's stream (the concatenation of its segments of one kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Piece {
    /// Index of the document within the batch (0 for a single document).
    pub doc: u32,
    /// Offset of the first byte within that document's stream.
    pub offset: u64,
    /// Number of bytes.
    pub len: u64,
}

/// For each channel, the pieces it carries, in the order it sends them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// One list per channel, indexed by channel number; a channel with nothing to send has an
    /// empty list. The receiver recomputes the same plan, so the order here is the wire order.
    pub channels: Vec<Vec<Piece>>,
}

impl Plan {
    /// A plan with `k` empty channels.
    pub fn new(k: usize) -> Plan {
        Plan {
            channels: vec![Vec::new(); k],
        }
    }

    /// Bytes carried by each channel.
    pub fn channel_bytes(&self) -> Vec<u64> {
        self.channels
            .iter()
            .map(|c| c.iter().map(|p| p.len).sum())
            .collect()
    }
}
