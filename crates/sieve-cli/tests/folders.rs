//! What a user sees, through the real binary, when sending folders and many files: `-r` keeps
//! relative paths (a tree of 1 000 files arrives as `diff -r` wants it), duplicate names are
//! refused before anything is sent, existing files are kept unless the receiver overwrites,
//! received files are private unless `--file-mode` widens them, `serve --dir` creates its
//! folder, ranges files go beside each file, documents without a classified byte are warned
//! about (or refused), the thesis's splits say what they show, and `--per-client-dirs` keeps each
//! client certificate's documents apart.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::*;

struct Rig {
    root: tempfile::TempDir,
    out: PathBuf,
    srv: Server,
}

impl Rig {
    fn start(extra: &[&str]) -> Rig {
        let root = tempfile::tempdir().unwrap();
        let certs = certs(root.path());
        // Not created here: `sieve serve --dir` makes it.
        let out = root.path().join("inbox/today");
        let srv = Server::start(&certs, &out, None, extra);
        Rig { root, out, srv }
    }

    fn src(&self) -> PathBuf {
        let s = self.root.path().join("src");
        std::fs::create_dir_all(&s).unwrap();
        s
    }

    fn send(&self, args: &[&str], files: &[PathBuf]) -> Output {
        run(self.srv.send().args(args).args(files))
    }
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "sieve send failed: {}", text(&o.stderr));
    text(&o.stderr)
}

fn failed(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "sieve send succeeded: {}",
        text(&o.stderr)
    );
    text(&o.stderr)
}

#[test]
fn a_folder_of_1000_files_arrives_as_diff_r_wants_it() {
    let rig = Rig::start(&[]);
    assert!(rig.out.is_dir(), "serve --dir did not create its folder");
    assert!(
        rig.srv.log().contains("created the output folder"),
        "{}",
        rig.srv.log()
    );
    let data = rig.src().join("survey");
    let mut n = 0u32;
    for a in 0..10 {
        for b in 0..10 {
            let dir = data.join(format!("site-{a}/wave-{b}"));
            std::fs::create_dir_all(&dir).unwrap();
            for c in 0..10 {
                let body = format!(
                    "id,name,score\n{n},<$S>patient {n}<$E>,{}\n{c},public,{a}{b}\n",
                    n * 7 % 101
                );
                std::fs::write(dir.join(format!("answers-{c}.csv")), body).unwrap();
                n += 1;
            }
        }
    }
    // Hidden entries and links are skipped, and said so.
    std::fs::write(data.join(".DS_Store"), b"junk").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", data.join("hostname")).unwrap();
    let o = rig.send(
        &["-r", "-n", "2", "-m", "2", "--json"],
        std::slice::from_ref(&data),
    );
    let err = ok(&o);
    assert!(
        err.contains("skipped") && err.contains(".DS_Store"),
        "{err}"
    );
    assert!(err.contains("a symbolic link"), "{err}");
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(
        (v["docs"].as_u64(), v["docs_ok"].as_u64()),
        (Some(1000), Some(1000))
    );
    std::fs::remove_file(data.join(".DS_Store")).unwrap();
    std::fs::remove_file(data.join("hostname")).unwrap();
    let diff = run(std::process::Command::new("diff")
        .arg("-r")
        .arg(&data)
        .arg(rig.out.join("survey")));
    assert!(diff.status.success(), "diff -r: {}", text(&diff.stdout));
    assert_eq!(finals(&rig.out), vec!["survey"]);
    assert_eq!(
        mode_of(&rig.out.join("survey/site-1/wave-2/answers-3.csv")),
        0o600
    );
    // Without -r a folder is an error that says what to do.
    let err = failed(&rig.send(&[], &[data]));
    assert!(err.contains("is a folder: pass -r"), "{err}");
}

#[test]
fn duplicate_names_are_refused_before_anything_is_sent() {
    let rig = Rig::start(&[]);
    let src = rig.src();
    for d in ["a", "b"] {
        std::fs::create_dir(src.join(d)).unwrap();
        std::fs::write(src.join(d).join("same.txt"), format!("from {d}")).unwrap();
    }
    let (a, b) = (src.join("a/same.txt"), src.join("b/same.txt"));
    let err = failed(&rig.send(&[], &[a.clone(), b.clone()]));
    assert!(err.contains("would all be stored as same.txt"), "{err}");
    assert!(err.contains(&a.display().to_string()) && err.contains(&b.display().to_string()));
    let err = failed(&rig.send(&[], &[a.clone(), a.clone()]));
    assert!(err.contains("is given 2 times"), "{err}");
    assert!(finals(&rig.out).is_empty());
    assert!(
        !rig.srv.log().contains("session started"),
        "something was sent"
    );
    // With -r each keeps its folder's name.
    ok(&rig.send(&["-r"], &[src.join("a"), src.join("b")]));
    assert_eq!(
        std::fs::read(rig.out.join("a/same.txt")).unwrap(),
        b"from a"
    );
    assert_eq!(
        std::fs::read(rig.out.join("b/same.txt")).unwrap(),
        b"from b"
    );
}

#[test]
fn existing_files_are_kept_unless_the_receiver_overwrites() {
    let rig = Rig::start(&[]);
    let f = rig.src().join("report.txt");
    std::fs::write(&f, "v1 <$S>secret<$E>").unwrap();
    ok(&rig.send(&[], std::slice::from_ref(&f)));
    std::fs::write(&f, "v2 <$S>secret<$E>").unwrap();
    let o = rig.send(&["--json"], std::slice::from_ref(&f));
    let err = failed(&o);
    assert!(
        err.contains("report.txt already exists on the receiver") && err.contains("--overwrite"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(rig.out.join("report.txt")).unwrap(),
        b"v1 <$S>secret<$E>"
    );
    assert_eq!(mode_of(&rig.out.join("report.txt")), 0o600);

    let rig2 = Rig::start(&["--overwrite", "--file-mode", "640"]);
    std::fs::create_dir_all(&rig2.out).unwrap();
    std::fs::write(rig2.out.join("report.txt"), "old").unwrap();
    ok(&rig2.send(&[], std::slice::from_ref(&f)));
    assert_eq!(
        std::fs::read(rig2.out.join("report.txt")).unwrap(),
        b"v2 <$S>secret<$E>"
    );
    assert_eq!(mode_of(&rig2.out.join("report.txt")), 0o640);
    // A mode that hides files from the receiver itself, or sets special bits, is refused.
    for bad in ["400", "4755", "rw"] {
        let o = run(sieve().args([
            "serve",
            "--dir",
            "x",
            "--cert",
            "c",
            "--key",
            "k",
            "--file-mode",
            bad,
        ]));
        assert!(
            !o.status.success() && text(&o.stderr).contains("file mode"),
            "{bad}"
        );
    }
}

#[test]
fn ranges_go_beside_each_file_and_one_ranges_file_fits_one_file() {
    let rig = Rig::start(&[]);
    let src = rig.src();
    let (x, y) = (src.join("x.bin"), src.join("y.bin"));
    std::fs::write(&x, vec![7u8; 1000]).unwrap();
    std::fs::write(&y, vec![9u8; 500]).unwrap();
    let r = src.join("fields.json");
    std::fs::write(&r, br#"{"ranges": [[0, 10]]}"#).unwrap();
    let err = failed(&rig.send(&["--ranges", r.to_str().unwrap()], &[x.clone(), y.clone()]));
    assert!(err.contains("--ranges-beside"), "{err}");
    assert!(finals(&rig.out).is_empty());
    std::fs::write(src.join("x.bin.ranges.json"), br#"{"ranges": [[0, 100]]}"#).unwrap();
    std::fs::write(
        src.join("y.bin.ranges.json"),
        br#"{"ranges": [[10, 30], [40, 50]]}"#,
    )
    .unwrap();
    // Named alongside their files, the ranges files are not documents themselves.
    let o = rig.send(
        &["--mode", "sieve", "--ranges-beside", "--json"],
        &[x.clone(), y.clone(), src.join("x.bin.ranges.json")],
    );
    ok(&o);
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(
        (v["docs"].as_u64(), v["secure_bytes"].as_u64()),
        (Some(2), Some(130))
    );
    assert_eq!(finals(&rig.out), vec!["x.bin", "y.bin"]);
    // A file without its ranges file is an error naming the file expected.
    let z = src.join("z.bin");
    std::fs::write(&z, b"zz").unwrap();
    let err = failed(&rig.send(&["--ranges-beside"], &[z]));
    assert!(err.contains("z.bin.ranges.json"), "{err}");
}

#[test]
fn documents_without_a_classified_byte_go_secure_only_or_are_warned_about_or_refused() {
    let rig = Rig::start(&[]);
    let src = rig.src();
    let plain = src.join("notes.txt");
    std::fs::write(&plain, "nothing marked here\n").unwrap();
    let marked = src.join("marked.txt");
    std::fs::write(&marked, "a <$S>b<$E> c\n").unwrap();
    // Nothing classified notes.txt: even the sieve sends it secure-only, and says so.
    let o = rig.send(
        &["--mode", "sieve", "--json"],
        &[plain.clone(), marked.clone()],
    );
    let err = ok(&o);
    assert!(
        err.contains("no classification was given for notes.txt")
            && err.contains("--allow-clear")
            && !err.contains("marked.txt ("),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(v["unmarked"], serde_json::json!(["notes.txt"]));
    assert_eq!(v["unclassified"], serde_json::json!([]));
    assert_eq!(v["mode"], "sieve");
    // Its 20 bytes and marked.txt's classified one went over TLS.
    assert_eq!(v["secure_bytes"].as_u64(), Some(21), "{v}");
    let clean = || {
        std::fs::remove_file(rig.out.join("notes.txt")).unwrap();
        std::fs::remove_file(rig.out.join("marked.txt")).unwrap();
    };
    clean();
    // With --allow-clear the sieve sends notes.txt in the clear, and warns.
    let o = rig.send(
        &["--mode", "sieve", "--allow-clear", "--json"],
        &[plain.clone(), marked.clone()],
    );
    let err = ok(&o);
    assert!(
        err.contains("warning: notes.txt has no classified byte")
            && err.contains("--require-classified")
            && !err.contains("marked.txt has no"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(v["unclassified"], serde_json::json!(["notes.txt"]));
    assert_eq!(v["unmarked"], serde_json::json!([]));
    clean();
    let o = rig.send(&["--require-classified", "--json"], &[plain, marked]);
    let err = failed(&o);
    assert!(
        err.contains("notes.txt") && err.contains("no classified byte"),
        "{err}"
    );
    assert!(text(&o.stdout).contains("\"error\""), "{}", text(&o.stdout));
    assert!(finals(&rig.out).is_empty(), "something was sent");
}

#[test]
fn the_thesis_splits_say_that_they_show_the_layout() {
    let rig = Rig::start(&[]);
    let src = rig.src();
    let a = src.join("a.txt");
    let b = src.join("b.txt");
    std::fs::write(&a, "x <$S>y<$E> z").unwrap();
    std::fs::write(&b, "x <$S>y<$E> z").unwrap();
    let err = ok(&rig.send(&["--split", "even"], std::slice::from_ref(&a)));
    assert!(
        err.contains("warning: --split even") && err.contains("where the classified parts"),
        "{err}"
    );
    std::fs::remove_file(rig.out.join("a.txt")).unwrap();
    let err = ok(&rig.send(
        &["--split", "segment", "--quiet-layout-warning"],
        std::slice::from_ref(&a),
    ));
    assert!(!err.contains("warning"), "{err}");
    let err = ok(&rig.send(
        &["-r", "--batch-split", "segment", "--split", "even"],
        std::slice::from_ref(&src),
    ));
    assert!(
        err.contains("warning: --batch-split segment") && !err.contains("--split even"),
        "{err}"
    );
    std::fs::remove_dir_all(rig.out.join("src")).unwrap();
    let err = ok(&rig.send(&["-r"], &[src]));
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn per_client_dirs_keep_each_client_certificate_apart() {
    let root = tempfile::tempdir().unwrap();
    let c = certs(root.path());
    for name in ["alice", "bob"] {
        let o = run(sieve().args(["certs", "client", name, "--dir"]).arg(&c));
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let out = root.path().join("out");
    let ca = c.join("ca.pem");
    let srv = Server::start(
        &c,
        &out,
        None,
        &["--client-ca", ca.to_str().unwrap(), "--per-client-dirs"],
    );
    let f = root.path().join("same.txt");
    for name in ["alice", "bob"] {
        std::fs::write(&f, format!("from {name} <$S>x<$E>")).unwrap();
        let o = run(srv
            .send()
            .arg("--client-cert")
            .arg(c.join(format!("{name}.pem")))
            .arg("--client-key")
            .arg(c.join(format!("{name}.key")))
            .arg(&f));
        assert!(
            o.status.success(),
            "{name}: {}\n{}",
            text(&o.stderr),
            srv.log()
        );
    }
    assert_eq!(finals(&out), vec!["alice", "bob"]);
    for name in ["alice", "bob"] {
        assert_eq!(
            std::fs::read_to_string(out.join(name).join("same.txt")).unwrap(),
            format!("from {name} <$S>x<$E>")
        );
    }
    // Only with mutual TLS.
    let o = run(sieve().args([
        "serve",
        "--dir",
        "x",
        "--cert",
        "c",
        "--key",
        "k",
        "--per-client-dirs",
    ]));
    assert!(
        !o.status.success() && text(&o.stderr).contains("--client-ca"),
        "{}",
        text(&o.stderr)
    );
}
