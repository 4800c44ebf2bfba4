//! The marking page (`sieve ui`): its access rules and API over HTTP, sending from the page to
//! a real receiver, and the page itself in headless Chromium driven over WebDriver.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

const LETTER: &str = "From: Jane Doe <jane.doe@corp.example.io>\n\
Subject: refund\n\
\n\
Please refund my card 4111 1111 1111 1111. Project Aurora stays internal.\n\
Grüße, 2001:db8::1 — naïve café\n";

/// `sieve ui` running on a free loopback port; killed when dropped.
struct Ui {
    child: Child,
    addr: SocketAddr,
    token: String,
    url: String,
    /// The rest of its standard output (what a save to `-` writes).
    stdout: BufReader<std::process::ChildStdout>,
}

impl Ui {
    fn start(file: &Path, extra: &[&str]) -> Ui {
        let mut child = sieve()
            .current_dir(file.parent().unwrap())
            .arg("ui")
            .args(extra)
            .arg(file)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sieve ui");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("marking page: ")
            .unwrap_or_else(|| panic!("no address printed: {line:?}"))
            .to_string();
        let rest = url.strip_prefix("http://").unwrap();
        let (hostport, q) = rest.split_once("/?token=").unwrap();
        Ui {
            child,
            addr: hostport.parse().unwrap(),
            token: q.to_string(),
            url,
            stdout,
        }
    }

    /// `GET /?token=...` (the address printed): the cookie it sets, `name=value`.
    fn cookie(&self) -> String {
        let host = self.addr.to_string();
        let (s, hs, _) = http(
            self.addr,
            "GET",
            &format!("/?token={}", self.token),
            &[("Host", &host)],
            "",
        );
        assert_eq!(s, 303);
        let c = header(&hs, "set-cookie");
        c.split(';').next().unwrap().to_string()
    }

    /// The page, as a browser holding `cookie` gets it, and the CSRF value in it.
    fn page(&self, cookie: &str) -> (u16, Vec<(String, String)>, String, String) {
        let host = self.addr.to_string();
        let (s, hs, b) = http(
            self.addr,
            "GET",
            "/",
            &[("Host", &host), ("Cookie", cookie)],
            "",
        );
        let body = text(&b);
        let csrf = body
            .split_once(r#"<meta name="sieve-csrf" content=""#)
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(v, _)| v.to_string())
            .unwrap_or_default();
        (s, hs, body, csrf)
    }

    /// An API call with the token and the right Host.
    fn api(&self, method: &str, path: &str, body: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let host = self.addr.to_string();
        let token = self.token.clone();
        http(
            self.addr,
            method,
            path,
            &[("Host", host.as_str()), ("X-Sieve-Token", token.as_str())],
            body,
        )
    }

    fn json(&self, method: &str, path: &str, body: &str) -> serde_json::Value {
        let (status, _, b) = self.api(method, path, body);
        assert_eq!(status, 200, "{method} {path}: {}", text(&b));
        serde_json::from_slice(&b).unwrap()
    }

    /// The send's status once it is no longer `sending`.
    fn wait_sent(&self) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let s = self.json("GET", "/api/send", "");
            if s["state"] != "sending" {
                return s;
            }
            assert!(Instant::now() < deadline, "never finished: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_scanned(&self) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let d = self.json("GET", "/api/doc", "");
            if d["scan"] == "done" {
                return d;
            }
            assert!(Instant::now() < deadline, "the scan never finished: {d}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 request; returns status, headers and body.
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    let split = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = text(&resp[..split]);
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let hs: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    let mut body = resp[split + 4..].to_vec();
    if hs
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v == "chunked")
    {
        body = dechunk(&body);
    }
    (status, hs, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = usize::from_str_radix(text(&b[..nl]).trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + n]);
        b = &b[nl + 2 + n + 2..];
    }
}

fn header<'a>(hs: &'a [(String, String)], k: &str) -> &'a str {
    hs.iter()
        .find(|(x, _)| x == k)
        .map_or("", |(_, v)| v.as_str())
}

fn letter(dir: &Path) -> PathBuf {
    let p = dir.join("letter.txt");
    std::fs::write(&p, LETTER).unwrap();
    p
}

fn off(s: &str) -> u64 {
    LETTER.find(s).unwrap() as u64
}

#[test]
fn access_needs_the_token_in_a_header_and_the_right_host() {
    let d = tempfile::tempdir().unwrap();
    let ui = Ui::start(&letter(d.path()), &[]);
    let host = ui.addr.to_string();
    // The page: only with the token in its address (exchanged for a cookie, see
    // `the_token_is_exchanged_for_a_cookie_and_leaves_the_address`), or that cookie.
    let (s, hs, _) = http(
        ui.addr,
        "GET",
        &format!("/?token={}", ui.token),
        &[("Host", &host)],
        "",
    );
    assert_eq!(s, 303);
    assert!(header(&hs, "content-security-policy").contains("default-src 'self'"));
    let (s, hs, _, _) = ui.page(&ui.cookie());
    assert_eq!(s, 200);
    assert!(header(&hs, "content-security-policy").contains("default-src 'self'"));
    assert_eq!(http(ui.addr, "GET", "/", &[("Host", &host)], "").0, 403);
    assert_eq!(
        http(ui.addr, "GET", "/?token=00", &[("Host", &host)], "").0,
        403
    );
    // The API: only with the token in X-Sieve-Token (or the page's cookie with its CSRF
    // header), whatever the URL or another cookie says.
    let q = format!("/api/doc?token={}", ui.token);
    assert_eq!(http(ui.addr, "GET", &q, &[("Host", &host)], "").0, 403);
    let cookie = format!("token={}", ui.token);
    let body = r#"{"start":0,"end":4}"#;
    assert_eq!(
        http(
            ui.addr,
            "POST",
            "/api/mark",
            &[("Host", &host), ("Cookie", &cookie)],
            body
        )
        .0,
        403
    );
    // Another host name (DNS rebinding) is refused even with the token.
    assert_eq!(
        http(
            ui.addr,
            "GET",
            "/api/doc",
            &[("Host", "evil.example:80"), ("X-Sieve-Token", &ui.token)],
            ""
        )
        .0,
        403
    );
    assert_eq!(ui.api("GET", "/api/doc", "").0, 200);
    // The marking page never listens beyond loopback.
    let o = run(sieve().args(["ui", "--listen", "0.0.0.0:0"]));
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("loopback"), "{}", text(&o.stderr));
}

/// The token in the printed address is exchanged for a cookie (HttpOnly, SameSite=Strict,
/// named after this server's port) and a redirect to an address without it, so that it stays
/// in neither the address bar nor the page's history entry. The API takes the cookie only with
/// the CSRF value the page carries and from no other origin; a wrong token sets no cookie.
#[test]
fn the_token_is_exchanged_for_a_cookie_and_leaves_the_address() {
    let d = tempfile::tempdir().unwrap();
    let ui = Ui::start(&letter(d.path()), &[]);
    ui.wait_scanned();
    let host = ui.addr.to_string();
    let (s, hs, _) = http(
        ui.addr,
        "GET",
        &format!("/?token={}", ui.token),
        &[("Host", &host)],
        "",
    );
    assert_eq!(s, 303, "the address with the token answers a redirect");
    assert_eq!(header(&hs, "location"), "/");
    let set = header(&hs, "set-cookie");
    let name = format!("sieve-ui-{}=", ui.addr.port());
    assert!(set.starts_with(&name), "{set}");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.split("; ").any(|a| a == attr), "{attr} missing: {set}");
    }
    assert!(
        !set.contains(&ui.token),
        "the cookie is not the token: {set}"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    // The page with the cookie; it carries a CSRF value, never the token.
    let (s, _, page, csrf) = ui.page(&cookie);
    assert_eq!(s, 200);
    assert!(!page.contains(&ui.token));
    assert_eq!(csrf.len(), 32, "{page}");
    let with = |extra: &[(&str, &str)], method: &str, path: &str, body: &str| {
        let mut h = vec![("Host", host.as_str())];
        h.extend_from_slice(extra);
        http(ui.addr, method, path, &h, body).0
    };
    let range = r#"{"start":0,"end":4}"#;
    // The API takes the cookie with the CSRF header, from the page's own origin.
    assert_eq!(
        with(
            &[("Cookie", &cookie), ("X-Sieve-Csrf", &csrf)],
            "GET",
            "/api/doc",
            ""
        ),
        200
    );
    let origin = format!("http://{host}");
    assert_eq!(
        with(
            &[
                ("Cookie", &cookie),
                ("X-Sieve-Csrf", &csrf),
                ("Origin", &origin),
                ("Sec-Fetch-Site", "same-origin")
            ],
            "POST",
            "/api/unmark",
            range
        ),
        200
    );
    // Refused: the cookie alone (what another site's form could make a browser send), a
    // wrong CSRF value, another origin, another site on this host, a wrong cookie, nothing.
    assert_eq!(
        with(&[("Cookie", &cookie)], "POST", "/api/unmark", range),
        403
    );
    assert_eq!(
        with(
            &[("Cookie", &cookie), ("X-Sieve-Csrf", "00")],
            "GET",
            "/api/doc",
            ""
        ),
        403
    );
    for (k, v) in [
        ("Origin", "http://evil.example"),
        ("Origin", "null"),
        ("Sec-Fetch-Site", "same-site"),
    ] {
        assert_eq!(
            with(
                &[("Cookie", &cookie), ("X-Sieve-Csrf", &csrf), (k, v)],
                "POST",
                "/api/unmark",
                range
            ),
            403,
            "{k}: {v}"
        );
    }
    let wrong = format!("{name}{}", "0".repeat(32));
    assert_eq!(
        with(
            &[("Cookie", &wrong), ("X-Sieve-Csrf", &csrf)],
            "GET",
            "/api/doc",
            ""
        ),
        403
    );
    assert_eq!(with(&[], "GET", "/api/doc", ""), 403);
    assert_eq!(ui.page(&wrong).0, 403);
    // A wrong token, or the right one under another host name, is refused and sets no cookie.
    let bad = "f".repeat(ui.token.len());
    for (h, t) in [
        (host.as_str(), bad.as_str()),
        ("evil.example:80", ui.token.as_str()),
    ] {
        let (s, hs, _) = http(ui.addr, "GET", &format!("/?token={t}"), &[("Host", h)], "");
        assert_eq!(s, 403, "{h} {t}");
        assert_eq!(header(&hs, "set-cookie"), "", "{h} {t}");
    }
    // A second marking page on this host names its cookie apart, and takes neither the first
    // one's cookie nor its CSRF value.
    let other = Ui::start(&letter(d.path()), &[]);
    let second = other.cookie();
    assert_ne!(
        second.split('=').next(),
        cookie.split('=').next(),
        "two pages share a cookie name"
    );
    let ohost = other.addr.to_string();
    let renamed = cookie.replacen(&name, &format!("sieve-ui-{}=", other.addr.port()), 1);
    assert_eq!(
        http(
            other.addr,
            "GET",
            "/api/doc",
            &[
                ("Host", &ohost),
                ("Cookie", &renamed),
                ("X-Sieve-Csrf", &csrf)
            ],
            ""
        )
        .0,
        403
    );
}

#[test]
fn windows_cut_at_characters_and_edits_change_the_ranges() {
    let d = tempfile::tempdir().unwrap();
    let ui = Ui::start(&letter(d.path()), &[]);
    let doc = ui.wait_scanned();
    assert_eq!(doc["len"], LETTER.len());
    // A window asked to start inside "ü" starts after it, and one that would end inside "é"
    // ends before it.
    let u = off("ü");
    let (s, hs, body) = ui.api("GET", &format!("/api/window?offset={}&len=5", u + 1), "");
    assert_eq!(s, 200);
    assert_eq!(header(&hs, "x-offset"), (u + 2).to_string());
    assert!(std::str::from_utf8(&body).is_ok());
    let e = off("é");
    let (_, hs, body) = ui.api(
        "GET",
        &format!("/api/window?offset={}&len={}", e - 2, 3),
        "",
    );
    assert_eq!(header(&hs, "x-offset"), (e - 2).to_string());
    assert_eq!(body, LETTER.as_bytes()[e as usize - 2..e as usize]);
    // What the policy found, then a manual mark and an unmark.
    let spans = ui.json("GET", "/api/spans?offset=0&len=100000", "");
    let labels: Vec<&str> = spans
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["email", "card", "ipv6"]);
    let a = off("Project Aurora");
    ui.json(
        "POST",
        "/api/mark",
        &format!(r#"{{"start":{a},"end":{}}}"#, a + 14),
    );
    let m = off("jane.doe");
    ui.json(
        "POST",
        "/api/unmark",
        &format!(r#"{{"start":{m},"end":{}}}"#, m + 24),
    );
    let (s, _, b) = ui.api("POST", "/api/mark", r#"{"start":5,"end":100000}"#);
    assert_eq!(s, 400, "{}", text(&b));
    let saved = ui.json("POST", "/api/save", r#"{"kind":"ranges"}"#);
    let path = saved["path"].as_str().unwrap();
    assert!(path.ends_with("letter.txt.ranges.json"));
    let r =
        sieve_core::ranges_file::parse(&std::fs::read(path).unwrap(), LETTER.len() as u64).unwrap();
    let c = off("4111");
    let v6 = off("2001:db8::1");
    assert_eq!(r.as_slice(), [c..c + 19, a..a + 14, v6..v6 + 11]);
    let (s, _, _) = ui.api("POST", "/api/save", r#"{"kind":"pdf"}"#);
    assert_eq!(s, 400);
    let out = d.path().join("copy.txt");
    ui.json(
        "POST",
        "/api/save",
        &format!(r#"{{"kind":"marked","path":"{}"}}"#, out.display()),
    );
    let copy = std::fs::read_to_string(&out).unwrap();
    assert!(
        copy.contains("<$S>Project Aurora<$E>") && copy.contains("<$S>4111 1111 1111 1111<$E>")
    );
}

/// Where the page saves: `-` is the standard output of `sieve ui`, a named pipe and a link to a
/// character device are written through, a link to a file and a folder are refused (400, with
/// the reason) and left as they were.
#[test]
fn saves_write_through_pipes_and_refuse_links() {
    let d = tempfile::tempdir().unwrap();
    let mut ui = Ui::start(&letter(d.path()), &[]);
    ui.wait_scanned();
    let save = |ui: &Ui, path: &Path| {
        let body = serde_json::json!({ "kind": "marked", "path": path }).to_string();
        let (s, _, b) = ui.api("POST", "/api/save", &body);
        (s, text(&b))
    };
    let reference = d.path().join("reference.marked");
    assert_eq!(save(&ui, &reference).0, 200);
    let want = std::fs::read(&reference).unwrap();
    let (s, b) = save(&ui, Path::new("-"));
    assert_eq!(s, 200, "{b}");
    assert!(!d.path().join("-").exists(), "a file named - was written");
    let mut out = vec![0u8; want.len()];
    ui.stdout.read_exact(&mut out).unwrap();
    assert_eq!(out, want, "standard output");
    let fifo = d.path().join("pipe");
    let reader = fifo_reader(&fifo);
    let (s, b) = save(&ui, &fifo);
    assert_eq!(s, 200, "{b}");
    assert!(is_fifo(&fifo), "the pipe was replaced by a file");
    assert_eq!(reader.join().unwrap(), want, "what the pipe carried");
    let null = d.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    assert_eq!(save(&ui, &null).0, 200);
    assert_eq!(link_target(&null), Some("/dev/null".into()));
    let victim = d.path().join("victim.txt");
    std::fs::write(&victim, "keep").unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let (s, b) = save(&ui, &link);
    assert_eq!(s, 400, "a link to a file: {b}");
    assert!(b.contains("symbolic link"), "{b}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(link_target(&link), Some(victim.clone()));
    let folder = d.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    let (s, b) = save(&ui, &folder);
    assert_eq!(s, 400, "a folder: {b}");
    assert!(b.contains("is a folder"), "{b}");
}

/// Send from the page to a real receiver, with progress, and get the document back intact.
#[test]
fn the_page_sends_with_its_ranges_to_a_receiver() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let inbox = root.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let rx = common::Server::start(&certs, &inbox, None, &[]);
    let d = tempfile::tempdir().unwrap();
    let doc = letter(d.path());
    let ca = rx.ca();
    let ui = Ui::start(
        &doc,
        &["--to", &rx.addr.to_string(), "--ca", ca.to_str().unwrap()],
    );
    let summary = ui.wait_scanned();
    assert_eq!(summary["receiver"], rx.addr.to_string());
    ui.json("POST", "/api/send", "");
    let status = ui.wait_sent();
    assert_eq!(status["state"], "delivered", "{status}\n{}", rx.log());
    assert_eq!(status["sent"], LETTER.len());
    // The page sends as `sieve send` does by default: in the mode auto chose, the page's
    // ranges going over TLS if that is the sieve, every byte if secure-only.
    let report = &status["report"];
    assert_eq!(report["decision"]["chosen"], report["mode"], "{status}");
    if report["mode"] == "sieve" {
        assert_eq!(report["secure_bytes"], summary["classified"]);
    } else {
        assert_eq!(report["mode"], "secure-only", "{status}");
        assert_eq!(report["secure_bytes"], LETTER.len());
    }
    assert_eq!(
        std::fs::read(inbox.join("letter.txt")).unwrap(),
        LETTER.as_bytes()
    );
}

/// A document in which nothing is marked goes secure-only from the page, as from `sieve send`:
/// nobody chose to send it in the clear.
#[test]
fn the_page_sends_a_document_with_nothing_marked_secure_only() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let inbox = root.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let rx = common::Server::start(&certs, &inbox, None, &[]);
    let d = tempfile::tempdir().unwrap();
    let text = "Minutes of the meeting: the room is booked until noon.\n".repeat(40);
    let doc = d.path().join("minutes.txt");
    std::fs::write(&doc, &text).unwrap();
    let ca = rx.ca();
    let ui = Ui::start(
        &doc,
        &["--to", &rx.addr.to_string(), "--ca", ca.to_str().unwrap()],
    );
    let summary = ui.wait_scanned();
    assert_eq!(summary["classified"], 0, "{summary}");
    let started = ui.json("POST", "/api/send", "");
    assert_eq!(started["secure_only"], true, "{started}");
    assert!(
        started["note"]
            .as_str()
            .is_some_and(|n| n.contains("secure-only")),
        "{started}"
    );
    let status = ui.wait_sent();
    assert_eq!(status["state"], "delivered", "{status}\n{}", rx.log());
    let report = &status["report"];
    assert_eq!(report["mode"], "secure-only", "{status}");
    assert_eq!(report["plain_bytes"], 0, "{status}");
    assert_eq!(report["secure_bytes"], text.len(), "{status}");
    assert_eq!(
        std::fs::read_to_string(inbox.join("minutes.txt")).unwrap(),
        text
    );
}

fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// chromedriver on a free port; killed when dropped.
struct Driver(Child, u16);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The page in headless Chromium: the policy's highlights appear labelled, a selection is
/// marked and another unmarked with the page's buttons, and the saved ranges file holds
/// exactly what the page shows. Screenshots go to `SIEVE_UI_SCREENSHOTS` when it names a folder.
#[tokio::test(flavor = "multi_thread")]
async fn the_page_marks_unmarks_and_saves_in_chromium() {
    use fantoccini::{ClientBuilder, Locator};
    let (Some(browser), Some(driver)) = (
        which(&["chromium", "chromium-browser", "google-chrome"]),
        which(&["chromedriver"]),
    ) else {
        eprintln!(
            "skipped: no Chromium and chromedriver installed (apt-get install chromium chromium-driver)"
        );
        return;
    };
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let d = tempfile::tempdir().unwrap();
    let doc = letter(d.path());
    let ui = Ui::start(&doc, &[]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let drv = Driver(
        std::process::Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver"),
        port,
    );
    wait_for("chromedriver", Duration::from_secs(30), || {
        TcpStream::connect(("127.0.0.1", drv.1)).is_ok()
    });
    let profile = tempfile::tempdir().unwrap();
    let caps: serde_json::Map<String, serde_json::Value> = serde_json::from_value(serde_json::json!({
        "goog:chromeOptions": {
            "binary": browser,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1280,720",
                format!("--user-data-dir={}", profile.path().display()),
            ]
        }
    }))
    .unwrap();
    let c = ClientBuilder::rustls()
        .unwrap()
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", drv.1))
        .await
        .expect("a WebDriver session with Chromium");
    let shots = std::env::var_os("SIEVE_UI_SCREENSHOTS").map(PathBuf::from);
    let wait = Duration::from_secs(30);

    c.goto(&ui.url).await.unwrap();
    // The browser was given a cookie for the token and sent on to an address without it.
    let now = c.current_url().await.unwrap();
    assert!(
        now.query().is_none() && !now.as_str().contains(&ui.token),
        "the token stayed in the address: {now}"
    );
    // The policy's findings, labelled with their detectors.
    let card = c
        .wait()
        .at_most(wait)
        .for_element(Locator::Css("mark[data-label=card]"))
        .await
        .unwrap();
    assert_eq!(card.text().await.unwrap(), "4111 1111 1111 1111");
    let email = c
        .find(Locator::Css("mark[data-label=email]"))
        .await
        .unwrap();
    assert_eq!(email.text().await.unwrap(), "jane.doe@corp.example.io");
    if let Some(dir) = &shots {
        std::fs::write(dir.join("marking-page.png"), c.screenshot().await.unwrap()).unwrap();
    }

    // Select "Project Aurora" as a person would (a selection in the page), then click Mark.
    let select = r#"
        const [needle, n] = arguments;
        const walker = document.createTreeWalker(document.getElementById('pages'), NodeFilter.SHOW_TEXT);
        let seen = 0;
        while (walker.nextNode()) {
            const t = walker.currentNode;
            const i = t.data.indexOf(needle);
            if (i >= 0 && seen++ === n) {
                const r = document.createRange();
                r.setStart(t, i);
                r.setEnd(t, i + needle.length);
                const s = window.getSelection();
                s.removeAllRanges();
                s.addRange(r);
                return true;
            }
        }
        return false;
    "#;
    let ok = c
        .execute(select, vec!["Project Aurora".into(), 0.into()])
        .await
        .unwrap();
    assert_eq!(ok, serde_json::Value::Bool(true));
    c.find(Locator::Id("mark-btn"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let manual = c
        .wait()
        .at_most(wait)
        .for_element(Locator::Css("mark[data-label=manual]"))
        .await
        .unwrap();
    assert_eq!(manual.text().await.unwrap(), "Project Aurora");

    // Unmark the e-mail address (a selection inside a highlight).
    let ok = c
        .execute(select, vec!["jane.doe@corp.example.io".into(), 0.into()])
        .await
        .unwrap();
    assert_eq!(ok, serde_json::Value::Bool(true));
    c.find(Locator::Id("unmark-btn"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let deadline = Instant::now() + wait;
    while !c
        .find_all(Locator::Css("mark[data-label=email]"))
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the e-mail highlight never went away"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The P shown moved with the edits.
    let p = c
        .find(Locator::Id("stat-p"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let classified = (19 + 14 + 11) as f64 / LETTER.len() as f64;
    assert_eq!(p, format!("P = {:.2} %", classified * 100.0));

    // Save the ranges from the page and read the file.
    c.find(Locator::Id("save-ranges"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let msg = c.find(Locator::Id("message")).await.unwrap();
    let deadline = Instant::now() + wait;
    while !msg.text().await.unwrap().starts_with("Saved the ranges") {
        assert!(
            Instant::now() < deadline,
            "never saved: {}",
            msg.text().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if let Some(dir) = &shots {
        std::fs::write(
            dir.join("marking-page-edited.png"),
            c.screenshot().await.unwrap(),
        )
        .unwrap();
    }
    let saved = d.path().join("letter.txt.ranges.json");
    let r = sieve_core::ranges_file::parse(&std::fs::read(&saved).unwrap(), LETTER.len() as u64)
        .unwrap();
    let (cd, a, v6) = (off("4111"), off("Project Aurora"), off("2001:db8::1"));
    assert_eq!(r.as_slice(), [cd..cd + 19, a..a + 14, v6..v6 + 11]);
    c.close().await.unwrap();
}
