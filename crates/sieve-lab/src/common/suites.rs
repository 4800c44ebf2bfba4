//! Measuring and naming the cipher suites (F5.3 and F5.4 share them).

use anyhow::Result;

use super::record::Record;
use super::Ctx;
use crate::run::{no_wrap, Receiver, SendOptions, THESIS_SUITES};

/// Measure secure-only and sieve for every suite at x = `xs` MB and `ps`: today's suites against
/// the normal receiver, the thesis's against one started with `--insecure-thesis-suites`.
pub(crate) fn measure_suites(
    ctx: &mut Ctx,
    xs: &[u64],
    ps: &[f64],
    rounds: usize,
) -> Result<Vec<Record>> {
    let modern = ["aes128gcm", "aes256gcm", "chacha20"];
    let legacy: &[&'static str] = if ctx.tools.thesis_suites {
        &THESIS_SUITES
    } else {
        &[]
    };
    let mut recs = Vec::new();
    for group in [&modern[..], legacy] {
        if group.is_empty() {
            continue;
        }
        let mut pts = Vec::new();
        for &c in group {
            let so = SendOptions {
                cipher: c,
                ..SendOptions::secure_only()
            };
            let sv = SendOptions {
                cipher: c,
                ..SendOptions::default()
            };
            pts.append(&mut ctx.xp_points(c, xs, ps, (&so, &sv), rounds)?);
        }
        let extra: &[&str] = if group == legacy {
            &["--insecure-thesis-suites"]
        } else {
            &[]
        };
        let rx = Receiver::start_with(&ctx.tools, "127.0.0.1", false, extra, &no_wrap)?;
        recs.append(&mut ctx.sweep(&rx, &pts, &no_wrap)?);
    }
    Ok(recs)
}

/// The suites in the records, today's first.
pub(crate) fn suites(recs: &[Record]) -> Vec<String> {
    let mut v: Vec<String> = recs.iter().map(|r| r.cipher.clone()).collect();
    v.sort_by_key(|c| (THESIS_SUITES.contains(&c.as_str()), c.clone()));
    v.dedup();
    v
}

/// How a suite is named in plots and tables; the thesis's suites are marked insecure.
pub(crate) fn suite_label(c: &str) -> String {
    match c {
        "3des-ede-cbc-sha" => "TLS 1.2 3DES-EDE-CBC-SHA (INSECURE)".into(),
        "aes256-cbc-sha" => "TLS 1.2 AES-256-CBC-SHA (INSECURE)".into(),
        other => format!("TLS 1.3 {other}"),
    }
}
