//! Workloads exactly as thesis §5.1.2: x-P files, and the batch file sets UFS and EFS (§5.4.1).
//! Generated on demand into the lab's work folder, never committed.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sieve_core::gen::{write_xp, XpSpec, MB, WRITE_CHUNK};

/// Generates and caches x-P files.
pub(crate) struct Workloads {
    dir: PathBuf,
    cache: HashMap<(u64, u64, u32), PathBuf>,
}

impl Workloads {
    pub(crate) fn new(dir: &Path) -> Result<Workloads> {
        std::fs::create_dir_all(dir)?;
        Ok(Workloads {
            dir: dir.to_path_buf(),
            cache: HashMap::new(),
        })
    }

    /// An x-P file of `bytes` content bytes (marks excluded); `copy` makes distinct names.
    pub(crate) fn xp_bytes(&mut self, bytes: u64, p: f64, copy: u32) -> Result<PathBuf> {
        let key = (bytes, (p * 1000.0).round() as u64, copy);
        if let Some(f) = self.cache.get(&key) {
            return Ok(f.clone());
        }
        let name = if bytes.is_multiple_of(MB) {
            format!("{}MB-{}", bytes / MB, (p * 100.0).round() as u32)
        } else {
            format!("{bytes}B-{}", (p * 100.0).round() as u32)
        };
        let path = self.dir.join(if copy == 0 {
            format!("{name}.txt")
        } else {
            format!("{name}.{copy}.txt")
        });
        let f = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = BufWriter::with_capacity(WRITE_CHUNK, f);
        write_xp(
            XpSpec {
                size: bytes,
                proportion: p,
                seed: 1,
            },
            &mut w,
        )?;
        w.flush()?;
        self.cache.insert(key, path.clone());
        Ok(path)
    }

    /// The thesis's x-P file, x in MB.
    pub(crate) fn xp(&mut self, x_mb: u64, p: f64) -> Result<PathBuf> {
        self.xp_bytes(x_mb * MB, p, 0)
    }

    /// Uneven file set UFS = {1MB-10, x-50, 1MB-90}.
    pub(crate) fn ufs(&mut self, x_mb: u64) -> Result<Vec<PathBuf>> {
        Ok(vec![
            self.xp(1, 0.1)?,
            self.xp(x_mb, 0.5)?,
            self.xp(1, 0.9)?,
        ])
    }

    /// Even file set EFS = {x-50, x-50, x-50} (three distinct files).
    pub(crate) fn efs(&mut self, x_mb: u64) -> Result<Vec<PathBuf>> {
        (0..3)
            .map(|c| self.xp_bytes(x_mb * MB, 0.5, c + 1))
            .collect()
    }
}
