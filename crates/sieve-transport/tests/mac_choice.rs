//! The cleartext MAC, negotiated: the receiver picks among the sender's offer by its own
//! preference, says which in SESSION, and checks the cleartext with that algorithm's key. A
//! sender that tags with another algorithm fails the document; a sender with nothing in common
//! is refused with a message that says what each side has.

mod common;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::*;
use sieve_core::layout::{Kind, Layout};
use sieve_core::ledger::Ledger;
use sieve_core::mac::{MacAlg, MacOffer, MacPreference};
use sieve_core::message::{AckStatus, Bye, Doc, DocEnd, Join, Message, Mode};
use sieve_transport::mac::PlainMac;

const ANSWER: Duration = Duration::from_secs(10);

async fn receiver_preferring(pref: MacPreference) -> TestReceiver {
    TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| c.macs = pref).await
}

/// Send "hello <$S>world<$E>!" with the cleartext tagged by `tag_with` (the negotiated
/// algorithm when `None`) and return the acknowledgement's status.
async fn send_one(
    rx: &TestReceiver,
    s: &mut RawSession,
    name: &str,
    tag_with: Option<MacAlg>,
) -> AckStatus {
    let mut plain = plain_join(
        rx.plain,
        Join {
            session_id: s.session.session_id,
            kind: Kind::Plain,
            index: 0,
            token: s.key.token(Kind::Plain, 0),
        },
    )
    .await
    .unwrap()
    .expect("the plain channel joins");
    let layout = Layout {
        first: Kind::Plain,
        lens: vec![6, 5, 1],
    };
    let marks = Some((b"<$S>".to_vec(), b"<$E>".to_vec()));
    s.send(|o| {
        Doc {
            doc: 0,
            name: name.into(),
            layout,
            marks,
            padding: 0,
        }
        .encode(o)
    })
    .await
    .unwrap();
    plain.data(0, 0, b"hello ").await.unwrap();
    plain.data(0, 6, b"!").await.unwrap();
    plain.flush().await.unwrap();
    s.writer.data(0, 0, b"world").await.unwrap();
    let alg = tag_with.unwrap_or(s.session.mac);
    let mac = PlainMac::derive_for(alg, &s.exported, &s.session.session_id);
    let mut ledger = Ledger::new();
    for (off, bytes) in [(0u64, &b"hello "[..]), (6, &b"!"[..])] {
        ledger.record_hashed(off, bytes.len() as u64, mac.tag(0, off, bytes).unwrap());
    }
    let digest = ledger.finish(7).unwrap();
    s.send(|o| {
        DocEnd {
            doc: 0,
            plain_digest: digest,
            secure_len: 5,
            plain_len: 7,
        }
        .encode(o)
    })
    .await
    .unwrap();
    let status = match s.next(ANSWER).await.unwrap() {
        Message::Ack(a) => a.status,
        other => panic!("expected an ACK, got {other:?}"),
    };
    s.send(|o| Bye {}.encode(o)).await.unwrap();
    status
}

async fn open(rx: &TestReceiver, offer: MacOffer) -> anyhow::Result<RawSession> {
    RawSession::open_offering(rx, Ipv4Addr::LOCALHOST, (Mode::Sieve, 1, 1, 1), offer).await
}

/// Every algorithm carries a document end to end when it is the receiver's only one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mac_carries_a_document() {
    for alg in MacAlg::ALL {
        let rx = receiver_preferring(MacPreference::only(alg)).await;
        let mut s = open(&rx, MacOffer::default()).await.unwrap();
        assert_eq!(s.session.mac, alg);
        assert_eq!(
            send_one(&rx, &mut s, "doc.txt", None).await,
            AckStatus::Ok,
            "{alg}"
        );
        rx.assert_received("doc.txt", b"hello <$S>world<$E>!");
    }
}

/// The receiver's measured order decides among what is offered, whatever the sender's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receiver_picks_by_its_measurement_among_the_offer() {
    // A receiver without carry-less multiply: BLAKE3 fastest, GMAC slowest.
    let noaes = MacPreference::from_speeds(&[
        (MacAlg::Gmac, 0.9),
        (MacAlg::Blake3, 4.0),
        (MacAlg::Poly1305, 1.8),
    ]);
    let rx = receiver_preferring(noaes).await;
    let s = open(&rx, MacOffer::new(&[MacAlg::Gmac, MacAlg::Blake3]).unwrap())
        .await
        .unwrap();
    assert_eq!(s.session.mac, MacAlg::Blake3);
    let s = open(
        &rx,
        MacOffer::new(&[MacAlg::Gmac, MacAlg::Poly1305]).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(s.session.mac, MacAlg::Poly1305);
    let s = open(&rx, MacOffer::only(MacAlg::Gmac)).await.unwrap();
    assert_eq!(
        s.session.mac,
        MacAlg::Gmac,
        "the fallback: the only common MAC"
    );
}

/// A sender that tags with another algorithm than the one negotiated (or with the right one
/// under another key) fails its document: the MACs are not interchangeable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_of_another_algorithm_fail_the_document() {
    let rx = receiver_preferring(MacPreference::only(MacAlg::Blake3)).await;
    let mut s = open(&rx, MacOffer::default()).await.unwrap();
    assert_eq!(s.session.mac, MacAlg::Blake3);
    assert_eq!(
        send_one(&rx, &mut s, "wrong.txt", Some(MacAlg::Gmac)).await,
        AckStatus::IntegrityError
    );
    assert!(!rx.out.join("wrong.txt").exists());
}

/// No algorithm in common: HELLO is refused with an error naming both lists, and the receiver
/// goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_common_mac_is_refused_clearly() {
    let rx = receiver_preferring(MacPreference::only(MacAlg::Gmac)).await;
    let e = open(&rx, MacOffer::only(MacAlg::Blake3))
        .await
        .err()
        .expect("refused");
    let text = format!("{e:#}");
    assert!(
        text.contains("no cleartext MAC in common")
            && text.contains("offers blake3")
            && text.contains("supports aes-gmac"),
        "{text}"
    );
    let mut s = open(&rx, MacOffer::default()).await.unwrap();
    assert_eq!(s.session.mac, MacAlg::Gmac);
    assert_eq!(
        send_one(&rx, &mut s, "after.txt", None).await,
        AckStatus::Ok
    );
}

/// The real sender offers every MAC it has: to a receiver that supports only one of them,
/// whichever, a document goes through, tagged with that one, and the report names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_offers_every_mac_and_uses_the_receivers_choice() {
    let src = tempfile::tempdir().unwrap();
    let doc = marked_doc(31, 1 << 20, 12).1;
    for alg in MacAlg::ALL {
        let rx = receiver_preferring(MacPreference::only(alg)).await;
        let name = format!("{}.txt", alg.name());
        let path = write(src.path(), &name, &doc);
        let r = rx.send_ok(&rx.simple(Mode::Sieve), &[path]).await;
        assert_eq!(r.mac, alg.name(), "{r:?}");
        rx.assert_received(&name, &doc);
    }
}
