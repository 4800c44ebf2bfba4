//! `sieve mark` and `sieve send --policy` through the real binary.

use std::path::Path;

use sieve_core::marks::{parse_all, MarkConfig};

mod common;
use common::*;

const SECRET_CARD: &str = "4111 1111 1111 1111";

/// A CSV export and a log with personal data in them, and a literal mark in the content.
fn documents(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let csv = dir.join("customers.csv");
    let mut s = String::from("id,first_name,email,plan,notes\n");
    for i in 0..300 {
        s.push_str(&format!(
            "{i},Ann{i},ann{i}@mail.example.io,pro,\"paid with {SECRET_CARD} <$S> literal\"\n"
        ));
    }
    std::fs::write(&csv, s).unwrap();
    let log = dir.join("app.log");
    let mut s = String::new();
    for i in 0..300 {
        s.push_str(&format!(
            "2024-05-01T10:00:{:02}Z INFO login user=u{i} from 203.0.113.{} ssn 123-45-6789 \\<$E> ok\n",
            i % 60,
            i % 250 + 1
        ));
    }
    std::fs::write(&log, s).unwrap();
    (csv, log)
}

#[test]
fn print_policy_shows_the_built_in_policy() {
    let o = run(sieve().args(["mark", "--print-policy", "default"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), sieve_mark::policy::DEFAULT_POLICY);
    let o = run(sieve().args(["mark", "--print-policy", "strict"]));
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("no built-in policy"),
        "{}",
        text(&o.stderr)
    );
}

/// Ranges file, marked copy, explanation and JSON summary of one run agree with each other and
/// with the document.
#[test]
fn mark_writes_ranges_a_marked_copy_and_an_explanation() {
    let d = tempfile::tempdir().unwrap();
    let (csv, _) = documents(d.path());
    let ranges = d.path().join("r.json");
    let marked = d.path().join("marked.csv");
    let o = run(sieve()
        .args(["mark", "--explain", "--json", "-o"])
        .arg(&ranges)
        .arg("--marked")
        .arg(&marked)
        .arg(&csv));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let doc = std::fs::read(&csv).unwrap();
    let json = std::fs::read(&ranges).unwrap();
    let r = sieve_core::ranges_file::parse(&json, doc.len() as u64).unwrap();
    // Names, e-mails and cards of 300 rows.
    assert_eq!(r.as_slice().len(), 900, "{}", text(&json));
    for range in r.as_slice() {
        let t = text(&doc[range.start as usize..range.end as usize]);
        assert!(
            t.starts_with("Ann") || t.contains("@mail.example.io") || t == SECRET_CARD,
            "{t}"
        );
    }
    // The marked copy parses back to the document and the same ranges.
    let copy = std::fs::read(&marked).unwrap();
    let cfg = MarkConfig {
        strip: true,
        ..MarkConfig::default()
    };
    let parsed = parse_all(&cfg, &copy).unwrap();
    let mut content = Vec::new();
    for e in &parsed.extents {
        content.extend_from_slice(&copy[e.raw as usize..(e.raw + e.len) as usize]);
    }
    assert_eq!(content, doc);
    assert_eq!(parsed.ranges, r.as_slice());
    // One explanation line per range, then the summary; no secret in the clear.
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 901);
    assert!(lines[0].contains("columns"), "{}", lines[0]);
    assert!(out.contains("\tcard\t41•• •••• •••• ••11"), "{out}");
    assert!(!out.contains(SECRET_CARD) && !out.contains("ann7@mail"));
    let v: serde_json::Value = serde_json::from_str(lines[900]).unwrap();
    assert_eq!(v["format"], "csv");
    assert_eq!(v["ranges"], 900);
    assert_eq!(v["detections"]["card"], 300);
    assert_eq!(v["detections"]["columns"], 600);
}

/// The marked copy and ranges file of `doc` written to regular files: what every other output
/// must hold.
fn reference_outputs(doc: &Path, dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let (marked, ranges) = (dir.join("reference.marked"), dir.join("reference.json"));
    let o = run(sieve()
        .args(["mark", "--marked"])
        .arg(&marked)
        .arg("-o")
        .arg(&ranges)
        .arg(doc));
    assert!(o.status.success(), "{}", text(&o.stderr));
    (
        std::fs::read(&marked).unwrap(),
        std::fs::read(&ranges).unwrap(),
    )
}

/// `-` is standard output for --marked and -o: nothing is written under the name `-`.
#[test]
fn a_dash_is_standard_output() {
    let d = tempfile::tempdir().unwrap();
    let (csv, _) = documents(d.path());
    let (marked, ranges) = reference_outputs(&csv, d.path());
    for (opt, want) in [("--marked", &marked), ("-o", &ranges)] {
        let o = run(sieve()
            .current_dir(d.path())
            .args(["mark", opt, "-"])
            .arg(&csv));
        assert!(o.status.success(), "{opt} -: {}", text(&o.stderr));
        assert!(
            !d.path().join("-").exists(),
            "{opt} -: a file named - was written"
        );
        assert_eq!(&o.stdout, want, "{opt} -: standard output");
    }
}

/// `/dev/stdout` is standard output, whatever it is (here a pipe): the machine's /dev/stdout
/// link is never replaced. (Not run on a build that replaces output links: as root it would
/// replace this machine's /dev/stdout.)
#[test]
fn dev_stdout_is_standard_output_and_stays_a_link() {
    let d = tempfile::tempdir().unwrap();
    let (csv, _) = documents(d.path());
    let (marked, _) = reference_outputs(&csv, d.path());
    let before = link_target(Path::new("/dev/stdout"));
    let o = run(sieve().args(["mark", "--marked", "/dev/stdout"]).arg(&csv));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(o.stdout, marked);
    assert_eq!(link_target(Path::new("/dev/stdout")), before);
}

/// A link to a character device and a named pipe are written through, never replaced.
#[test]
fn devices_and_pipes_are_written_through() {
    use std::os::unix::fs::FileTypeExt;
    let d = tempfile::tempdir().unwrap();
    let (csv, _) = documents(d.path());
    let (marked, ranges) = reference_outputs(&csv, d.path());
    let null = d.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let o = run(sieve()
        .args(["mark", "--marked"])
        .arg(&null)
        .arg("-o")
        .arg(&null)
        .arg(&csv));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(link_target(&null).as_deref(), Some(Path::new("/dev/null")));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    for (opt, want) in [("--marked", &marked), ("-o", &ranges)] {
        let fifo = d.path().join(format!("pipe{opt}"));
        let reader = fifo_reader(&fifo);
        let o = run(sieve().args(["mark", opt]).arg(&fifo).arg(&csv));
        assert!(o.status.success(), "{opt}: {}", text(&o.stderr));
        assert!(is_fifo(&fifo), "{opt}: the pipe was replaced by a file");
        assert_eq!(
            &reader.join().unwrap(),
            want,
            "{opt}: what the pipe carried"
        );
    }
}

/// A link to a regular file and a folder are refused, with the reason, and left as they were;
/// an existing regular file is replaced whole (a new file renamed over it).
#[test]
fn links_to_files_and_folders_are_refused_and_files_replaced() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let (csv, _) = documents(d.path());
    let (marked, ranges) = reference_outputs(&csv, d.path());
    let victim = d.path().join("victim.txt");
    std::fs::write(&victim, "keep").unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let folder = d.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    for opt in ["--marked", "-o"] {
        let o = run(sieve().args(["mark", opt]).arg(&link).arg(&csv));
        assert!(!o.status.success(), "{opt} LINK was accepted");
        let msg = text(&o.stderr);
        assert!(
            msg.contains("symbolic link") && msg.contains("victim.txt"),
            "{opt}: {msg}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep", "{opt}");
        assert_eq!(
            link_target(&link).as_deref(),
            Some(victim.as_path()),
            "{opt}"
        );
        let o = run(sieve().args(["mark", opt]).arg(&folder).arg(&csv));
        assert!(!o.status.success(), "{opt} FOLDER was accepted");
        let msg = text(&o.stderr);
        assert!(msg.contains("is a folder"), "{opt}: {msg}");
        assert!(folder.is_dir() && names_in(&folder).is_empty(), "{opt}");
    }
    let existing = d.path().join("existing");
    std::fs::write(&existing, "old").unwrap();
    let other = d.path().join("hard-link");
    std::fs::hard_link(&existing, &other).unwrap();
    let inode = std::fs::metadata(&existing).unwrap().ino();
    for (opt, want) in [("--marked", &marked), ("-o", &ranges)] {
        let o = run(sieve().args(["mark", opt]).arg(&existing).arg(&csv));
        assert!(o.status.success(), "{opt}: {}", text(&o.stderr));
        assert_eq!(&std::fs::read(&existing).unwrap(), want, "{opt}");
        assert_ne!(
            std::fs::metadata(&existing).unwrap().ino(),
            inode,
            "{opt}: renamed over"
        );
    }
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "old");
}

#[test]
fn bad_policies_and_arguments_are_refused_with_a_reason() {
    let d = tempfile::tempdir().unwrap();
    let (csv, _) = documents(d.path());
    let bad = d.path().join("bad.toml");
    std::fs::write(&bad, "[[detect]]\nkind = \"cards\"\n").unwrap();
    let o = run(sieve()
        .args(["mark", "--json", "--policy"])
        .arg(&bad)
        .arg(&csv));
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("unknown kind \"cards\""),
        "{}",
        text(&o.stderr)
    );
    let o = run(sieve()
        .args(["mark", "--policy", "/nonexistent.toml", "--json"])
        .arg(&csv));
    assert!(
        text(&o.stderr).contains("cannot read the policy file"),
        "{}",
        text(&o.stderr)
    );
    let o = run(sieve().arg("mark").arg(&csv));
    assert!(
        text(&o.stderr).contains("say what to produce"),
        "{}",
        text(&o.stderr)
    );
}

/// `sieve send --policy default`: files arrive identical, the classified bytes are the ranges
/// `sieve mark` finds, and --json counts findings per detector. A policy that cannot run sends
/// nothing.
#[test]
fn send_with_a_policy_classifies_on_the_fly() {
    let srv = {
        let root = tempfile::tempdir().unwrap();
        let certs = certs(root.path());
        let out = root.path().join("out");
        std::fs::create_dir(&out).unwrap();
        (common::Server::start(&certs, &out, None, &[]), out, root)
    };
    let (rx, out, _root) = srv;
    let d = tempfile::tempdir().unwrap();
    let (csv, log) = documents(d.path());
    let o = run(rx
        .send()
        .args([
            "--mode", "sieve", "--policy", "default", "--json", "-m", "2",
        ])
        .arg(&csv)
        .arg(&log));
    assert!(o.status.success(), "{}\n{}", text(&o.stderr), rx.log());
    for f in [&csv, &log] {
        let name = f.file_name().unwrap();
        assert_eq!(
            std::fs::read(out.join(name)).unwrap(),
            std::fs::read(f).unwrap()
        );
    }
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let mut classified = 0;
    for f in [&csv, &log] {
        let m = run(sieve().args(["mark", "--json"]).arg(f));
        let s: serde_json::Value = serde_json::from_str(text(&m.stdout).trim()).unwrap();
        classified += s["classified_bytes"].as_u64().unwrap();
    }
    assert_eq!(v["secure_bytes"].as_u64().unwrap(), classified);
    assert!(classified > 0);
    let det = &v["detections"];
    assert_eq!(det["card"], 300);
    assert_eq!(det["ssn"], 300);
    assert_eq!(det["ipv4"], 300);
    assert_eq!(det["log-fields"], 300);
    assert_eq!(det["columns"], 600);
    assert_eq!(det["pem"], 0);

    // Read instead of mapped: the same classification.
    let copy = d.path().join("copy.log");
    std::fs::copy(&log, &copy).unwrap();
    let o = run(rx
        .send()
        .args([
            "--mode",
            "sieve",
            "--policy",
            "default",
            "--json",
            "--no-mmap",
        ])
        .arg(&copy));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v2: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let m = run(sieve().args(["mark", "--json"]).arg(&log));
    let s: serde_json::Value = serde_json::from_str(text(&m.stdout).trim()).unwrap();
    assert_eq!(v2["secure_bytes"], s["classified_bytes"]);
    assert_eq!(v2["detections"]["ssn"], 300);
    assert_eq!(
        std::fs::read(out.join("copy.log")).unwrap(),
        std::fs::read(&log).unwrap()
    );

    // A policy that cannot be loaded: nothing reaches the receiver.
    let bad = d.path().join("bad.toml");
    std::fs::write(&bad, "[[detect]]\nkind = \"regex\"\npattern = \"(\"\n").unwrap();
    let other = d.path().join("other.log");
    std::fs::write(&other, "x").unwrap();
    let before = names_in(&out);
    let sessions = rx.log().matches("session started").count();
    assert!(sessions > 0, "the receiver logs its sessions");
    let o = run(rx.send().arg("--policy").arg(&bad).arg(&other));
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("cannot be used"),
        "{}",
        text(&o.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(names_in(&out), before);
    assert_eq!(
        rx.log().matches("session started").count(),
        sessions,
        "no session was opened"
    );
}

/// `--json` names the policy used: a file that only extends the built-in one is called by its
/// path, not "default" (it once reported "default" for `--policy med.toml`).
#[test]
fn the_json_summary_names_the_policy_file_used() {
    let d = tempfile::tempdir().unwrap();
    let (csv, _) = documents(d.path());
    let med = d.path().join("med.toml");
    std::fs::write(&med, "extends = \"default\"\n").unwrap();
    let named = d.path().join("named.toml");
    std::fs::write(&named, "name = \"clinic\"\nextends = \"default\"\n").unwrap();
    let ranges = d.path().join("r.json");
    for (policy, want) in [
        (med.to_str().unwrap(), med.to_str().unwrap()),
        (named.to_str().unwrap(), "clinic"),
        ("default", "default"),
    ] {
        let o = run(sieve()
            .args(["mark", "--json", "--policy", policy, "-o"])
            .arg(&ranges)
            .arg(&csv));
        assert!(o.status.success(), "{}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
        assert_eq!(v["policy"], want, "{v}");
    }
}
