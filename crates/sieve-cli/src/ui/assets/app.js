'use strict';
// The marking page. Everything it shows comes from this server's API, a window of the
// document at a time. The browser holds the session cookie the address's token was exchanged
// for; every call also carries the CSRF value this page was served with, which no other
// origin can read.

const csrf = document.querySelector('meta[name="sieve-csrf"]').content;
const PAGE = 64 * 1024;   // bytes per window
const KEEP = 12;          // windows kept in the page at once
const $ = (id) => document.getElementById(id);
const enc = new TextEncoder();

let doc = null;           // the server's summary of the open document
let pages = [];           // {offset, len, bytes, el}
let busy = false;
let lastId = null;

async function api(path, opts = {}) {
  const headers = Object.assign({ 'X-Sieve-Csrf': csrf }, opts.headers || {});
  const r = await fetch(path, Object.assign({}, opts, { headers }));
  if (!r.ok) throw new Error((await r.text()) || r.statusText);
  return r;
}
const getJSON = async (p) => (await api(p)).json();
const postJSON = async (p, body) => (await api(p, {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body || {}),
})).json();

function say(text, error) {
  const m = $('message');
  m.textContent = text;
  m.className = error ? 'error' : '';
}

function bytes(n) {
  if (n < 1024) return n + ' B';
  const u = ['KiB', 'MiB', 'GiB', 'TiB'];
  let i = -1;
  do { n /= 1024; i++; } while (n >= 1024 && i < u.length - 1);
  return n.toFixed(n < 10 ? 2 : 1) + ' ' + u[i];
}

function colour(label) {
  if (label === 'manual') return 'manual';
  let h = 0;
  for (const c of label) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return 'c' + (h % 8);
}

function show(s) {
  doc = s;
  const ready = s.open && s.scan === 'done';
  for (const id of ['mark-btn', 'unmark-btn', 'save-ranges', 'save-marked']) $(id).disabled = !ready;
  $('send-btn').disabled = !ready || !s.receiver;
  $('send-btn').title = s.receiver ? 'Send to ' + s.receiver : 'Start sieve ui with --to and --ca to send';
  $('policy').textContent = s.policy ? '(' + s.policy + ')' : '';
  $('empty').hidden = !!s.open;
  if (!s.open) return;
  $('docname').textContent = s.path;
  $('stat-p').textContent = 'P = ' + (s.p * 100).toFixed(2) + ' %';
  $('stat-bytes').textContent = bytes(s.classified) + ' classified · ' + bytes(s.plain) +
    ' in the clear · ' + bytes(s.len);
  $('stat-scan').textContent = s.scan === 'scanning'
    ? 'scanning ' + Math.floor(100 * s.scanned / Math.max(1, s.len)) + ' %'
    : s.scan === 'failed' ? 'scan failed' : s.format + ' · ' + s.segments + ' parts';
  if (s.error) say(s.error, true);
  const ul = $('counts');
  ul.replaceChildren();
  for (const [name, n] of Object.entries(s.counts || {})) {
    const li = document.createElement('li');
    li.className = n ? '' : 'zero';
    const a = document.createElement('span');
    a.textContent = name;
    const b = document.createElement('span');
    b.className = 'n';
    b.textContent = n;
    li.append(a, b);
    ul.appendChild(li);
  }
}

function latin1(u8) {
  let s = '';
  for (let i = 0; i < u8.length; i += 4096) s += String.fromCharCode.apply(null, u8.subarray(i, i + 4096));
  return s;
}

// Render one window: plain runs as <span>, classified ones as <mark data-label>, each with the
// document offset of its first byte.
async function render(page) {
  const segs = await getJSON(`/api/spans?offset=${page.offset}&len=${page.len}`);
  const frag = document.createDocumentFragment();
  const end = page.offset + page.len;
  const put = (a, b, seg) => {
    if (b <= a) return;
    const el = document.createElement(seg ? 'mark' : 'span');
    el.dataset.start = a;
    const slice = page.bytes.subarray(a - page.offset, b - page.offset);
    try {
      el.textContent = new TextDecoder('utf-8', { fatal: true }).decode(slice);
    } catch (_) {
      el.textContent = latin1(slice); // not UTF-8: one character per byte
      el.dataset.raw = '1';
    }
    el.dataset.len = b - a;
    if (seg) {
      el.dataset.label = seg.label;
      el.className = colour(seg.label);
      el.title = seg.label + ' · bytes ' + seg.start + '..' + seg.end;
    }
    frag.appendChild(el);
  };
  let pos = page.offset;
  for (const s of segs) {
    const a = Math.max(s.start, page.offset);
    const b = Math.min(s.end, end);
    put(pos, a, null);
    put(a, b, s);
    pos = Math.max(pos, b);
  }
  put(pos, end, null);
  page.el.replaceChildren(frag);
}

async function fetchPage(offset, len) {
  const r = await api(`/api/window?offset=${offset}&len=${len}`);
  const page = {
    offset: Number(r.headers.get('X-Offset')),
    bytes: new Uint8Array(await r.arrayBuffer()),
    el: document.createElement('div'),
  };
  page.len = page.bytes.length;
  page.el.className = 'page';
  await render(page);
  return page;
}

async function openAt(offset) {
  pages = [];
  $('pages').replaceChildren();
  if (!doc || !doc.open) return;
  const p = await fetchPage(offset, PAGE);
  pages.push(p);
  $('pages').appendChild(p.el);
  $('doc').scrollTop = 0;
  await more();
}

// Load the following window when the end is near, the previous one near the top.
async function more() {
  if (busy || !doc || !doc.open || pages.length === 0) return;
  busy = true;
  try {
    const box = $('doc');
    const last = pages[pages.length - 1];
    const end = last.offset + last.len;
    if (box.scrollTop + box.clientHeight > box.scrollHeight - 800 && end < doc.len) {
      const p = await fetchPage(end, PAGE);
      if (p.len > 0) {
        pages.push(p);
        $('pages').appendChild(p.el);
        if (pages.length > KEEP) {
          const old = pages.shift();
          const h = old.el.offsetHeight;
          old.el.remove();
          box.scrollTop -= h;
        }
      }
    } else if (box.scrollTop < 200 && pages[0].offset > 0) {
      const first = pages[0];
      const from = Math.max(0, first.offset - PAGE);
      const p = await fetchPage(from, first.offset - from);
      if (p.len > 0 && p.offset + p.len === first.offset) {
        pages.unshift(p);
        $('pages').prepend(p.el);
        box.scrollTop += p.el.offsetHeight;
        if (pages.length > KEEP) pages.pop().el.remove();
      }
    }
  } catch (e) {
    say(e.message, true);
  } finally {
    busy = false;
  }
}

async function rerender() {
  for (const p of pages) await render(p);
}

// The document offset of a point of the selection.
function byteAt(node, off) {
  if (node.nodeType === Node.TEXT_NODE) {
    const el = node.parentElement.closest('[data-start]');
    if (!el) return null;
    const start = Number(el.dataset.start);
    return el.dataset.raw ? start + off : start + enc.encode(node.data.slice(0, off)).length;
  }
  const el = node.closest ? node.closest('[data-start]') : null;
  if (el) return Number(el.dataset.start) + (off > 0 ? Number(el.dataset.len) : 0);
  // A point between runs (in a page or the list of pages): the run after it, or the end.
  const kids = node.childNodes;
  for (let i = off; i < kids.length; i++) {
    const k = kids[i].querySelector ? (kids[i].dataset && kids[i].dataset.start ? kids[i] : kids[i].querySelector('[data-start]')) : null;
    if (k) return Number(k.dataset.start);
  }
  for (let i = Math.min(off, kids.length) - 1; i >= 0; i--) {
    const all = kids[i].querySelectorAll ? kids[i].querySelectorAll('[data-start]') : [];
    const k = kids[i].dataset && kids[i].dataset.start ? kids[i] : all[all.length - 1];
    if (k) return Number(k.dataset.start) + Number(k.dataset.len);
  }
  return null;
}

function selectedRange() {
  const sel = window.getSelection();
  if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return null;
  const r = sel.getRangeAt(0);
  if (!$('pages').contains(r.commonAncestorContainer)) return null;
  const a = byteAt(r.startContainer, r.startOffset);
  const b = byteAt(r.endContainer, r.endOffset);
  if (a === null || b === null || a === b) return null;
  return { start: Math.min(a, b), end: Math.max(a, b) };
}

async function edit(kind) {
  const r = selectedRange();
  if (!r) { say('Select some text of the document first.', true); return; }
  try {
    show(await postJSON('/api/' + kind, r));
    window.getSelection().removeAllRanges();
    await rerender();
    say((kind === 'mark' ? 'Marked' : 'Unmarked') + ' bytes ' + r.start + '..' + r.end + '.');
  } catch (e) { say(e.message, true); }
}

async function save(kind) {
  try {
    const path = $('save-path').value.trim();
    const r = await postJSON('/api/save', { kind, path: path || null });
    say('Saved ' + (kind === 'ranges' ? 'the ranges' : 'a marked copy') + ' to ' + r.path);
  } catch (e) { say(e.message, true); }
}

async function send() {
  try {
    const started = await postJSON('/api/send');
    const note = started && started.note ? ' (' + started.note + ')' : '';
    const bar = $('send-progress');
    bar.hidden = false;
    const tick = async () => {
      const s = await getJSON('/api/send');
      bar.max = Math.max(1, s.total);
      bar.value = s.sent;
      $('send-state').textContent = s.state + (s.total ? ' ' + bytes(s.sent) + ' / ' + bytes(s.total) : '');
      if (s.state === 'sending') { setTimeout(tick, 150); return; }
      if (s.state === 'delivered') {
        bar.value = bar.max;
        const r = s.report || {};
        say('Delivered: ' + bytes(r.secure_bytes || 0) + ' over TLS, ' + bytes(r.plain_bytes || 0) +
          ' in the clear, in ' + Math.round(r.total_ms || 0) + ' ms' + note + '.');
      } else say('Not delivered: ' + (s.error || 'unknown error'), true);
    };
    tick();
  } catch (e) { say(e.message, true); }
}

// Poll the summary while the policy scans, and once a document is opened.
async function poll() {
  try {
    const s = await getJSON('/api/doc');
    const fresh = s.open && s.id !== lastId;
    const finished = doc && doc.scan === 'scanning' && s.scan !== 'scanning' && s.id === doc.id;
    show(s);
    if (fresh) { lastId = s.id; await openAt(0); }
    else if (finished) await rerender();
  } catch (e) { say(e.message, true); }
  setTimeout(poll, doc && doc.scan === 'scanning' ? 250 : 1000);
}

async function openPath(path) {
  try {
    show(await postJSON('/api/open', { path }));
    lastId = doc.id;
    await openAt(0);
    say('Opened ' + path);
  } catch (e) { say(e.message, true); }
}

async function upload(file) {
  try {
    say('Reading ' + file.name + ' (' + bytes(file.size) + ')…');
    const r = await api('/api/upload?name=' + encodeURIComponent(file.name), { method: 'POST', body: file });
    show(await r.json());
    lastId = doc.id;
    await openAt(0);
    say('Opened ' + file.name);
  } catch (e) { say(e.message, true); }
}

$('mark-btn').addEventListener('click', () => edit('mark'));
$('unmark-btn').addEventListener('click', () => edit('unmark'));
$('save-ranges').addEventListener('click', () => save('ranges'));
$('save-marked').addEventListener('click', () => save('marked'));
$('send-btn').addEventListener('click', send);
$('open-btn').addEventListener('click', () => openPath($('open-path').value.trim()));
$('open-path').addEventListener('keydown', (e) => { if (e.key === 'Enter') openPath(e.target.value.trim()); });
$('goto').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && doc && doc.open) openAt(Math.max(0, Math.min(doc.len, Number(e.target.value) || 0)));
});
$('doc').addEventListener('scroll', more);
document.addEventListener('keydown', (e) => {
  if (e.target.tagName === 'INPUT' || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === 'm' && !$('mark-btn').disabled) edit('mark');
  if (e.key === 'u' && !$('unmark-btn').disabled) edit('unmark');
});
let depth = 0;
document.addEventListener('dragenter', (e) => { e.preventDefault(); depth++; $('drop').hidden = false; });
document.addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; $('drop').hidden = true; } });
document.addEventListener('dragover', (e) => e.preventDefault());
document.addEventListener('drop', (e) => {
  e.preventDefault();
  depth = 0;
  $('drop').hidden = true;
  const f = e.dataTransfer && e.dataTransfer.files[0];
  if (f) upload(f);
});
poll();
