//! Phase 2 of a send, *connect*: channel 0 (TLS handshake, usually begun while the documents
//! were prepared: see [`Dial`]), HELLO and SESSION, then the extra TLS channels (resuming
//! channel 0's TLS session) and the plain channels, each joining the session with its token.
//! Timed per kind of connection for the thesis's connection time.
//!
//! A plain channel does not wait for its JOIN's answer: its cleartext follows the JOIN at once,
//! and the answer is read while it sends ([`Connected::plain_joins`]). Waiting cost a round trip
//! that secure-only does not pay (50 ms of every session on a 50 ms path), and it protected
//! nothing: the plain address came over TLS in SESSION, the bytes are public, and a receiver
//! that refuses the JOIN drops them unread and fails the session, which the answer then
//! explains.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sieve_core::frame::Limits;
use sieve_core::message::{self, Join, Message};
use sieve_core::sender::{Channel, JoinRefused, SenderSession};
use sieve_core::Kind;
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use crate::conn::{FrameReader, FrameWriter};
use crate::explain;
use crate::mac::PlainMac;
use crate::sendq::SendQueues;
use crate::token::JoinKey;

use super::dial::{is_same_host, take_early, tls_connect, Dial};
use super::SendConfig;

/// A session whose every channel has joined.
pub(super) struct Connected {
    /// Channel 0: acknowledgements arrive here.
    pub reader0: FrameReader,
    pub writer0: FrameWriter,
    /// The receiver's SESSION answer (the session's state machine has taken it too).
    pub session: message::SessionMsg,
    pub mac: PlainMac,
    pub cipher: String,
    /// Writers of the secure channels; channel 0's slot is `None` (it shares `writer0`).
    pub secure_writers: Vec<Option<FrameWriter>>,
    pub plain_writers: Vec<Option<FrameWriter>>,
    /// The plain channels' JOIN answers, still on their way: each must be JOIN_OK
    /// ([`check_plain_join`]); the transfer reads them while the channels send.
    pub plain_joins: JoinSet<PlainJoin>,
    /// Extra TLS channels that resumed channel 0's TLS session.
    pub resumed: usize,
    /// The sockets of every channel, whose queues count as progress while they drain.
    pub queues: Arc<SendQueues>,
    /// The same, of each kind (indexed by [`Kind::index`]): the compressor measures the link
    /// on the sockets of the kind it compresses.
    pub kind_queues: [Arc<SendQueues>; 2],
    /// The receiver is on this host (the plain channels, or channel 0 without them, connect
    /// to a loopback address or to the address they connect from): the "link" is memory, and
    /// both ends share the CPU.
    pub same_host: bool,
    /// What the send waited for channel 0 once the documents were prepared.
    pub first_tls: Duration,
    /// What of channel 0's connection ran while they were prepared ([`Dial`]).
    pub ahead: Duration,
    pub extra_tls: Duration,
    pub plain: Duration,
    /// Where the plain channels connected (`None` without plain channels).
    pub plain_addr: Option<SocketAddr>,
    /// Plain channels whose connection opened during channel 0's handshake.
    pub plain_early: usize,
}

/// Open channel 0 (or take it from `ahead`, opened while the documents were prepared), say the
/// session's HELLO, and join its other channels.
pub(super) async fn connect(
    cfg: &SendConfig,
    sm: &mut SenderSession,
    ahead: Option<Dial>,
) -> Result<Connected> {
    let t_connect = Instant::now();
    let (n_secure, n_plain) = (sm.channels(Kind::Secure), sm.channels(Kind::Plain));
    let taken = match ahead {
        Some(mut d) => d.channel0(false).await?.map(|o| (d, o)),
        None => None,
    };
    let (mut dial, tls0) = match taken {
        Some(t) => t,
        None => {
            let mut d = Dial::start(cfg, n_plain, None)?;
            let o = d
                .channel0(true)
                .await?
                .ok_or_else(|| anyhow!("channel 0 was not opened"))?;
            (d, o)
        }
    };
    let first_tls = t_connect.elapsed();
    // What of channel 0's connection ran while the documents were prepared.
    let ahead = tls0
        .done
        .min(t_connect)
        .saturating_duration_since(dial.started);
    let (connector, name) = (dial.connector.clone(), dial.name.clone());
    let (queues, kind_queues) = (dial.queues.clone(), dial.kind_queues.clone());
    let secure_q = kind_queues[Kind::Secure.index()].clone();
    let mut same_host = tls0.same_host;
    let tls0 = tls0.tls;
    let cipher = tls0.cipher;
    let exported = tls0.exporter;
    let limits = Limits::default();
    let mut reader0 = FrameReader::new(tls0.read, limits);
    let mut writer0 = FrameWriter::new(tls0.write);
    let hello = *sm.hello();
    writer0.send(|o| hello.encode(o)).await?;
    writer0.flush().await?;
    let answer = tokio::time::timeout(cfg.idle_timeout, reader0.message())
        .await
        .map_err(|_| {
            anyhow!(
                "the receiver did not answer HELLO within {:?}",
                cfg.idle_timeout
            )
        })?;
    // Under mutual TLS the receiver checks the client certificate after the handshake, so a
    // refused certificate shows here, as the answer to the first frame.
    let answer = answer.map_err(|e| {
        anyhow!(
            "the receiver at {} did not start a session: {}",
            cfg.to,
            explain::connection_lost(&e, "the receiver")
        )
    })?;
    let session = sm.on_hello_answer(answer)?.clone();
    let key = JoinKey::derive(&exported, &session.session_id);
    let mac = PlainMac::derive_for(session.mac, &exported, &session.session_id);

    let t_extra = Instant::now();
    let mut extra = JoinSet::new();
    for i in 1..n_secure {
        let (cfg, connector, name, queues, secure_q) = (
            cfg.clone(),
            connector.clone(),
            name.clone(),
            queues.clone(),
            secure_q.clone(),
        );
        let j = sm.join(channel(Kind::Secure, i), key.token(Kind::Secure, i))?;
        extra.spawn(async move {
            let (tls, _) = tls_connect(&cfg, &connector, &name, (&queues, &secure_q)).await?;
            let (r, w, resumed) = (tls.read, tls.write, tls.resumed);
            let (w, answer) = join(
                FrameReader::new(r, limits),
                FrameWriter::new(w),
                j,
                "a secure channel",
                cfg.idle_timeout,
            )
            .await?;
            anyhow::Ok((i, w, answer, resumed))
        });
    }

    let t_plain = Instant::now();
    let plain_addr = resolve_plain(&session.plain_addr, &cfg.to)?;
    if n_plain == 0 || dial.guess != Some(plain_addr) {
        // No plain channel after all (auto chose secure-only), or the receiver's plain port
        // moved (or none was remembered): the early connections are not needed.
        dial.drop_early();
    }
    let advertised = session.plain_addr.clone();
    let mut plains = JoinSet::new();
    let (idle, sendfile) = (cfg.idle_timeout, cfg.sendfile);
    for i in 0..n_plain {
        let queues = queues.clone();
        let plain_q = kind_queues[Kind::Plain.index()].clone();
        let advertised = advertised.clone();
        let j = sm.join(channel(Kind::Plain, i), key.token(Kind::Plain, i))?;
        let early = dial.early.get_mut(usize::from(i)).and_then(Option::take);
        plains.spawn(async move {
            let early = match early {
                Some(e) => take_early(e).await,
                None => None,
            };
            let opened_early = early.is_some();
            let tcp = match early {
                Some(tcp) => tcp,
                None => connect_plain(plain_addr, &advertised).await?,
            };
            let _ = tcp.set_nodelay(true);
            queues.watch(&tcp);
            plain_q.watch(&tcp);
            let local = is_same_host(&tcp);
            let (r, w) = tcp.into_split();
            let w = if sendfile.uses_sendfile(local) {
                FrameWriter::tcp(w)
            } else {
                FrameWriter::new(Box::new(w))
            };
            let w = send_join(w, j).await?;
            let r = FrameReader::new(Box::new(r), limits);
            anyhow::Ok((i, w, r, local, opened_early))
        });
    }
    // The extra secure channels and the plain ones set up at the same time: each waits on its
    // own round trips (TCP, TLS, JOIN), so doing them one kind after the other added them up.
    let mut secure_writers: Vec<Option<FrameWriter>> = (0..n_secure).map(|_| None).collect();
    let mut resumed = 0;
    while let Some(r) = extra.join_next().await {
        let (i, w, answer, res) = r??;
        joined(sm, channel(Kind::Secure, i), answer, "a secure channel")?;
        secure_writers[i as usize] = Some(w);
        resumed += usize::from(res);
    }
    let extra_tls = t_extra.elapsed();
    let mut plain_writers: Vec<Option<FrameWriter>> = (0..n_plain).map(|_| None).collect();
    let mut plain_joins = JoinSet::new();
    let mut plain_early = 0;
    while let Some(r) = plains.join_next().await {
        let (i, w, r, local, opened_early) = r??;
        plain_early += usize::from(opened_early);
        plain_writers[i as usize] = Some(w);
        if i == 0 {
            same_host = local;
        }
        let what = format!("the plain channel to {plain_addr}");
        plain_joins.spawn(async move {
            let answer = join_answer(r, &what, idle).await;
            PlainJoin {
                channel: channel(Kind::Plain, i),
                what,
                answer,
            }
        });
    }
    let plain_time = t_plain.elapsed();
    Ok(Connected {
        reader0,
        writer0,
        session,
        mac,
        cipher,
        secure_writers,
        plain_writers,
        plain_joins,
        resumed,
        queues,
        kind_queues,
        same_host,
        first_tls,
        ahead,
        extra_tls,
        plain: plain_time,
        plain_addr: (n_plain > 0).then_some(plain_addr),
        plain_early,
    })
}

/// A plain channel's connection to `addr` (what the receiver `advertised` in SESSION,
/// resolved), with an error that says what to check.
async fn connect_plain(addr: SocketAddr, advertised: &str) -> Result<TcpStream> {
    TcpStream::connect(addr).await.map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                "nothing listens there: the receiver's --plain-listen must be an address \
                 senders can reach, and a firewall must let them through"
                    .to_string()
            }
            std::io::ErrorKind::TimedOut => {
                "no answer: is a firewall dropping the receiver's plain port?".to_string()
            }
            _ => e.to_string(),
        };
        anyhow!(
            "cannot open a plain channel to {addr} (the receiver advertised {advertised}): {why}"
        )
    })
}

/// Whether `tcp` leads to this host: a loopback peer, or a peer at the address the connection
/// comes from.
/// Send `join` and read the receiver's answer ([`joined`] says whether it is accepted).
async fn join(
    r: FrameReader,
    w: FrameWriter,
    join: Join,
    what: &str,
    limit: Duration,
) -> Result<(FrameWriter, Message)> {
    let w = send_join(w, join).await?;
    Ok((w, join_answer(r, what, limit).await?))
}

/// Send `join` on a new channel.
async fn send_join(mut w: FrameWriter, join: Join) -> Result<FrameWriter> {
    w.send(|o| join.encode(o)).await?;
    w.flush().await?;
    Ok(w)
}

/// The receiver's answer to a channel's JOIN, read within `limit`.
async fn join_answer(mut r: FrameReader, what: &str, limit: Duration) -> Result<Message> {
    tokio::time::timeout(limit, r.message())
        .await
        .map_err(|_| anyhow!("{what} was not accepted within {limit:?}"))?
        .map_err(|e| {
            anyhow!(
                "{what} was not accepted: {} (is it the same receiver? another program may \
                 listen on that port)",
                explain::connection_lost(&e, "the peer")
            )
        })
}

/// A plain channel's JOIN answer, read while the channel sends.
pub(super) struct PlainJoin {
    channel: Channel,
    /// The channel, for errors ("the plain channel to 10.0.0.2:7080").
    what: String,
    answer: Result<Message>,
}

/// Tell the session a plain channel's JOIN answer: an error unless it is JOIN_OK.
pub(super) fn check_plain_join(sm: &mut SenderSession, join: PlainJoin) -> Result<()> {
    let answer = join.answer?;
    joined(sm, join.channel, answer, &join.what)
}

/// The receiver's answer to `channel`'s JOIN, told to the session: `what` names the channel in
/// the error.
fn joined(sm: &mut SenderSession, channel: Channel, answer: Message, what: &str) -> Result<()> {
    sm.on_join_answer(channel, answer).map_err(|e| match e {
        JoinRefused::Refused(why) => anyhow!("{what} refused: {why}"),
        JoinRefused::Unexpected(other) => anyhow!("{what}: unexpected answer {other}"),
    })
}

fn channel(kind: Kind, index: u8) -> Channel {
    Channel { kind, index }
}

/// The port `sieve serve` listens on for TLS unless told otherwise.
pub const DEFAULT_PORT: u16 = 7443;

/// `to` as `host:port`, with [`DEFAULT_PORT`] when it names a host alone (`10.0.0.2`,
/// `receiver.example`, `::1`, `[::1]`).
pub fn with_default_port(to: &str) -> String {
    if to.parse::<SocketAddr>().is_ok() {
        return to.to_string();
    }
    if let Ok(ip) = to
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
    {
        return SocketAddr::new(ip, DEFAULT_PORT).to_string();
    }
    match to.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => to.to_string(),
        _ => format!("{to}:{DEFAULT_PORT}"),
    }
}

/// The advertised plain address; an unspecified host (0.0.0.0) means "the host I reached". A
/// loopback address advertised by a receiver reached elsewhere is refused: it would lead the
/// plain channels to whatever listens on this machine's own loopback.
fn resolve_plain(advertised: &str, to: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let mut addr = advertised
        .to_socket_addrs()
        .with_context(|| {
            format!("the receiver advertised an unusable plain address '{advertised}'")
        })?
        .next()
        .with_context(|| {
            format!("the receiver advertised an unusable plain address '{advertised}'")
        })?;
    let to_ip = to
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .context("cannot resolve the receiver's address")?;
    if addr.ip().is_unspecified() {
        addr.set_ip(to_ip);
    }
    if addr.ip().is_loopback() && !to_ip.is_loopback() {
        bail!(
            "the receiver at {to} told senders to open plain channels to {advertised}, its own \
             loopback address, which no other machine can reach: start it with --plain-listen \
             on an address senders can reach (or --plain-advertise behind NAT)"
        );
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_alone_gets_the_default_port() {
        assert_eq!(with_default_port("10.99.0.2"), "10.99.0.2:7443");
        assert_eq!(with_default_port("10.99.0.2:9000"), "10.99.0.2:9000");
        assert_eq!(with_default_port("::1"), "[::1]:7443");
        assert_eq!(with_default_port("[::1]"), "[::1]:7443");
        assert_eq!(with_default_port("[::1]:8443"), "[::1]:8443");
        assert_eq!(
            with_default_port("receiver.example"),
            "receiver.example:7443"
        );
        assert_eq!(
            with_default_port("receiver.example:1"),
            "receiver.example:1"
        );
    }

    #[test]
    fn a_loopback_plain_address_from_a_remote_receiver_is_refused() {
        let e = resolve_plain("127.0.0.1:7080", "10.99.0.2:7443").unwrap_err();
        assert!(e.to_string().contains("--plain-listen"), "{e}");
        assert_eq!(
            resolve_plain("127.0.0.1:7080", "127.0.0.1:7443").unwrap(),
            "127.0.0.1:7080".parse().unwrap()
        );
        assert_eq!(
            resolve_plain("0.0.0.0:7080", "10.99.0.2:7443").unwrap(),
            "10.99.0.2:7080".parse().unwrap()
        );
    }
}
