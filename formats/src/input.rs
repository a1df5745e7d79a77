//! Opening profiles: plain or gzip-compressed, read line by line.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::bufread::MultiGzDecoder;

const BUFFER_SIZE: usize = 1 << 18;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Reads lines of a profile, decompressing it if it starts with the gzip magic.
pub struct LineReader {
    inner: Box<dyn BufRead>,
    line_number: u64,
}

impl LineReader {
    /// Opens the file at `path`.
    pub fn open(path: &Path) -> io::Result<LineReader> {
        LineReader::new(File::open(path)?)
    }

    /// Reads from `input`.
    pub fn new(input: impl Read + 'static) -> io::Result<LineReader> {
        let mut buffered = BufReader::with_capacity(BUFFER_SIZE, input);
        let inner: Box<dyn BufRead> = if buffered.fill_buf()?.starts_with(&GZIP_MAGIC) {
            Box::new(BufReader::with_capacity(
                BUFFER_SIZE,
                MultiGzDecoder::new(buffered),
            ))
        } else {
            Box::new(buffered)
        };
        Ok(LineReader {
            inner,
            line_number: 0,
        })
    }

    /// Reads the next line into `line` without its line ending. Returns false at the
    /// end of the input.
    pub fn next_line(&mut self, line: &mut Vec<u8>) -> io::Result<bool> {
        line.clear();
        if self.inner.read_until(b'\n', line)? == 0 {
            return Ok(false);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        self.line_number += 1;
        Ok(true)
    }

    /// The 1-based number of the line last read.
    pub fn line_number(&self) -> u64 {
        self.line_number
    }
}
