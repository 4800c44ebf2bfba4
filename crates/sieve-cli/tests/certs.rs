//! `sieve certs` through the real binary: it never replaces files without `--force` (a second
//! run used to replace the CA and break running receivers), issues further client and server
//! certificates from the existing CA, says which files it wrote and for which names, and writes
//! keys readable by their owner only, never through a symbolic link.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

mod common;
use common::*;

fn certs_cmd(dir: &Path, args: &[&str]) -> std::process::Output {
    run(sieve().arg("certs").args(args).arg("--dir").arg(dir))
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_second_run_replaces_nothing_without_force() {
    let root = tempfile::tempdir().unwrap();
    let d = root.path().join("certs");
    let o = certs_cmd(&d, &["--name", "10.99.0.2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let msg = text(&o.stderr);
    assert!(
        msg.contains("localhost, 127.0.0.1, ::1, 10.99.0.2") && msg.contains("--to 10.99.0.2:7443"),
        "{msg}"
    );
    let ca = std::fs::read(d.join("ca.pem")).unwrap();
    for key in ["ca.key", "server.key"] {
        assert_eq!(mode_of(&d.join(key)), 0o600, "{key}");
    }
    let o = certs_cmd(&d, &["--client"]);
    assert!(!o.status.success());
    let msg = text(&o.stderr);
    assert!(
        msg.contains("already exist")
            && msg.contains("--force")
            && msg.contains("sieve certs client NAME"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(d.join("ca.pem")).unwrap(),
        ca,
        "the CA was replaced"
    );
    assert!(!d.join("client.pem").exists(), "a partial set was written");

    // Even with --force, a key planted as a link to a file is refused before anything is
    // written: the file it points to and the CA stay as they were, the link too.
    let victim = root.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::fs::remove_file(d.join("server.key")).unwrap();
    std::os::unix::fs::symlink(&victim, d.join("server.key")).unwrap();
    let o = certs_cmd(&d, &["--client", "--force"]);
    assert!(!o.status.success(), "a link was replaced");
    let msg = text(&o.stderr);
    assert!(
        msg.contains("symbolic link") && msg.contains("server.key"),
        "{msg}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(link_target(&d.join("server.key")), Some(victim.clone()));
    assert_eq!(
        std::fs::read(d.join("ca.pem")).unwrap(),
        ca,
        "the CA was replaced"
    );
    assert!(!d.join("client.pem").exists(), "a partial set was written");
    // A folder under a certificate's name likewise.
    std::fs::remove_file(d.join("server.key")).unwrap();
    std::fs::create_dir(d.join("server.key")).unwrap();
    let o = certs_cmd(&d, &["--force"]);
    assert!(!o.status.success(), "a folder was replaced");
    assert!(
        text(&o.stderr).contains("is a folder"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(
        std::fs::read(d.join("ca.pem")).unwrap(),
        ca,
        "the CA was replaced"
    );
    std::fs::remove_dir(d.join("server.key")).unwrap();
    // --force replaces regular files (a key that was readable by others ends private) and
    // writes through a link to a character device, which stays.
    std::os::unix::fs::symlink("/dev/null", d.join("client.pem")).unwrap();
    std::fs::set_permissions(d.join("ca.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = certs_cmd(&d, &["--client", "--force"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(link_target(&d.join("client.pem")), Some("/dev/null".into()));
    let msg = text(&o.stderr);
    assert!(
        msg.contains("--client-ca") && msg.contains("client.pem"),
        "{msg}"
    );
    assert_ne!(std::fs::read(d.join("ca.pem")).unwrap(), ca);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    for key in ["ca.key", "server.key", "client.key"] {
        assert_eq!(mode_of(&d.join(key)), 0o600, "{key}");
    }
}

#[test]
fn more_certificates_from_the_same_ca_work_with_running_peers() {
    let root = tempfile::tempdir().unwrap();
    let d = certs(root.path());
    let ca = std::fs::read(d.join("ca.pem")).unwrap();
    // A further receiver for the names given (and only those), as other.pem / other.key.
    let o = certs_cmd(&d, &["server", "--name", "127.0.0.1", "--out", "other"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let msg = text(&o.stderr);
    assert!(
        msg.contains("for 127.0.0.1 from the CA") && !msg.contains("localhost"),
        "{msg}"
    );
    let o = certs_cmd(&d, &["server", "--name", "127.0.0.1"]);
    assert!(
        !o.status.success() && text(&o.stderr).contains("--out"),
        "{}",
        text(&o.stderr)
    );
    let o = certs_cmd(&d, &["client", "carol"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let msg = text(&o.stderr);
    assert!(
        msg.contains("carol.pem")
            && msg.contains("\"carol\"")
            && msg.contains(&format!("--client-ca {}/ca.pem", d.display())),
        "{msg}"
    );
    assert_eq!(mode_of(&d.join("carol.key")), 0o600);
    assert_eq!(
        std::fs::read(d.join("ca.pem")).unwrap(),
        ca,
        "the CA changed"
    );
    let o = certs_cmd(&d, &["client", "../evil"]);
    assert!(!o.status.success());

    // A receiver with the new server certificate, requiring client certificates from the CA;
    // a sender that trusts the unchanged ca.pem and presents carol's certificate.
    let other = root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::copy(d.join("ca.pem"), other.join("ca.pem")).unwrap();
    std::fs::copy(d.join("other.pem"), other.join("server.pem")).unwrap();
    std::fs::copy(d.join("other.key"), other.join("server.key")).unwrap();
    let out = root.path().join("out");
    let client_ca = d.join("ca.pem");
    let srv = Server::start(
        &other,
        &out,
        None,
        &["--client-ca", client_ca.to_str().unwrap()],
    );
    let f = root.path().join("doc.txt");
    std::fs::write(&f, "a <$S>b<$E> c").unwrap();
    let o = run(srv
        .send()
        .arg("--client-cert")
        .arg(d.join("carol.pem"))
        .arg("--client-key")
        .arg(d.join("carol.key"))
        .arg(&f));
    assert!(o.status.success(), "{}\n{}", text(&o.stderr), srv.log());
    assert_eq!(
        std::fs::read(out.join("doc.txt")).unwrap(),
        b"a <$S>b<$E> c"
    );
}

/// The hints `sieve certs --name ADDR` prints work as printed: the receiver line listens where
/// the sender line connects (it once left `--listen` out, and the sender met "Connection
/// refused").
#[test]
fn the_printed_receiver_and_sender_lines_work_as_printed() {
    let root = tempfile::tempdir().unwrap();
    let d = root.path().join("certs");
    // An address of this machine that no other test listens on, so the printed ports are free.
    let o = certs_cmd(&d, &["--name", "127.0.0.77", "--client"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let msg = text(&o.stderr);
    let line = |who: &str| {
        msg.lines()
            .find_map(|l| l.trim().strip_prefix(who))
            .unwrap_or_else(|| panic!("no {who} line in:\n{msg}"))
            .trim()
            .to_string()
    };
    let receiver = line("receiver:");
    let sender = line("sender:");
    assert!(receiver.contains("--listen 127.0.0.77:7443"), "{receiver}");
    let out = root.path().join("inbox");
    let receiver = receiver.replace("OUT", out.to_str().unwrap());
    let words: Vec<&str> = receiver.split_whitespace().collect();
    assert_eq!(words[0], "sieve");
    let mut srv = sieve()
        .args(&words[1..])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the printed receiver");
    let log = std::io::BufReader::new(srv.stderr.take().unwrap());
    let mut lines = std::io::BufRead::lines(log);
    let listening = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("receiver listening"));
    assert!(listening, "the printed receiver did not start");
    std::thread::spawn(move || lines.for_each(drop));
    let f = root.path().join("doc.txt");
    std::fs::write(&f, "a <$S>b<$E> c").unwrap();
    let sender = sender.replace("FILE...", f.to_str().unwrap());
    let words: Vec<&str> = sender.split_whitespace().collect();
    let o = run(sieve().args(&words[1..]));
    let _ = srv.kill();
    let _ = srv.wait();
    assert!(
        o.status.success(),
        "the printed sender failed: {}",
        text(&o.stderr)
    );
    assert_eq!(
        std::fs::read(out.join("doc.txt")).unwrap(),
        b"a <$S>b<$E> c"
    );
}
