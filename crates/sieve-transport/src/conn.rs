//! Moving frames over a byte stream (TLS or plain TCP): the only place that reads or writes them.

use anyhow::{anyhow, bail, Context, Result};
use sieve_core::frame::{self, FrameType, Limits, HEADER_LEN};
use sieve_core::message::{Data, Message};
use tokio::io::{
    AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter, Interest,
};
use tokio::net::tcp::OwnedWriteHalf;

pub type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
pub type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// Reads whole frames; the payload buffer is reused, and never grows past the limit.
///
/// Cancel-safe: [`FrameReader::read`] may be dropped at any await (a timeout, a `select!`) and
/// called again; bytes of a partly received frame are kept here, never lost.
pub struct FrameReader {
    inner: BufReader<BoxRead>,
    buf: Vec<u8>,
    limits: Limits,
    /// The header of the frame being read, and how much of it (then of its payload) has come.
    hdr: [u8; HEADER_LEN],
    hdr_have: usize,
    body_have: usize,
}

impl FrameReader {
    pub fn new(inner: BoxRead, limits: Limits) -> FrameReader {
        FrameReader {
            inner: BufReader::with_capacity(64 * 1024, inner),
            buf: Vec::new(),
            limits,
            hdr: [0; HEADER_LEN],
            hdr_have: 0,
            body_have: 0,
        }
    }

    /// Change what the next frames may claim (e.g. a small limit before the peer is
    /// authenticated, the session's limit after).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The next frame, or `None` on a clean end of stream between frames.
    pub async fn read(&mut self) -> Result<Option<(FrameType, &[u8])>> {
        // Every await below is a single `read`, which either takes bytes or takes none.
        while self.hdr_have < HEADER_LEN {
            let n = self
                .inner
                .read(&mut self.hdr[self.hdr_have..])
                .await
                .context("reading a frame header")?;
            if n == 0 {
                // A clean close (no byte of a new frame) or a truncated header.
                if self.hdr_have == 0 {
                    return Ok(None);
                }
                return Err(anyhow!("connection closed inside a frame header"));
            }
            self.hdr_have += n;
        }
        let h = frame::parse_header(&self.hdr, &self.limits)?;
        let len = h.len as usize;
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        while self.body_have < len {
            let n = self
                .inner
                .read(&mut self.buf[self.body_have..len])
                .await
                .context("reading a frame")?;
            if n == 0 {
                return Err(anyhow!(
                    "connection closed inside a {} frame of {len} bytes",
                    h.ty.name()
                ));
            }
            self.body_have += n;
        }
        self.hdr_have = 0;
        self.body_have = 0;
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
    inner: Sink,
    scratch: Vec<u8>,
}

/// Where frames go: any stream (TLS), or a plain TCP socket, which can also take file bytes
/// by `sendfile(2)` without them passing through this process.
enum Sink {
    Stream(BufWriter<BoxWrite>),
    Tcp(BufWriter<OwnedWriteHalf>),
}

impl FrameWriter {
    pub fn new(inner: BoxWrite) -> FrameWriter {
        FrameWriter {
            inner: Sink::Stream(BufWriter::with_capacity(64 * 1024, inner)),
            scratch: Vec::new(),
        }
    }

    /// A writer on a plain TCP socket; [`FrameWriter::data_from_file`] then sends payloads
    /// straight from the page cache.
    pub fn tcp(inner: OwnedWriteHalf) -> FrameWriter {
        FrameWriter {
            inner: Sink::Tcp(BufWriter::with_capacity(64 * 1024, inner)),
            scratch: Vec::new(),
        }
    }

    fn w(&mut self) -> &mut (dyn AsyncWrite + Send + Unpin) {
        match &mut self.inner {
            Sink::Stream(w) => w,
            Sink::Tcp(w) => w,
        }
    }

    /// Queue a control message (call [`FrameWriter::flush`] to send it now).
    pub async fn send(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        encode(&mut scratch);
        let r = self.w().write_all(&scratch).await;
        self.scratch = scratch;
        r.context("sending a control frame")
    }

    /// Write a data frame without copying the payload.
    pub async fn data(&mut self, doc: u32, offset: u64, payload: &[u8]) -> Result<()> {
        let hdr = Data::encode_header(doc, offset, payload.len());
        let w = self.w();
        w.write_all(&hdr).await.context("sending a data frame")?;
        w.write_all(payload).await.context("sending a data frame")?;
        Ok(())
    }

    /// Write a data frame whose payload is `payload`, which is also `file` from byte `at`.
    ///
    /// On a plain TCP socket the payload goes by `sendfile(2)`: the kernel moves it from the
    /// page cache to the socket and this process never copies it (the cleartext path's one
    /// advantage over TLS, which must see every byte to encrypt it). The header goes first with
    /// `MSG_MORE`, so header and payload still leave in full-sized segments. Elsewhere this is
    /// [`FrameWriter::data`].
    ///
    /// The caller has already authenticated `payload`. Should the file change between that and
    /// the kernel reading it, the receiver's MAC check fails the document; nothing wrong is
    /// ever committed.
    pub async fn data_from_file(
        &mut self,
        doc: u32,
        offset: u64,
        payload: &[u8],
        file: &std::fs::File,
        at: u64,
    ) -> Result<()> {
        let Sink::Tcp(w) = &mut self.inner else {
            return self.data(doc, offset, payload).await;
        };
        w.flush().await.context("sending a data frame")?;
        let tcp = w.get_ref().as_ref();
        let hdr = Data::encode_header(doc, offset, payload.len());
        let mut sent = 0;
        while sent < hdr.len() {
            sent += tcp
                .async_io(Interest::WRITABLE, || {
                    rustix::net::send(tcp, &hdr[sent..], rustix::net::SendFlags::MORE)
                        .map_err(std::io::Error::from)
                })
                .await
                .context("sending a data frame")?;
        }
        let (mut pos, end) = (at, at + payload.len() as u64);
        while pos < end {
            let want = usize::try_from(end - pos).unwrap_or(usize::MAX);
            let n = tcp
                .async_io(Interest::WRITABLE, || {
                    rustix::fs::sendfile(tcp, file, Some(&mut pos), want)
                        .map_err(std::io::Error::from)
                })
                .await
                .context("sending a data frame")?;
            if n == 0 {
                bail!("the file ended early (was it truncated while being sent?)");
            }
        }
        Ok(())
    }

    pub async fn flush(&mut self) -> Result<()> {
        self.w().flush().await.context("flushing a connection")
    }

    pub async fn shutdown(&mut self) -> Result<()> {
        self.w().shutdown().await.context("closing a connection")
    }
}
