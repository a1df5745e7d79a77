//! Writes to the code cache held back while a stop translates ahead, and
//! then made in few system calls: the new translations, laid out one
//! after the other in a region, in one write, then the other writes
//! (links from older translations, indirect-branch table entries) in the
//! order they came, in as few calls as `Memory::write_in_order` can. So no other thread, running on meanwhile, can reach new
//! code before it is complete.

use crate::error::Result;

use super::memory::Memory;

/// The most bytes of padding between two translations (their entries
/// are 16-byte aligned). The padding was never written: it is zero, as
/// the region was mapped.
const MAX_GAP: u64 = 15;

/// Writes not yet made.
#[derive(Debug, Default)]
pub(super) struct Writes {
    /// Where `code` goes.
    at: u64,
    /// New code, with the padding between translations.
    code: Vec<u8>,
    /// Other writes, made after `code`, in order: each an address and
    /// how many of `later_bytes` it writes (after those of the writes
    /// before it).
    later: Vec<(u64, usize)>,
    /// The bytes of `later`, one write after the other.
    later_bytes: Vec<u8>,
}

impl Writes {
    /// New code at `at`. Code not right after the code held (in another
    /// region) makes the writes held first.
    pub fn code(&mut self, memory: &Memory, at: u64, bytes: &[u8]) -> Result<()> {
        let end = self.end();
        if self.code.is_empty() || at < end || at - end > MAX_GAP {
            self.flush(memory)?;
            self.at = at;
        }
        let gap = (at - self.end()) as usize;
        self.code.resize(self.code.len() + gap, 0);
        self.code.extend_from_slice(bytes);
        Ok(())
    }

    /// A write at `addr` into the code held or, after it, elsewhere.
    pub fn patch(&mut self, addr: u64, bytes: &[u8]) {
        let inside = addr >= self.at && addr.saturating_add(bytes.len() as u64) <= self.end();
        if inside {
            let offset = (addr - self.at) as usize;
            self.code[offset..offset + bytes.len()].copy_from_slice(bytes);
        } else {
            self.later.push((addr, bytes.len()));
            self.later_bytes.extend_from_slice(bytes);
        }
    }

    /// Makes the writes held: the code, then the others.
    pub fn flush(&mut self, memory: &Memory) -> Result<()> {
        let mut rest = &self.later_bytes[..];
        let code = (!self.code.is_empty()).then_some((self.at, &self.code[..]));
        let writes: Vec<(u64, &[u8])> = code
            .into_iter()
            .chain(self.later.iter().map(|&(addr, len)| {
                let (bytes, after) = rest.split_at(len);
                rest = after;
                (addr, bytes)
            }))
            .collect();
        let made = memory.write_in_order(&writes);
        self.code.clear();
        self.later.clear();
        self.later_bytes.clear();
        made
    }

    /// The end of the code held.
    fn end(&self) -> u64 {
        self.at + self.code.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's memory and a scratch buffer in it (0xaa bytes), to
    /// be read back only through the memory.
    fn scratch() -> (Memory, Box<[u8; 256]>) {
        let memory = Memory::open(std::process::id() as i32).unwrap();
        (memory, Box::new([0xaa; 256]))
    }

    fn read(memory: &Memory, addr: u64, len: usize) -> Vec<u8> {
        let mut bytes = vec![0; len];
        memory.read(addr, &mut bytes).unwrap();
        bytes
    }

    #[test]
    fn code_goes_in_one_run_with_zero_padding_and_patches_land_inside_it() {
        let (memory, buffer) = scratch();
        let base = buffer.as_ptr() as u64;
        let mut writes = Writes::default();
        writes.code(&memory, base, &[1, 2, 3]).unwrap();
        writes.code(&memory, base + 16, &[4, 5]).unwrap();
        writes.patch(base + 1, &[9]);
        assert_eq!(
            read(&memory, base, 3),
            [0xaa; 3],
            "written before the flush"
        );
        writes.flush(&memory).unwrap();
        let mut expected = vec![0u8; 19];
        expected[..3].copy_from_slice(&[1, 9, 3]);
        expected[16..].copy_from_slice(&[4, 5, 0xaa]);
        assert_eq!(read(&memory, base, 19), expected);
    }

    #[test]
    fn writes_outside_the_code_come_after_it_in_order() {
        let (memory, buffer) = scratch();
        let base = buffer.as_ptr() as u64;
        let mut writes = Writes::default();
        writes.code(&memory, base + 64, &[7; 4]).unwrap();
        writes.patch(base, &[1, 1]);
        writes.patch(base + 1, &[2]);
        // Code far from the held code: what is held is written first.
        writes.code(&memory, base + 128, &[8]).unwrap();
        assert_eq!(read(&memory, base, 2), [1, 2]);
        assert_eq!(read(&memory, base + 64, 4), [7; 4]);
        assert_eq!(read(&memory, base + 128, 1), [0xaa]);
        writes.flush(&memory).unwrap();
        assert_eq!(read(&memory, base + 128, 1), [8]);
    }
}
