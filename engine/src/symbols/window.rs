//! A file read through a window of its bytes, for `object`'s `ReadCache`:
//! the cache reads each symbol name on its own (a seek and a read of 256
//! bytes), tens of thousands for libc; here a seek only moves the position
//! and a read inside the window costs no system call. Reads as large as
//! the window go to the file directly.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

use object::read::ReadCache;

/// The bytes read from the file at a time.
const WINDOW: usize = 64 << 10;

/// A file with the position of the next read and the window last read.
pub(super) struct Window {
    file: File,
    position: u64,
    /// The file's bytes from `start` on.
    bytes: Vec<u8>,
    start: u64,
}

impl Window {
    /// Reads `file` from its start.
    pub fn new(file: File) -> Window {
        Window {
            file,
            position: 0,
            bytes: Vec::new(),
            start: 0,
        }
    }
}

/// `object`'s cache of the ranges read from the file at `path`, read
/// through a window: the parts of a file nothing looks at are not read.
pub(super) fn read_cache(path: &Path) -> std::io::Result<ReadCache<Window>> {
    File::open(path).map(|file| ReadCache::new(Window::new(file)))
}

impl Read for Window {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.len() >= WINDOW {
            let read = self.file.read_at(out, self.position)?;
            self.position += read as u64;
            return Ok(read);
        }
        let inside =
            self.position >= self.start && self.position < self.start + self.bytes.len() as u64;
        if !inside {
            self.bytes.resize(WINDOW, 0);
            let read = self.file.read_at(&mut self.bytes, self.position)?;
            self.bytes.truncate(read);
            self.start = self.position;
        }
        let from = (self.position - self.start) as usize;
        let available = &self.bytes[from.min(self.bytes.len())..];
        let read = available.len().min(out.len());
        out[..read].copy_from_slice(&available[..read]);
        self.position += read as u64;
        Ok(read)
    }
}

impl Seek for Window {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let invalid = || std::io::Error::from(std::io::ErrorKind::InvalidInput);
        self.position = match to {
            SeekFrom::Start(at) => at,
            SeekFrom::End(by) => self
                .file
                .metadata()?
                .len()
                .checked_add_signed(by)
                .ok_or_else(invalid)?,
            SeekFrom::Current(by) => self.position.checked_add_signed(by).ok_or_else(invalid)?,
        };
        Ok(self.position)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn reads_give_the_file_bytes_at_every_position_and_size() {
        let bytes: Vec<u8> = (0..3 * WINDOW + 17).map(|i| (i * 31 % 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let mut window = Window::new(file);
        assert_eq!(window.seek(SeekFrom::End(0)).unwrap(), bytes.len() as u64);
        for (at, size) in [
            (0, 10),
            (5, 256),
            (WINDOW - 3, 256),
            (2 * WINDOW, WINDOW + 5),
            (100, 3),
            (bytes.len() - 4, 256),
        ] {
            window.seek(SeekFrom::Start(at as u64)).unwrap();
            let mut out = vec![0; size];
            let mut filled = 0;
            while filled < size {
                let read = window.read(&mut out[filled..]).unwrap();
                if read == 0 {
                    break;
                }
                filled += read;
            }
            let expected = &bytes[at..(at + size).min(bytes.len())];
            assert_eq!(&out[..filled], expected, "at {at}, {size} bytes");
        }
        window
            .seek(SeekFrom::Start(bytes.len() as u64 + 9))
            .unwrap();
        assert_eq!(window.read(&mut [0; 8]).unwrap(), 0, "past the end");
        assert!(window
            .seek(SeekFrom::Current(-(bytes.len() as i64) - 100))
            .is_err());
    }
}
