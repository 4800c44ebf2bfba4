//! Moving frames over a byte stream (TLS or plain TCP): the only place that reads or writes them.

use anyhow::{anyhow, Context, Result};
use sieve_core::frame::{self, FrameType, Limits, HEADER_LEN};
use sieve_core::message::{Data, Message};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};

pub type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
pub type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// Reads whole frames; the payload buffer is reused, and never grows past the limit.
pub struct FrameReader {
    inner: BufReader<BoxRead>,
    buf: Vec<u8>,
    limits: Limits,
}

impl FrameReader {
    pub fn new(inner: BoxRead, limits: Limits) -> FrameReader {
        FrameReader {
            inner: BufReader::with_capacity(64 * 1024, inner),
            buf: Vec::new(),
            limits,
        }
    }

    /// The next frame, or `None` on a clean end of stream between frames.
    pub async fn read(&mut self) -> Result<Option<(FrameType, &[u8])>> {
        let mut hdr = [0u8; HEADER_LEN];
        // Distinguish a clean close (no byte of a new frame) from a truncated frame.
        let n = self
            .inner
            .read(&mut hdr[..1])
            .await
            .context("reading a frame header")?;
        if n == 0 {
            return Ok(None);
        }
        self.inner
            .read_exact(&mut hdr[1..])
            .await
            .context("connection closed inside a frame header")?;
        let h = frame::parse_header(&hdr, &self.limits)?;
        let len = h.len as usize;
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        self.inner
            .read_exact(&mut self.buf[..len])
            .await
            .with_context(|| {
                format!(
                    "connection closed inside a {} frame of {len} bytes",
                    h.ty.name()
                )
            })?;
        Ok(Some((h.ty, &self.buf[..len])))
    }

    /// The next frame as a typed message; end of stream is an error here.
    pub async fn message(&mut self) -> Result<Message> {
        let (ty, payload) = self
            .read()
            .await?
            .ok_or_else(|| anyhow!("the peer closed the connection"))?;
        Ok(Message::parse(ty, payload)?)
    }
}

/// Writes frames; buffered so that small control frames do not cost a syscall each.
pub struct FrameWriter {
    inner: BufWriter<BoxWrite>,
    scratch: Vec<u8>,
}

impl FrameWriter {
    pub fn new(inner: BoxWrite) -> FrameWriter {
        FrameWriter {
            inner: BufWriter::with_capacity(64 * 1024, inner),
            scratch: Vec::new(),
        }
    }

    /// Queue a control message (call [`FrameWriter::flush`] to send it now).
    pub async fn send(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        self.scratch.clear();
        encode(&mut self.scratch);
        self.inner
            .write_all(&self.scratch)
            .await
            .context("sending a control frame")?;
        Ok(())
    }

    /// Write a data frame without copying the payload.
    pub async fn data(&mut self, doc: u32, offset: u64, payload: &[u8]) -> Result<()> {
        let hdr = Data::encode_header(doc, offset, payload.len());
        self.inner
            .write_all(&hdr)
            .await
            .context("sending a data frame")?;
        self.inner
            .write_all(payload)
            .await
            .context("sending a data frame")?;
        Ok(())
    }

    pub async fn flush(&mut self) -> Result<()> {
        self.inner.flush().await.context("flushing a connection")
    }

    pub async fn shutdown(&mut self) -> Result<()> {
        self.inner.shutdown().await.context("closing a connection")
    }
}
