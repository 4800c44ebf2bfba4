//! Where each channel's next piece comes from: the thesis's precomputed plan, or the dynamic
//! scheduler that hands the next chunk to whichever channel asks first.

use crate::chunk::ChunkScheduler;
use crate::{Piece, Plan};

/// The pieces of one kind's streams, for the channels of that kind.
#[derive(Debug)]
pub(super) enum Work {
    /// A precomputed thesis plan: channel i takes `plan.channels[i]` in order.
    Plan(Vec<std::vec::IntoIter<Piece>>),
    /// Whoever is free takes the next chunk.
    Dynamic(ChunkScheduler),
}

impl Work {
    /// Work over streams of `lens[doc]` bytes: `plan`'s pieces, or chunks of `chunk` bytes when
    /// the split is dynamic (`plan` is `None`).
    pub(super) fn new(plan: Option<Plan>, lens: &[u64], chunk: u64) -> Work {
        match plan {
            Some(p) => Work::Plan(p.channels.into_iter().map(Vec::into_iter).collect()),
            None => Work::Dynamic(ChunkScheduler::new(lens, chunk)),
        }
    }

    /// The next piece for `channel`; `None` when it has nothing more to send.
    pub(super) fn next(&mut self, channel: usize) -> Option<Piece> {
        match self {
            Work::Plan(ch) => ch.get_mut(channel)?.next(),
            Work::Dynamic(s) => s.next(),
        }
    }
}
