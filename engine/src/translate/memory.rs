//! The memory of a tracee, read and written through `/proc/PID/mem`.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

/// The most writes [`Memory::write_in_order`] makes in one system call
/// (the kernel's `UIO_MAXIOV`).
const WRITES_PER_CALL: usize = 1024;

/// The memory of a tracee (`/proc/PID/mem`, read and write).
pub(super) struct Memory {
    file: File,
    pid: i32,
}

impl Memory {
    /// Opens the memory of `pid`.
    pub fn open(pid: i32) -> Result<Memory> {
        let file = crate::ptrace::open_memory(pid, true)?;
        Ok(Memory { file, pid })
    }

    /// The open `/proc/PID/mem`.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Reads as many bytes at `addr` as are mapped; returns how many.
    pub fn read_available(&self, addr: u64, buffer: &mut [u8]) -> usize {
        crate::ptrace::read_available(&self.file, addr, buffer)
    }

    /// Reads exactly `buffer.len()` bytes at `addr`.
    pub fn read(&self, addr: u64, buffer: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buffer, addr)
            .map_err(|source| Error::Os {
                operation: "read tracee memory",
                source,
            })
    }

    /// [`Memory::read`] of many pages: with `process_vm_readv`, which takes
    /// the tracee's pages in batches (`/proc/PID/mem` looks each one up
    /// alone), or through `/proc/PID/mem` if that fails.
    pub fn read_bulk(&self, addr: u64, buffer: &mut [u8]) -> Result<()> {
        let local = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buffer.len(),
        };
        // SAFETY: `local` describes `buffer`, which is writable for its
        // length; the kernel checks `remote` against the tracee's mappings.
        let got = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if usize::try_from(got).is_ok_and(|got| got == buffer.len()) {
            return Ok(());
        }
        self.read(addr, buffer)
    }

    /// The name a thread about to make the system call of `regs` gives
    /// `execve` ([`crate::ptrace::exec_name`]).
    pub fn exec_name(&self, regs: &crate::ptrace::Regs) -> Option<String> {
        crate::ptrace::exec_name(&self.file, regs)
    }

    /// Reads the u64 at `addr`.
    pub fn read_u64(&self, addr: u64) -> Result<u64> {
        let mut bytes = [0u8; 8];
        self.read(addr, &mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Writes `bytes` at `addr` (also into read-only code: ptrace access).
    pub fn write(&self, addr: u64, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all_at(bytes, addr)
            .map_err(|source| Error::Os {
                operation: "write tracee memory",
                source,
            })
    }

    /// Makes `writes` (each an address and its bytes) in their order, in
    /// few system calls: `process_vm_writev`, up to [`WRITES_PER_CALL`]
    /// writes each, which writes each whole or not at all and stops at
    /// the first it cannot make (memory not writable); that one and those
    /// after it go through `/proc/PID/mem` one at a time.
    pub fn write_in_order(&self, writes: &[(u64, &[u8])]) -> Result<()> {
        for batch in writes.chunks(WRITES_PER_CALL) {
            let local: Vec<libc::iovec> = batch
                .iter()
                .map(|(_, bytes)| libc::iovec {
                    iov_base: bytes.as_ptr().cast_mut().cast(),
                    iov_len: bytes.len(),
                })
                .collect();
            let remote: Vec<libc::iovec> = batch
                .iter()
                .map(|&(addr, bytes)| libc::iovec {
                    iov_base: addr as *mut libc::c_void,
                    iov_len: bytes.len(),
                })
                .collect();
            // SAFETY: `local` describes the slices of `batch`, readable
            // for their lengths (the kernel only reads them); the kernel
            // checks `remote` against the tracee's mappings.
            let written = unsafe {
                libc::process_vm_writev(
                    self.pid,
                    local.as_ptr(),
                    local.len() as libc::c_ulong,
                    remote.as_ptr(),
                    remote.len() as libc::c_ulong,
                    0,
                )
            };
            let mut left = usize::try_from(written).unwrap_or(0);
            let made = batch
                .iter()
                .take_while(|(_, bytes)| match left.checked_sub(bytes.len()) {
                    Some(rest) => {
                        left = rest;
                        true
                    }
                    None => false,
                })
                .count();
            for &(addr, bytes) in &batch[made..] {
                self.write(addr, bytes)?;
            }
        }
        Ok(())
    }

    /// Writes the u64 `value` at `addr`.
    pub fn write_u64(&self, addr: u64, value: u64) -> Result<()> {
        self.write(addr, &value.to_le_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's memory.
    fn own() -> Memory {
        Memory::open(std::process::id() as i32).unwrap()
    }

    #[test]
    fn writes_land_in_their_order_across_batches() {
        let memory = own();
        let buffer = Box::new([0u8; 64]);
        let base = buffer.as_ptr() as u64;
        // More writes than one call makes, to the same bytes: the last wins.
        let values: Vec<[u8; 8]> = (0..WRITES_PER_CALL as u64 * 2 + 3)
            .map(|i| i.to_le_bytes())
            .collect();
        let mut writes: Vec<(u64, &[u8])> = values.iter().map(|v| (base, &v[..])).collect();
        writes.push((base + 9, &[7, 7]));
        memory.write_in_order(&writes).unwrap();
        let mut read = [0u8; 11];
        memory.read(base, &mut read).unwrap();
        let last = (WRITES_PER_CALL as u64 * 2 + 2).to_le_bytes();
        assert_eq!(&read[..8], &last);
        assert_eq!(&read[8..], &[0, 7, 7]);
    }

    #[test]
    fn a_write_into_read_only_memory_and_those_after_it_are_made() {
        let memory = own();
        let page = 4096;
        // SAFETY: a fresh private anonymous mapping of two pages, unmapped
        // at the end of the test; nothing else refers to it.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let base = at as u64;
        // SAFETY: the first page of the mapping above.
        assert_eq!(unsafe { libc::mprotect(at, page, libc::PROT_READ) }, 0);
        let writes: [(u64, &[u8]); 3] = [
            (base + page as u64, &[1]),
            (base, &[2, 3]),
            (base + page as u64 + 1, &[4]),
        ];
        memory.write_in_order(&writes).unwrap();
        let mut read = [0u8; 2];
        memory.read(base, &mut read).unwrap();
        assert_eq!(read, [2, 3]);
        memory.read(base + page as u64, &mut read).unwrap();
        assert_eq!(read, [1, 4]);
        // SAFETY: the mapping above, no longer used.
        assert_eq!(unsafe { libc::munmap(at, 2 * page) }, 0);
    }
}
