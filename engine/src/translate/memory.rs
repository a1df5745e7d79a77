//! The memory of a tracee, read and written through `/proc/PID/mem`.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

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

    /// Writes the u64 `value` at `addr`.
    pub fn write_u64(&self, addr: u64, value: u64) -> Result<()> {
        self.write(addr, &value.to_le_bytes())
    }
}
