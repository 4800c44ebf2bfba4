//! Compressed frames at the receiver: the decompressor and output buffer each channel keeps, its
//! memory counted in the receiver's frame-buffer budget, and the speed the receiver tells its
//! senders it decompresses at.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sieve_core::compress::{Codec, Decoder, DecompressError, Encoded, Encoder, FrameCodec};
use sieve_core::corpus::DocKind;

use crate::conn::{BudgetError, FrameBudget, Reservation, RETAIN_BUFFER};
use crate::cpu::thread_cpu_time;

/// One channel's decompressor and output buffer. The buffer is charged to the frame-buffer
/// budget before it grows (from the declared length alone, before a byte is decompressed), kept
/// between frames up to [`RETAIN_BUFFER`], and given back with the charge when larger.
pub(super) struct Inflate {
    decoder: Decoder,
    out: Vec<u8>,
    held: Option<Reservation>,
    budget: Arc<FrameBudget>,
}

impl Inflate {
    /// A decompressor refusing frames that declare more than `max_len` bytes.
    pub(super) fn new(max_len: usize, budget: Arc<FrameBudget>) -> anyhow::Result<Inflate> {
        Ok(Inflate {
            decoder: Decoder::new(max_len).context("cannot start a decompressor")?,
            out: Vec::new(),
            held: None,
            budget,
        })
    }

    /// The frame's own checks ([`Decoder::check`]): its declared length within the limit and
    /// matching its zstd header. Costs no memory.
    pub(super) fn check(
        &self,
        codec: FrameCodec,
        compressed: &[u8],
        declared: u64,
    ) -> Result<usize, DecompressError> {
        self.decoder.check(codec, compressed, declared)
    }

    /// Decompress `compressed`, in `codec`, which declares `declared` bytes: the exact bytes, or
    /// why not.
    /// Waits for budget memory if the buffer must grow (failing like a frame would, with
    /// [`BudgetError::Exhausted`], after the budget's wait); the frame's own checks
    /// ([`Decoder::check`]) come first, so a frame that claims too much costs nothing.
    pub(super) async fn inflate(
        &mut self,
        codec: FrameCodec,
        compressed: &[u8],
        declared: u64,
    ) -> Result<Result<&[u8], DecompressError>, BudgetError> {
        let n = match self.decoder.check(codec, compressed, declared) {
            Ok(n) => n,
            Err(e) => return Ok(Err(e)),
        };
        let held = self.held.as_ref().map_or(0, Reservation::bytes);
        if n > held {
            // Give back the old charge first: a channel never holds two.
            self.held = None;
            self.out = Vec::new();
            let what = format!("a {n}-byte decompression buffer");
            self.held = Some(self.budget.reserve(n, &what).await?);
        }
        let r = self
            .decoder
            .decompress_into(codec, compressed, declared, &mut self.out);
        Ok(r.map(|()| &self.out[..]))
    }

    /// After a frame: a buffer larger than what is kept between frames goes back.
    pub(super) fn settle(&mut self) {
        if self.out.capacity() > RETAIN_BUFFER {
            self.out = Vec::new();
            self.held = None;
        }
    }
}

/// The receiver's decompression speed, plain MB/s on one core: 1 MiB of generated prose
/// compressed at zstd 3 and decompressed a few times, the fastest run's thread CPU time counted
/// (a few milliseconds at start-up). zstd decodes every level at about the same speed, so one
/// level stands for all. 0 if it cannot be measured.
pub(crate) fn decompress_speed_mbps() -> u32 {
    measure().unwrap_or(0)
}

fn measure() -> Option<u32> {
    let mut sample = Vec::with_capacity(1 << 20);
    sieve_core::corpus::write(DocKind::Text, 1 << 20, 0.0, 7, false, &mut sample, |_| {}).ok()?;
    let mut packed = Vec::new();
    let Encoded::Compressed { .. } = Encoder::new()
        .ok()?
        .compress(&sample, Codec::zstd(3).ok()?, &mut packed)
        .ok()?
    else {
        return None;
    };
    let mut d = Decoder::new(sample.len()).ok()?;
    let codec = FrameCodec::Zstd(Codec::zstd(3).ok()?);
    let mut out = Vec::new();
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t = thread_cpu_time();
        d.decompress_into(codec, &packed, sample.len() as u64, &mut out)
            .ok()?;
        best = best.min(thread_cpu_time().saturating_sub(t));
    }
    if out != sample || best.is_zero() {
        return None;
    }
    let mbps = sample.len() as f64 / best.as_secs_f64() / 1e6;
    Some(mbps.round().clamp(1.0, f64::from(u32::MAX)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::BufferStats;

    fn z3() -> FrameCodec {
        FrameCodec::Zstd(Codec::zstd(3).unwrap())
    }

    #[test]
    fn the_speed_is_measured() {
        let mbps = decompress_speed_mbps();
        // zstd decodes prose at hundreds of MB/s to GB/s on anything that runs these tests.
        assert!(mbps > 20, "{mbps} MB/s");
    }

    #[tokio::test]
    async fn buffers_are_charged_before_decompressing_and_given_back() {
        let stats = Arc::new(BufferStats::default());
        let budget = Arc::new(FrameBudget::new(
            8 << 20,
            Duration::from_millis(50),
            stats.clone(),
        ));
        let mut inf = Inflate::new(16 << 20, budget.clone()).unwrap();
        let pack = |b: &[u8], level| {
            let mut out = Vec::new();
            let r = Encoder::new()
                .unwrap()
                .compress(b, Codec::zstd(level).unwrap(), &mut out)
                .unwrap();
            assert!(matches!(r, Encoded::Compressed { .. }));
            out
        };
        let text = b"sieve ".repeat(1 << 20);
        let z = pack(&text, 3);
        // 6 MiB declared: charged, decompressed exactly.
        let got = inf
            .inflate(z3(), &z, text.len() as u64)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, &text[..]);
        assert!(stats.bytes.load(std::sync::atomic::Ordering::Relaxed) >= text.len() as u64);
        // Larger than what is kept between frames: given back.
        inf.settle();
        assert_eq!(stats.bytes.load(std::sync::atomic::Ordering::Relaxed), 0);
        // A frame that lies about its length costs no memory.
        assert!(matches!(
            inf.inflate(z3(), &z, 10 << 20).await.unwrap(),
            Err(DecompressError::SizeMismatch { .. })
        ));
        assert_eq!(stats.bytes.load(std::sync::atomic::Ordering::Relaxed), 0);
        // More than the budget holds: refused after the wait.
        let big = b"x".repeat(9 << 20);
        let zb = pack(&big, 1);
        let e = inf.inflate(z3(), &zb, big.len() as u64).await.unwrap_err();
        assert!(matches!(e, BudgetError::Exhausted(_)), "{e:#}");
    }
}
