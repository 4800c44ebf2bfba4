//! The marking page's HTTP server: the page and its assets (embedded in the binary), and the
//! JSON API the page calls.
//!
//! Access: the server listens on loopback only; every request must name this server in its
//! `Host` header (so a web page elsewhere cannot reach it by rebinding a name to 127.0.0.1).
//! The address `sieve ui` prints carries a random token; `GET /?token=` exchanges it for a
//! session cookie (`HttpOnly; SameSite=Strict`, named after this server's port so that two pages
//! on one host keep theirs apart) and redirects to `/`, so the token stays neither in the
//! address bar nor in the page's history entry. The page is served only to that cookie, and
//! carries a second random value, the CSRF value; an API call is taken with the cookie only if
//! it also carries that value in the `X-Sieve-Csrf` header, comes from no other origin
//! (`Origin`, `Sec-Fetch-Site`), or else with the token itself in the `X-Sieve-Token` header (for
//! scripts). Another site's page can make a browser send the cookie (another port of this host
//! is even the same site) but can neither read the page's CSRF value nor set a custom header
//! without a CORS preflight, which this server never grants.
//!
//! Large documents: the page asks for windows of the file (at most [`MAX_WINDOW`] bytes) and
//! for the segments inside them; nothing ever reads the whole file into memory, and the first
//! window is served while the policy is still scanning the rest.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use serde::Deserialize;
use sieve_core::marks::MarkConfig;
use sieve_core::ranges::ClassifiedRanges;
use sieve_core::ranges_file;
use sieve_mark::{Policy, ScanOptions};
use sieve_transport::sender::Progress;

use super::spans::{Seg, Spans};

/// Largest window of the document served at once.
pub const MAX_WINDOW: u64 = 256 << 10;

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// Where `sieve ui` sends documents, if it was told.
#[derive(Debug, Clone)]
pub struct Receiver {
    pub to: String,
    pub ca: PathBuf,
}

pub struct App {
    pub token: String,
    /// The session cookie's name (`sieve-ui-PORT`) and value, given for the token.
    cookie_name: String,
    session: String,
    /// The value the page carries and sends back in `X-Sieve-Csrf` with the cookie.
    csrf: String,
    /// Host headers accepted (`127.0.0.1:PORT`, `localhost:PORT`).
    pub hosts: Vec<String>,
    pub policy: Arc<Policy>,
    pub receiver: Option<Receiver>,
    /// Where dropped documents are kept while the page runs.
    pub uploads: tempfile::TempDir,
    doc: Mutex<Option<Doc>>,
    opened: AtomicU64,
    send: Mutex<SendState>,
}

enum Scan {
    Running(Arc<AtomicU64>),
    Done,
    Failed(String),
}

struct Doc {
    id: u64,
    path: PathBuf,
    name: String,
    len: u64,
    file: Arc<File>,
    spans: Spans,
    scan: Scan,
    counts: Vec<(String, u64)>,
    format: String,
}

#[derive(Default)]
struct SendState {
    progress: Option<Arc<Progress>>,
    state: &'static str,
    error: Option<String>,
    report: Option<serde_json::Value>,
}

type ApiError = (StatusCode, String);
type ApiResult<T> = Result<T, ApiError>;

fn bad(msg: impl Into<String>) -> ApiError {
    (StatusCode::BAD_REQUEST, msg.into())
}

fn conflict(msg: impl Into<String>) -> ApiError {
    (StatusCode::CONFLICT, msg.into())
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// 128 random bits in hex, from the operating system: a token, a session or a CSRF value.
pub fn random_hex() -> String {
    use rand::RngCore;
    let mut t = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut t);
    t.iter().map(|b| format!("{b:02x}")).collect()
}

fn forbidden(msg: &str) -> ApiError {
    (StatusCode::FORBIDDEN, msg.into())
}

impl App {
    pub fn new(
        token: String,
        port: u16,
        policy: Policy,
        receiver: Option<Receiver>,
    ) -> std::io::Result<Arc<App>> {
        Ok(Arc::new(App {
            token,
            cookie_name: format!("sieve-ui-{port}"),
            session: random_hex(),
            csrf: random_hex(),
            hosts: vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            policy: Arc::new(policy),
            receiver,
            uploads: tempfile::tempdir()?,
            doc: Mutex::new(None),
            opened: AtomicU64::new(0),
            send: Mutex::new(SendState {
                state: "idle",
                ..SendState::default()
            }),
        }))
    }

    fn host_ok(&self, h: &HeaderMap) -> ApiResult<()> {
        let host = h
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if self.hosts.iter().any(|x| x == host) {
            Ok(())
        } else {
            Err((
                StatusCode::FORBIDDEN,
                "this page answers only to its own address".into(),
            ))
        }
    }

    /// A request a browser made for a page of another origin is refused, whatever it carries.
    fn origin_ok(&self, h: &HeaderMap) -> ApiResult<()> {
        match h.get(header::ORIGIN).map(|v| v.to_str().unwrap_or("")) {
            None => Ok(()),
            Some(o)
                if o.strip_prefix("http://")
                    .is_some_and(|host| self.hosts.iter().any(|x| x == host)) =>
            {
                Ok(())
            }
            Some(_) => Err(forbidden("requests from another origin are refused")),
        }
    }

    /// Whether the request carries this server's session cookie.
    fn has_cookie(&self, h: &HeaderMap) -> bool {
        h.get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .any(|(k, v)| k == self.cookie_name && same(v.as_bytes(), self.session.as_bytes()))
    }

    /// The `Set-Cookie` header that gives the session for the token.
    fn set_cookie(&self) -> String {
        format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            self.cookie_name, self.session
        )
    }

    fn authorize(&self, h: &HeaderMap) -> ApiResult<()> {
        self.host_ok(h)?;
        self.origin_ok(h)?;
        let token = h.get("x-sieve-token").map(|v| v.as_bytes()).unwrap_or(b"");
        if same(token, self.token.as_bytes()) {
            return Ok(());
        }
        // The page's calls: the cookie, the CSRF value only the page can read, and (where the
        // browser says) from the page's own origin.
        let csrf = h.get("x-sieve-csrf").map(|v| v.as_bytes()).unwrap_or(b"");
        let site = h.get("sec-fetch-site").map(|v| v.as_bytes());
        if self.has_cookie(h)
            && same(csrf, self.csrf.as_bytes())
            && site.is_none_or(|s| s == b"same-origin")
        {
            return Ok(());
        }
        Err(forbidden(
            "missing or wrong X-Sieve-Token header (or the page's cookie and X-Sieve-Csrf)",
        ))
    }

    fn lock_doc(&self) -> std::sync::MutexGuard<'_, Option<Doc>> {
        self.doc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Open `path` and start classifying it in the background.
    pub fn open(self: &Arc<Self>, path: &Path) -> anyhow::Result<()> {
        use anyhow::Context;
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat {}", path.display()))?;
        if !meta.is_file() {
            anyhow::bail!("{} is not a regular file", path.display());
        }
        let id = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
        let done = Arc::new(AtomicU64::new(0));
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("document")
            .to_string();
        *self.lock_doc() = Some(Doc {
            id,
            path: path.to_path_buf(),
            name: name.clone(),
            len: meta.len(),
            file: Arc::new(file),
            spans: Spans::default(),
            scan: Scan::Running(done.clone()),
            counts: Vec::new(),
            format: String::new(),
        });
        let app = self.clone();
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let result = File::open(&path).and_then(|f| {
                let reader = Counting {
                    inner: f,
                    done: done.clone(),
                };
                let opts = ScanOptions {
                    name: Some(name),
                    ..ScanOptions::default()
                };
                app.policy.scan_reader(reader, &opts)
            });
            let mut guard = app.lock_doc();
            let Some(doc) = guard.as_mut().filter(|d| d.id == id) else {
                return; // another document was opened meanwhile
            };
            match result {
                Ok(m) => {
                    doc.spans = Spans::from_segs(
                        m.spans
                            .iter()
                            .map(|s| Seg {
                                start: s.start,
                                end: s.end,
                                label: m.names_of(s.detectors).join("+"),
                            })
                            .collect(),
                    );
                    doc.counts = m.counts_by_name();
                    doc.format = m.format.to_string();
                    doc.scan = Scan::Done;
                }
                Err(e) => doc.scan = Scan::Failed(format!("cannot read the document: {e}")),
            }
        });
        Ok(())
    }

    fn summary(&self) -> serde_json::Value {
        let guard = self.lock_doc();
        let receiver = self.receiver.as_ref().map(|r| r.to.clone());
        let Some(d) = guard.as_ref() else {
            return serde_json::json!({ "open": false, "policy": self.policy.name, "receiver": receiver });
        };
        let (state, scanned, error) = match &d.scan {
            Scan::Running(n) => ("scanning", n.load(Ordering::Relaxed), None),
            Scan::Done => ("done", d.len, None),
            Scan::Failed(e) => ("failed", 0, Some(e.clone())),
        };
        let classified = d.spans.classified();
        let counts: BTreeMap<&str, u64> = d.counts.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        serde_json::json!({
            "open": true,
            "id": d.id,
            "name": d.name,
            "path": d.path.display().to_string(),
            "len": d.len,
            "scan": state,
            "scanned": scanned,
            "error": error,
            "format": d.format,
            "policy": self.policy.name,
            "classified": classified,
            "plain": d.len - classified.min(d.len),
            "p": if d.len == 0 { 0.0 } else { classified as f64 / d.len as f64 },
            "segments": d.spans.len(),
            "counts": counts,
            "receiver": receiver,
        })
    }
}

/// A reader that counts what it has read, for the scan's progress.
struct Counting {
    inner: File,
    done: Arc<AtomicU64>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/app.css", get(app_css))
        .route("/api/doc", get(doc))
        .route("/api/window", get(window))
        .route("/api/spans", get(spans))
        .route("/api/mark", post(mark))
        .route("/api/unmark", post(unmark))
        .route("/api/save", post(save))
        .route("/api/open", post(open))
        .route(
            "/api/upload",
            post(upload).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route("/api/send", post(send).get(send_status))
        .layer(axum::extract::DefaultBodyLimit::max(64 << 10))
        .with_state(app)
}

fn secured(mut r: Response) -> Response {
    let h = r.headers_mut();
    // Everything the page needs is served from here; nothing else may load or frame it.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The page: `/?token=` exchanges the token for the session cookie and redirects to `/`, which
/// is served only to that cookie.
async fn index(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if let Err(e) = app.host_ok(&headers).and_then(|()| app.origin_ok(&headers)) {
        return e.into_response();
    }
    let refused = || {
        (
            StatusCode::FORBIDDEN,
            "open the address `sieve ui` printed: it carries the page's token",
        )
            .into_response()
    };
    if let Some(token) = q.get("token") {
        if !same(token.as_bytes(), app.token.as_bytes()) {
            return refused();
        }
        let Ok(cookie) = HeaderValue::from_str(&app.set_cookie()) else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::SEE_OTHER;
        r.headers_mut()
            .insert(header::LOCATION, HeaderValue::from_static("/"));
        r.headers_mut().insert(header::SET_COOKIE, cookie);
        return secured(r);
    }
    if !app.has_cookie(&headers) {
        return refused();
    }
    secured(Html(INDEX.replace(CSRF_SLOT, &app.csrf)).into_response())
}

/// Where the page's template takes the CSRF value.
const CSRF_SLOT: &str = "__SIEVE_CSRF__";

async fn app_js(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = app.host_ok(&headers) {
        return e.into_response();
    }
    secured(
        (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            APP_JS,
        )
            .into_response(),
    )
}

async fn app_css(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = app.host_ok(&headers) {
        return e.into_response();
    }
    secured(([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS).into_response())
}

async fn doc(State(app): State<Arc<App>>, h: HeaderMap) -> ApiResult<Json<serde_json::Value>> {
    app.authorize(&h)?;
    Ok(Json(app.summary()))
}

#[derive(Deserialize)]
struct WindowQ {
    offset: u64,
    len: u64,
}

/// Raw bytes of the document from `offset`, at most `len` (and [`MAX_WINDOW`]), cut so that no
/// UTF-8 character is split; the bytes' real offset and length are in `X-Offset` and `X-Len`.
async fn window(
    State(app): State<Arc<App>>,
    h: HeaderMap,
    Query(q): Query<WindowQ>,
) -> ApiResult<Response> {
    app.authorize(&h)?;
    let (file, doc_len) = {
        let g = app.lock_doc();
        let d = g.as_ref().ok_or_else(|| conflict("no document is open"))?;
        (d.file.clone(), d.len)
    };
    let offset = q.offset.min(doc_len);
    let want = q.len.min(MAX_WINDOW).min(doc_len - offset);
    // Read a little more on each side to find character boundaries.
    let lo = offset.saturating_sub(3);
    let hi = (offset + want + 3).min(doc_len);
    let bytes = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; (hi - lo) as usize];
        file.read_exact_at(&mut buf, lo)?;
        Ok(buf)
    })
    .await
    .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    .map_err(|e| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot read the document: {e}"),
        )
    })?;
    let cont = |b: u8| b & 0xC0 == 0x80;
    // Start: skip continuation bytes (at most 3) at the offset.
    let mut a = (offset - lo) as usize;
    while a < bytes.len() && a < (offset - lo) as usize + 3 && cont(bytes[a]) {
        a += 1;
    }
    // End: back off so that the last character is whole.
    let mut e = ((offset + want) - lo) as usize;
    if e < bytes.len() && e > a {
        let mut k = e;
        while k > a && e - k < 4 && cont(bytes[k]) {
            k -= 1;
        }
        if cont(bytes[e]) {
            e = k;
        }
    }
    let e = e.max(a);
    let start = lo + a as u64;
    let body = bytes[a..e].to_vec();
    let mut r = Response::new(Body::from(body));
    let hd = r.headers_mut();
    hd.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    hd.insert("x-offset", HeaderValue::from(start));
    hd.insert("x-len", HeaderValue::from((e - a) as u64));
    Ok(secured(r))
}

async fn spans(
    State(app): State<Arc<App>>,
    h: HeaderMap,
    Query(q): Query<WindowQ>,
) -> ApiResult<Json<Vec<Seg>>> {
    app.authorize(&h)?;
    let g = app.lock_doc();
    let d = g.as_ref().ok_or_else(|| conflict("no document is open"))?;
    let end = q.offset.saturating_add(q.len.min(MAX_WINDOW));
    Ok(Json(d.spans.within(q.offset..end).to_vec()))
}

#[derive(Deserialize)]
struct RangeQ {
    start: u64,
    end: u64,
}

fn edit(app: &App, r: &RangeQ, mark: bool) -> ApiResult<()> {
    let mut g = app.lock_doc();
    let d = g.as_mut().ok_or_else(|| conflict("no document is open"))?;
    if !matches!(d.scan, Scan::Done) {
        return Err(conflict(
            "the policy is still classifying the document; edit when it is done",
        ));
    }
    if r.start > r.end || r.end > d.len {
        return Err(bad(format!(
            "{}..{} is not a range of the document ({} bytes)",
            r.start, r.end, d.len
        )));
    }
    if mark {
        d.spans.mark(r.start..r.end, "manual");
    } else {
        d.spans.unmark(r.start..r.end);
    }
    Ok(())
}

async fn mark(
    State(app): State<Arc<App>>,
    h: HeaderMap,
    Json(r): Json<RangeQ>,
) -> ApiResult<Json<serde_json::Value>> {
    app.authorize(&h)?;
    edit(&app, &r, true)?;
    Ok(Json(app.summary()))
}

async fn unmark(
    State(app): State<Arc<App>>,
    h: HeaderMap,
    Json(r): Json<RangeQ>,
) -> ApiResult<Json<serde_json::Value>> {
    app.authorize(&h)?;
    edit(&app, &r, false)?;
    Ok(Json(app.summary()))
}

#[derive(Deserialize)]
struct SaveQ {
    /// `ranges` or `marked`.
    kind: String,
    /// Where to write; default beside the document (`NAME.ranges.json`, `NAME.marked`).
    path: Option<String>,
}

/// The document's ranges, checked, and where it is.
fn current(app: &App) -> ApiResult<(ClassifiedRanges, PathBuf, Arc<File>)> {
    let g = app.lock_doc();
    let d = g.as_ref().ok_or_else(|| conflict("no document is open"))?;
    if !matches!(d.scan, Scan::Done) {
        return Err(conflict("the policy is still classifying the document"));
    }
    let r = ClassifiedRanges::new(d.spans.ranges(), d.len)
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok((r, d.path.clone(), d.file.clone()))
}

async fn save(
    State(app): State<Arc<App>>,
    h: HeaderMap,
    Json(q): Json<SaveQ>,
) -> ApiResult<Json<serde_json::Value>> {
    app.authorize(&h)?;
    let (ranges, doc_path, file) = current(&app)?;
    let suffix = match q.kind.as_str() {
        "ranges" => "ranges.json",
        "marked" => "marked",
        k => return Err(bad(format!("unknown kind {k}: save `ranges` or `marked`"))),
    };
    let out = match q.path.filter(|p| !p.trim().is_empty()) {
        Some(p) => PathBuf::from(p),
        None => {
            let mut p = doc_path.clone().into_os_string();
            p.push(".");
            p.push(suffix);
            PathBuf::from(p)
        }
    };
    if out == doc_path {
        return Err(bad("that is the document itself; choose another file"));
    }
    let kind = q.kind.clone();
    let target = out.clone();
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let out = crate::output::Output::new(&target);
        out.check()?;
        if kind == "ranges" {
            return out.write(ranges_file::to_json(&ranges).as_bytes());
        }
        // SAFETY: read-only mapping of a file nothing in this process writes; a concurrent
        // truncation by another program would raise SIGBUS, as for any program mapping its
        // input.
        let len = file.metadata()?.len();
        #[allow(unsafe_code)]
        let map = if len > 0 {
            Some(unsafe { memmap2::Mmap::map(&*file) }?)
        } else {
            None
        };
        let content: &[u8] = map.as_deref().unwrap_or(&[]);
        if content.len() as u64 != ranges.doc_len() {
            anyhow::bail!("the document changed since it was opened; open it again");
        }
        let cfg = MarkConfig {
            strip: true,
            ..MarkConfig::default()
        };
        out.write_with(|mut w| {
            sieve_mark::marked::write_marked(&cfg, content, ranges.as_slice(), &mut w)
        })
    })
    .await
    .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    .map_err(|e| {
        // A path the output rule refuses is the request's fault, not the server's.
        let status = if e.downcast_ref::<crate::output::Refused>().is_some() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        (status, format!("{e:#}"))
    })?;
    Ok(Json(
        serde_json::json!({ "path": out.display().to_string() }),
    ))
}

#[derive(Deserialize)]
struct OpenQ {
    path: String,
}

async fn open(
    State(app): State<Arc<App>>,
    h: HeaderMap,
    Json(q): Json<OpenQ>,
) -> ApiResult<Json<serde_json::Value>> {
    app.authorize(&h)?;
    app.open(Path::new(&q.path))
        .map_err(|e| bad(format!("{e:#}")))?;
    Ok(Json(app.summary()))
}

#[derive(Deserialize)]
struct UploadQ {
    name: String,
}

/// A document dropped on the page: streamed to a private folder, then opened.
async fn upload(
    State(app): State<Arc<App>>,
    h: HeaderMap,
    Query(q): Query<UploadQ>,
    body: Body,
) -> ApiResult<Json<serde_json::Value>> {
    use tokio::io::AsyncWriteExt;
    app.authorize(&h)?;
    let name = Path::new(&q.name)
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.starts_with('.'))
        .ok_or_else(|| bad("give the dropped file's name"))?
        .to_string();
    let path = app.uploads.path().join(&name);
    let mut f = tokio::fs::File::create(&path)
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| bad(format!("the upload broke off: {e}")))?;
        if let Some(data) = frame.data_ref() {
            f.write_all(data)
                .await
                .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        }
    }
    f.flush()
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    app.open(&path).map_err(|e| bad(format!("{e:#}")))?;
    Ok(Json(app.summary()))
}

/// Send the document with its current ranges to the configured receiver.
async fn send(State(app): State<Arc<App>>, h: HeaderMap) -> ApiResult<Json<serde_json::Value>> {
    app.authorize(&h)?;
    let rx = app.receiver.clone().ok_or_else(|| {
        conflict("no receiver is configured: start `sieve ui` with --to and --ca")
    })?;
    let (ranges, path, _) = current(&app)?;
    let progress = Arc::new(Progress::default());
    {
        let mut s = app.send.lock().unwrap_or_else(|p| p.into_inner());
        if s.state == "sending" {
            return Err(conflict("a document is being sent"));
        }
        *s = SendState {
            progress: Some(progress.clone()),
            state: "sending",
            error: None,
            report: None,
        };
    }
    let ranges_path = app.uploads.path().join(".send.ranges.json");
    std::fs::write(&ranges_path, ranges_file::to_json(&ranges))
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    // Nothing marked on the page: nobody chose to send the document in the clear.
    let unmarked = ranges.as_slice().is_empty();
    let how = if unmarked {
        super::PageSend::SecureOnly
    } else {
        super::PageSend::Ranges(&ranges_path)
    };
    let cfg = super::send_config(&rx, how)
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")))?;
    let app2 = app.clone();
    tokio::spawn(async move {
        let result = sieve_transport::sender::send(&cfg, &[path], progress).await;
        let mut s = app2.send.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(r) if r.docs_ok == r.docs => {
                s.state = "delivered";
                s.report = serde_json::to_value(&r).ok();
            }
            Ok(r) => {
                s.state = "failed";
                s.error = r.failures.first().and_then(|f| f.error.clone());
                s.report = serde_json::to_value(&r).ok();
            }
            Err(e) => {
                s.state = "failed";
                s.error = Some(format!("{e:#}"));
            }
        }
    });
    let note = unmarked.then_some(
        "nothing in the document is marked, so it travels secure-only: every byte over TLS",
    );
    Ok(Json(
        serde_json::json!({ "state": "sending", "secure_only": unmarked, "note": note }),
    ))
}

async fn send_status(
    State(app): State<Arc<App>>,
    h: HeaderMap,
) -> ApiResult<Json<serde_json::Value>> {
    app.authorize(&h)?;
    let s = app.send.lock().unwrap_or_else(|p| p.into_inner());
    let (sent, total) = s.progress.as_ref().map_or((0, 0), |p| {
        (p.sent(), p.total_bytes.load(Ordering::Relaxed))
    });
    Ok(Json(serde_json::json!({
        "state": s.state,
        "sent": sent,
        "total": total,
        "error": s.error,
        "report": s.report,
    })))
}
