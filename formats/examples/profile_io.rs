//! Measures how fast cgx-formats reads and writes one profile, and how much memory
//! reading takes.
//!
//! ```text
//! cargo run --release -p cgx-formats --example profile_io -- FILE
//! ```
//!
//! Reads FILE with [`cgx_formats::read_path`], then writes the profile with the
//! Callgrind writer (default options, behind a 256 KiB buffer as `write_path` uses)
//! into [`std::io::sink`], counting the bytes. Prints one line of `key=value`
//! figures:
//!
//! - `file_bytes`: the size of FILE; `read_s`, `read_mb_s`: the time of
//!   `read_path` and FILE's size divided by it (MB = 10^6 bytes);
//! - `write_bytes`, `write_s`, `write_mb_s`: the same for writing (throughput of the
//!   bytes written);
//! - `parts`, `functions` (summed over parts), `records`, `record_bytes` (encoded
//!   size of all records), `names`: what the profile holds;
//! - `rss_read_kb`, `peak_rss_read_kb`: resident memory right after reading, and its
//!   peak so far (`VmRSS`, `VmHWM` of /proc/self/status); `peak_rss_kb`: the peak
//!   after writing as well; `peak_rss_ratio`: `peak_rss_read_kb` over the file size.
//!
//! Errors are printed as `profile_io: ERROR` with exit status 1.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use cgx_formats::{CallgrindOptions, Format};

/// A writer that counts the bytes it passes on.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A field of /proc/self/status in KiB (`VmRSS`, `VmHWM`); 0 where unavailable.
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn mb_per_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / 1e6 / seconds
    } else {
        0.0
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), None) = (args.next().map(PathBuf::from), args.next()) else {
        return Err("usage: profile_io FILE".into());
    };
    let file_bytes = std::fs::metadata(&path)
        .map_err(|error| format!("{}: {error}", path.display()))?
        .len();

    let start = Instant::now();
    let profile = cgx_formats::read_path(&path).map_err(|error| error.to_string())?;
    let read_s = start.elapsed().as_secs_f64();
    let rss_read_kb = status_kb("VmRSS");
    let peak_rss_read_kb = status_kb("VmHWM");

    let start = Instant::now();
    let mut out = BufWriter::with_capacity(
        1 << 18,
        Counting {
            inner: io::sink(),
            bytes: 0,
        },
    );
    cgx_formats::write(
        &profile,
        Format::Callgrind(CallgrindOptions::default()),
        &mut out,
    )
    .map_err(|error| error.to_string())?;
    let counted = out.into_inner().map_err(|error| error.to_string())?;
    let write_s = start.elapsed().as_secs_f64();
    let write_bytes = counted.bytes;
    let peak_rss_kb = status_kb("VmHWM");

    let functions: usize = profile.parts.iter().map(|p| p.function_count()).sum();
    let records: usize = profile
        .parts
        .iter()
        .flat_map(|part| part.functions())
        .map(|(_, records)| records.len())
        .sum();
    let record_bytes: usize = profile.parts.iter().map(|p| p.record_bytes()).sum();
    let ratio = if file_bytes > 0 {
        peak_rss_read_kb as f64 * 1024.0 / file_bytes as f64
    } else {
        0.0
    };
    println!(
        "file_bytes={file_bytes} read_s={read_s:.3} read_mb_s={:.1} \
         write_bytes={write_bytes} write_s={write_s:.3} write_mb_s={:.1} \
         parts={} functions={functions} records={records} record_bytes={record_bytes} \
         names={} rss_read_kb={rss_read_kb} peak_rss_read_kb={peak_rss_read_kb} \
         peak_rss_kb={peak_rss_kb} peak_rss_ratio={ratio:.3}",
        mb_per_s(file_bytes, read_s),
        mb_per_s(write_bytes, write_s),
        profile.parts.len(),
        profile.names.len(),
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("profile_io: {message}");
            ExitCode::FAILURE
        }
    }
}
