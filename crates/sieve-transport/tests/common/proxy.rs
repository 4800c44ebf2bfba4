//! A fault-injecting TCP proxy: per direction and per connection it can delay, throttle, reset,
//! stall, truncate, duplicate a chunk or corrupt a byte. The plan can be changed while the proxy
//! runs (it is read when a connection is accepted), so a test can inject a fault into one session
//! and let the next one through untouched.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What happens to one direction of one connection. Offsets count bytes of that direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward unchanged.
    Pass,
    /// Hold every chunk this long before forwarding it (latency).
    Delay(Duration),
    /// At most this many bytes per second.
    Throttle(u64),
    /// Forward this many bytes, then reset both sides of the connection (RST).
    Reset(u64),
    /// Forward this many bytes, then forward nothing more (the connection stays open).
    Stall(u64),
    /// Forward this many bytes, then close this direction cleanly (FIN).
    Truncate(u64),
    /// Forward the `len` bytes starting at `at` twice.
    Duplicate { at: u64, len: u64 },
    /// Invert the byte at this offset.
    Corrupt(u64),
}

impl Fault {
    pub fn is_pass(&self) -> bool {
        *self == Fault::Pass
    }
}

/// Faults of one connection: client-to-server (`up`) and server-to-client (`down`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub up: Fault,
    pub down: Fault,
    /// Apply to the connection with this index (0 = the first one accepted) only; `None`: all.
    pub conn: Option<u64>,
}

impl Plan {
    pub const PASS: Plan = Plan {
        up: Fault::Pass,
        down: Fault::Pass,
        conn: None,
    };

    pub fn up(f: Fault) -> Plan {
        Plan {
            up: f,
            ..Plan::PASS
        }
    }

    pub fn down(f: Fault) -> Plan {
        Plan {
            down: f,
            ..Plan::PASS
        }
    }
}

/// Counters of a [`FaultProxy`].
#[derive(Debug, Default)]
pub struct ProxyStats {
    pub connections: AtomicU64,
    /// Faults that took effect (a byte changed, a chunk duplicated, a reset, stall or truncation
    /// reached; delays and throttles count once per connection that carried data).
    pub faults_fired: AtomicU64,
    pub up_bytes: AtomicU64,
    pub down_bytes: AtomicU64,
    /// Set to keep every byte read from clients (all connections, in order: what an observer of
    /// the link sees) in `up_record`.
    pub record_up: std::sync::atomic::AtomicBool,
    pub up_record: Mutex<Vec<u8>>,
}

/// A running fault proxy; stops (and closes every connection it holds) when dropped.
pub struct FaultProxy {
    pub addr: SocketAddr,
    pub stats: Arc<ProxyStats>,
    plan: Arc<Mutex<Plan>>,
    target: Arc<Mutex<Option<SocketAddr>>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Listen now; connections wait for [`FaultProxy::set_target`] (the receiver must know the
    /// proxy's address before it binds).
    pub async fn bind() -> FaultProxy {
        Self::start(TcpListener::bind("127.0.0.1:0").await.expect("proxy binds"))
    }

    /// A proxy whose sockets take only a few KiB at a time from their clients. With a throttle,
    /// the bytes then back up into the client's own socket, as they do before a slow network
    /// link (on loopback a proxy's large receive buffer would otherwise take them all at once).
    pub async fn bind_narrow() -> FaultProxy {
        let socket = tokio::net::TcpSocket::new_v4().expect("proxy socket");
        socket
            .set_recv_buffer_size(4096)
            .expect("small receive buffer");
        socket
            .bind("127.0.0.1:0".parse().unwrap())
            .expect("proxy binds");
        Self::start(socket.listen(64).expect("proxy listens"))
    }

    fn start(listener: TcpListener) -> FaultProxy {
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(ProxyStats::default());
        let plan = Arc::new(Mutex::new(Plan::PASS));
        let target: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
        let (stop, _) = watch::channel(false);
        let (st, pl, tg, stop_rx) = (
            stats.clone(),
            plan.clone(),
            target.clone(),
            stop.subscribe(),
        );
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let index = st.connections.fetch_add(1, Ordering::Relaxed);
                let plan = *pl.lock().unwrap();
                let plan = match plan.conn {
                    Some(k) if k != index => Plan::PASS,
                    _ => plan,
                };
                let Some(target) = *tg.lock().unwrap() else {
                    continue;
                };
                let (st, mut stop_rx) = (st.clone(), stop_rx.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = connection(client, target, plan, st) => {}
                        _ = stop_rx.wait_for(|s| *s) => {}
                    }
                });
            }
        });
        FaultProxy {
            addr,
            stats,
            plan,
            target,
            stop,
            task,
        }
    }

    pub fn set_target(&self, target: SocketAddr) {
        *self.target.lock().unwrap() = Some(target);
    }

    /// The plan for connections accepted from now on; `conn` indices count from the proxy's start.
    pub fn set_plan(&self, plan: Plan) {
        *self.plan.lock().unwrap() = plan;
    }

    pub fn connections(&self) -> u64 {
        self.stats.connections.load(Ordering::Relaxed)
    }

    pub fn fired(&self) -> u64 {
        self.stats.faults_fired.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.task.abort();
    }
}

async fn connection(client: TcpStream, target: SocketAddr, plan: Plan, st: Arc<ProxyStats>) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    // A reset in either direction ends the whole connection.
    let (kill, _) = watch::channel(false);
    let up = pump(cr, sw, plan.up, kill.clone(), st.clone(), true);
    let down = pump(sr, cw, plan.down, kill.clone(), st, false);
    let mut killed = kill.subscribe();
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = killed.wait_for(|k| *k) => {}
    }
}

/// Forward one direction, applying `fault`. Returns when the direction is finished.
async fn pump(
    mut r: OwnedReadHalf,
    mut w: OwnedWriteHalf,
    fault: Fault,
    kill: watch::Sender<bool>,
    st: Arc<ProxyStats>,
    up: bool,
) {
    let chunk = match fault {
        // Small reads so that the rate is smooth.
        Fault::Throttle(rate) => (rate / 20).clamp(1, 16 * 1024) as usize,
        _ => 32 * 1024,
    };
    let counter = if up { &st.up_bytes } else { &st.down_bytes };
    let mut buf = vec![0u8; chunk];
    let mut pos = 0u64;
    let mut timed_fired = false;
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let (start, end) = (pos, pos + n as u64);
        pos = end;
        // What the client put on the wire, whether or not the server takes it.
        if up && st.record_up.load(Ordering::Relaxed) {
            st.up_record.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        let cut = |at: u64| (at.saturating_sub(start) as usize).min(n);
        let sent = match fault {
            Fault::Pass => w.write_all(&buf[..n]).await,
            Fault::Delay(d) => {
                if !timed_fired {
                    timed_fired = true;
                    st.faults_fired.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(d).await;
                w.write_all(&buf[..n]).await
            }
            Fault::Throttle(rate) => {
                if !timed_fired {
                    timed_fired = true;
                    st.faults_fired.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate as f64)).await;
                w.write_all(&buf[..n]).await
            }
            Fault::Corrupt(at) => {
                if (start..end).contains(&at) {
                    buf[(at - start) as usize] ^= 0xff;
                    st.faults_fired.fetch_add(1, Ordering::Relaxed);
                }
                w.write_all(&buf[..n]).await
            }
            Fault::Duplicate { at, len } => {
                if (start..end).contains(&at) {
                    let a = (at - start) as usize;
                    let b = cut(at + len);
                    st.faults_fired.fetch_add(1, Ordering::Relaxed);
                    let mut out = Vec::with_capacity(n + b - a);
                    out.extend_from_slice(&buf[..b]);
                    out.extend_from_slice(&buf[a..b]);
                    out.extend_from_slice(&buf[b..n]);
                    w.write_all(&out).await
                } else {
                    w.write_all(&buf[..n]).await
                }
            }
            Fault::Reset(after) | Fault::Stall(after) | Fault::Truncate(after) if end >= after => {
                let k = cut(after);
                let _ = w.write_all(&buf[..k]).await;
                let _ = w.flush().await;
                counter.fetch_add(k as u64, Ordering::Relaxed);
                st.faults_fired.fetch_add(1, Ordering::Relaxed);
                match fault {
                    Fault::Reset(_) => {
                        let _ = r.as_ref().set_zero_linger();
                        let _ = w.as_ref().set_zero_linger();
                        let _ = kill.send(true);
                        return;
                    }
                    Fault::Stall(_) => {
                        // Hold both halves open and forward nothing, until the proxy stops.
                        std::future::pending::<()>().await;
                    }
                    _ => {
                        let _ = w.shutdown().await;
                        // Swallow what still comes, so the peer is not reset by unread data.
                        while let Ok(n) = r.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                        }
                        return;
                    }
                }
                unreachable!()
            }
            _ => w.write_all(&buf[..n]).await,
        };
        if sent.is_err() {
            break;
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
    let _ = w.shutdown().await;
}
