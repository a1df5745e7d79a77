//! A file read in aligned blocks kept in memory, for `object`'s
//! `ReadCache`: the cache reads each symbol name on its own (a seek and a
//! read of 256 bytes), tens of thousands for libc and hundreds of
//! thousands for a large C++ program, in the order of the symbol table,
//! not of the string table; here a seek only moves the position and a
//! read within a block read before costs no system call, so each block of
//! a string table is read from the file once. Reads of many blocks go to
//! the file directly.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

use object::read::ReadCache;

/// Bytes of a block: the file is read in blocks of this size, aligned.
const BLOCK: u64 = 16 << 10;
/// Reads of at least this many bytes go to the file directly.
const DIRECT: usize = 4 * BLOCK as usize;
/// Most blocks kept (8 MiB); when full, the blocks are dropped.
const KEPT: usize = 512;

/// A file with the position of the next read and the blocks read so far.
pub(super) struct Window {
    file: File,
    position: u64,
    /// The bytes of blocks read, by block number (the last block of the
    /// file is shorter).
    blocks: HashMap<u64, Box<[u8]>>,
}

impl Window {
    /// Reads `file` from its start.
    pub fn new(file: File) -> Window {
        Window {
            file,
            position: 0,
            blocks: HashMap::new(),
        }
    }

    /// Its file, the blocks read dropped.
    pub fn into_file(self) -> File {
        self.file
    }

    /// The bytes of block `number`, read from the file unless kept.
    fn block(&mut self, number: u64) -> std::io::Result<&[u8]> {
        if !self.blocks.contains_key(&number) {
            if self.blocks.len() >= KEPT {
                self.blocks.clear();
            }
            let mut bytes = vec![0; BLOCK as usize];
            let mut filled = 0;
            while filled < bytes.len() {
                let at = number * BLOCK + filled as u64;
                match self.file.read_at(&mut bytes[filled..], at)? {
                    0 => break,
                    read => filled += read,
                }
            }
            bytes.truncate(filled);
            self.blocks.insert(number, bytes.into_boxed_slice());
        }
        Ok(self.blocks.get(&number).map_or(&[], |bytes| &bytes[..]))
    }
}

/// `object`'s cache of the ranges read from the file at `path`, read
/// through blocks: the parts of a file nothing looks at are not read.
pub(super) fn read_cache(path: &Path) -> std::io::Result<ReadCache<Window>> {
    File::open(path).map(|file| ReadCache::new(Window::new(file)))
}

impl Read for Window {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.len() >= DIRECT {
            let read = self.file.read_at(out, self.position)?;
            self.position += read as u64;
            return Ok(read);
        }
        let position = self.position;
        let block = self.block(position / BLOCK)?;
        let from = ((position % BLOCK) as usize).min(block.len());
        let available = &block[from..];
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
        let block = BLOCK as usize;
        let bytes: Vec<u8> = (0..(KEPT + 3) * block + 17)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let mut window = Window::new(file);
        assert_eq!(window.seek(SeekFrom::End(0)).unwrap(), bytes.len() as u64);
        for (at, size) in [
            (0, 10),
            (5, 256),
            (block - 3, 256),
            (2 * block, DIRECT + 5),
            (2 * block - 1, 2 * block + 2),
            (KEPT * block + 1, 256),
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

    #[test]
    fn a_block_is_read_from_the_file_once_and_at_most_kept_blocks_stay() {
        let block = BLOCK as usize;
        let bytes: Vec<u8> = (0..2 * block).map(|i| (i % 253) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let mut window = Window::new(file.try_clone().unwrap());
        let mut out = [0u8; 8];
        window.seek(SeekFrom::Start(3)).unwrap();
        window.read_exact(&mut out).unwrap();
        // The file is emptied: the first block still reads as it was,
        // the second (never read) is gone.
        file.set_len(0).unwrap();
        window.seek(SeekFrom::Start(block as u64 - 8)).unwrap();
        window.read_exact(&mut out).unwrap();
        assert_eq!(out, bytes[block - 8..block]);
        window.seek(SeekFrom::Start(block as u64)).unwrap();
        assert_eq!(window.read(&mut out).unwrap(), 0);
        for number in 0..KEPT as u64 + 5 {
            window.block(number).unwrap();
            assert!(window.blocks.len() <= KEPT, "block {number}");
        }
    }
}
