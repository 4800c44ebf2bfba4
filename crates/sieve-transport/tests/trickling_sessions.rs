//! Sessions that trickle cannot lock honest senders out (SECURITY.md, "trickling sessions"):
//! 64 TLS sessions from four addresses (16 each, the per-address cap) announce a 1 GiB document
//! and keep sending one-byte DATA frames, every whole frame a valid piece of it. The receiver is
//! at capacity; an honest sender from a fifth address of the same /24 still completes within
//! 5 s, each of several times while the attackers reconnect whatever is dropped.

mod common;

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use sieve_core::layout::{Kind, Layout};
use sieve_core::message::{Doc, Mode};
use sieve_transport::receiver::ServeLimits;

/// How often each attacking session sends its one-byte frame: faster than the red team's 20 s
/// (the idle timeout below is the default 60 s), so every session is always active by the
/// old rule of "any whole frame".
const TRICKLE: Duration = Duration::from_millis(500);
/// Sessions the attack tries to hold, from 127.0.0.2 to 127.0.0.5.
const ATTACKERS: usize = 64;
const ROUNDS: usize = 3;

/// Raise this process's soft open-file limit to its hard one.
fn more_files() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    l.current = l.maximum;
    let _ = setrlimit(Resource::Nofile, l);
}

/// Sessions the receiver holds open now.
fn open(rx: &TestReceiver) -> u64 {
    let st = &rx.stats;
    st.sessions_started.load(Ordering::Relaxed)
        - st.sessions_completed.load(Ordering::Relaxed)
        - st.sessions_failed.load(Ordering::Relaxed)
}

/// One attacker: opens a session from `from`, announces a 1 GiB document and sends one byte of
/// it every [`TRICKLE`]; when the receiver ends the session it opens another at once, and when
/// it is refused it tries again half a second later. Counts its sessions in `opened`.
async fn trickler(
    rx: Arc<TestReceiver>,
    from: Ipv4Addr,
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicU64>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = RawSession::open_from(&rx, from, Mode::Sieve, 1, 1, 1).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        opened.fetch_add(1, Ordering::Relaxed);
        n += 1;
        let doc = Doc {
            doc: 0,
            name: format!("trickle-{from}-{n}.bin"),
            layout: Layout {
                first: Kind::Secure,
                lens: vec![1 << 30],
            },
            marks: None,
            padding: 0,
        };
        if s.send(|o| doc.encode(o)).await.is_err() {
            continue;
        }
        let mut offset = 0u64;
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let sent = async {
                s.writer.data(0, offset, b"x").await?;
                s.writer.flush().await
            };
            if sent.await.is_err() {
                break;
            }
            offset += 1;
            // Whatever the receiver says (an ERROR) or a close ends this session.
            match tokio::time::timeout(TRICKLE, s.reader.read()).await {
                Err(_) => {}
                Ok(_) => break,
            }
        }
    }
}

/// The attack, then `ROUNDS` honest sends from 127.0.0.1, each once the attackers hold every
/// session they can (`full`); each must complete within 5 s.
async fn attack_and_send(rx: Arc<TestReceiver>, full: u64) -> Vec<Duration> {
    more_files();
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let mut attackers = tokio::task::JoinSet::new();
    for i in 0..ATTACKERS {
        let from = Ipv4Addr::new(127, 0, 0, 2 + (i % 4) as u8);
        attackers.spawn(trickler(rx.clone(), from, stop.clone(), opened.clone()));
    }
    let src = tempfile::tempdir().unwrap();
    let (_, doc) = marked_doc(3, 1_000_000, 10);
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        let r = rx.clone();
        wait_for(
            &format!("the attackers to hold {full} sessions (round {round})"),
            Duration::from_secs(30),
            || open(&r) >= full,
        )
        .await;
        let name = format!("honest-{round}.txt");
        let path = write(src.path(), &name, &doc);
        let t = Instant::now();
        let sent = tokio::time::timeout(
            Duration::from_secs(5),
            send(&rx.simple(Mode::Sieve), &[path]),
        )
        .await;
        let took = t.elapsed();
        let report = match sent {
            Err(_) => panic!(
                "round {round}: the honest sender did not finish within 5 s beside {} trickling sessions",
                open(&rx)
            ),
            Ok(Err(e)) => panic!(
                "round {round}: the honest sender failed after {:.1} s beside {} trickling sessions: {e:#}",
                took.as_secs_f64(),
                open(&rx)
            ),
            Ok(Ok(r)) => r,
        };
        assert_eq!(report.docs_ok, 1);
        rx.assert_received(&name, &doc);
        times.push(took);
    }
    stop.store(true, Ordering::Relaxed);
    attackers.abort_all();
    eprintln!(
        "trickling: {ATTACKERS} attackers from 127.0.0.2-5 held {full} sessions and opened {} in all; \
         honest sends from 127.0.0.1: {:?} ms",
        opened.load(Ordering::Relaxed),
        times.iter().map(|t| t.as_millis()).collect::<Vec<_>>()
    );
    times
}

/// Sessions the attack can hold at most: the receiver's limit, or its network's.
fn most_held(rx: &TestReceiver, limits: &ServeLimits) -> u64 {
    let _ = rx;
    (ATTACKERS
        .min(limits.max_sessions)
        .min(limits.sessions_per_network())) as u64
}

/// The two tests below run one after the other: each is 64 attackers and a receiver, which on a
/// small machine would otherwise slow each other's honest sender.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn run(adjust: impl FnOnce(&mut ServeLimits)) {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut limits = ServeLimits {
        idle_timeout: Duration::from_secs(60),
        ..ServeLimits::default()
    };
    adjust(&mut limits);
    let l = limits.clone();
    let rx = Arc::new(
        TestReceiver::start_with(tempfile::tempdir().unwrap(), move |c| c.limits = l).await,
    );
    let full = most_held(&rx, &limits);
    attack_and_send(rx.clone(), full).await;
    let evicted = rx.stats.sessions_evicted.load(Ordering::Relaxed);
    eprintln!("trickling: {evicted} sessions ended to admit a newcomer");
    assert!(
        evicted >= ROUNDS as u64,
        "only {evicted} sessions were ended to make room"
    );
}

/// The defaults: the four addresses (and the honest sender's) share one /24, which may hold
/// half of the receiver's 64 sessions; the attackers fill it, and the honest sender, from the
/// same /24, must take the place of one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_sessions_from_four_addresses_leave_room_for_an_honest_sender() {
    run(|_| {}).await;
}

/// The same with the network's cap lifted: the attackers fill the whole receiver (64
/// sessions), and the honest sender must take the place of one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_sessions_filling_the_receiver_leave_room_for_an_honest_sender() {
    run(|l| l.max_sessions_per_network = Some(64)).await;
}

/// However many newcomers ask, a receiver full of sessions that move data at a useful rate
/// never ends one of them for a newcomer: four honest senders at 512 KB/s each (eight times the
/// minimum rate; their TLS channels go through a throttling proxy) fill a receiver of four
/// sessions while attackers from 127.0.0.2 keep asking for one. The attackers are refused
/// while the four run, and every honest document arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_that_move_data_are_never_ended_for_a_newcomer() {
    let _one = ONE_AT_A_TIME.lock().await;
    const HONEST: usize = 4;
    let rx = Arc::new(
        TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
            c.limits.max_sessions = HONEST;
        })
        .await,
    );
    let proxy = common::proxy::FaultProxy::bind().await;
    proxy.set_target(rx.addr);
    proxy.set_plan(common::proxy::Plan::up(common::proxy::Fault::Throttle(
        512_000,
    )));
    let src = tempfile::tempdir().unwrap();
    let mut honest = tokio::task::JoinSet::new();
    for i in 0..HONEST {
        let doc = binary(40 + i as u64, 1_500_000);
        let name = format!("steady-{i}.bin");
        let path = write(src.path(), &name, &doc);
        let mut cfg = rx.simple(Mode::SecureOnly);
        cfg.to = proxy.addr.to_string();
        let rx = rx.clone();
        honest.spawn(async move {
            let t = Instant::now();
            rx.send_ok(&cfg, &[path]).await;
            rx.assert_received(&name, &doc);
            t.elapsed()
        });
    }
    // The four are under way: every place is taken, each session well past its first bytes.
    let r = rx.clone();
    wait_for(
        "four honest sessions to be moving data",
        Duration::from_secs(10),
        || open(&r) == HONEST as u64 && r.stats.bytes_received.load(Ordering::Relaxed) >= 1 << 20,
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicU64::new(0));
    let mut attackers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (rx, stop, refused) = (rx.clone(), stop.clone(), refused.clone());
        attackers.spawn(async move {
            let mut held = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match RawSession::open_from(&rx, Ipv4Addr::new(127, 0, 0, 2), Mode::Sieve, 1, 1, 1)
                    .await
                {
                    // A place an honest session left.
                    Ok(s) => held.push(s),
                    Err(_) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
    let mut times = Vec::new();
    while let Some(r) = honest.join_next().await {
        times.push(r.expect("an honest session failed"));
    }
    stop.store(true, Ordering::Relaxed);
    attackers.abort_all();
    let refused = refused.load(Ordering::Relaxed);
    eprintln!(
        "steady: {HONEST} sessions at 512 KB/s took {:?} ms; {refused} newcomers refused meanwhile, \
         {} sessions ended for newcomers (attackers' own, once honest places came free)",
        times.iter().map(|t| t.as_millis()).collect::<Vec<_>>(),
        rx.stats.sessions_evicted.load(Ordering::Relaxed)
    );
    assert!(refused > 0, "no newcomer asked while the receiver was full");
}
