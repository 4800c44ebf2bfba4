//! Slow and silent clients cannot lock honest senders out (SECURITY.md, "slots"): hundreds of
//! silent connections on each port and dozens of sessions that trickle a byte a second, and an
//! honest sender still gets through at once.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::*;
use sieve_core::message::Mode;
use tokio::io::AsyncWriteExt;

/// Raise this process's soft open-file limit to its hard one: the test holds a thousand and
/// more sockets at each end.
fn more_files() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    l.current = l.maximum;
    let _ = setrlimit(Resource::Nofile, l);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_trickling_clients_leave_room_for_an_honest_sender() {
    more_files();
    let rx = TestReceiver::start().await;
    let mut held = Vec::new();
    // 400 silent connections on each port, from eight addresses.
    for i in 0..400u32 {
        let from = Ipv4Addr::new(127, 0, 0, 2 + (i % 8) as u8);
        for port in [rx.addr, rx.plain] {
            held.push(connect_from(from, port).await.expect("connect"));
        }
    }
    // 64 sessions from one more address, each trickling one byte a second.
    let attacker = Ipv4Addr::new(127, 0, 0, 20);
    let mut trickling = Vec::new();
    let mut refused = 0;
    for _ in 0..64 {
        match RawSession::open_from(&rx, attacker, Mode::Sieve, 1, 1, 1).await {
            Ok(s) => trickling.push(s),
            Err(_) => refused += 1,
        }
    }
    let trickle = tokio::spawn(async move {
        loop {
            for s in &mut trickling {
                // One byte of a frame header at a time; never a whole frame.
                let _ = s.writer.send(|o| o.push(0)).await;
                let _ = s.writer.flush().await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    // The address holds 16 at most: the others were refused, or each took the place of one
    // of its own address's earlier sessions, which had fallen behind the minimum rate.
    let evicted = rx
        .stats
        .sessions_evicted
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        refused + evicted as usize >= 64 - 16,
        "one address held {} sessions",
        64 - refused - evicted as usize
    );
    // The honest sender, from its own address.
    let src = tempfile::tempdir().unwrap();
    let (_, doc) = marked_doc(3, 1_000_000, 10);
    let path = write(src.path(), "honest.txt", &doc);
    let t = Instant::now();
    let report = tokio::time::timeout(
        Duration::from_secs(5),
        send(&rx.simple(Mode::Sieve), &[path]),
    )
    .await
    .expect("the honest sender did not finish within 5 s")
    .expect("the honest sender failed");
    assert_eq!(report.docs_ok, 1);
    rx.assert_received("honest.txt", &doc);
    eprintln!(
        "honest sender: {:.0} ms beside 800 silent connections and {} trickling sessions ({refused} \
         refused, {evicted} ended for newer ones of their address)",
        t.elapsed().as_secs_f64() * 1e3,
        64 - refused - evicted as usize
    );
    trickle.abort();
    for mut c in held {
        let _ = c.shutdown().await;
    }
}
