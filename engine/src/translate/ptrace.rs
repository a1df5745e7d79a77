//! Thin wrappers over the ptrace requests and the tracee memory accesses the
//! translate backend makes (its own copy: the step backend's are private to
//! it).

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

/// Registers of a stopped thread.
pub(super) type Regs = libc::user_regs_struct;

/// Resumes `tid` until its next stop, delivering `signal` (0: none).
pub(super) fn cont(tid: i32, signal: i32) -> Result<()> {
    // SAFETY: ptrace on a stopped tracee; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0, signal) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_CONT)"));
    }
    Ok(())
}

/// Resumes `tid` for one instruction, delivering `signal` (0: none).
pub(super) fn single_step(tid: i32, signal: i32) -> Result<()> {
    // SAFETY: ptrace on a stopped tracee; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, tid, 0, signal) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_SINGLESTEP)"));
    }
    Ok(())
}

/// The registers of stopped `tid`.
pub(super) fn regs(tid: i32) -> Result<Regs> {
    // SAFETY: user_regs_struct is plain data; ptrace fills it.
    unsafe {
        let mut regs: Regs = std::mem::zeroed();
        if libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut Regs) != 0 {
            return Err(Error::last_os("ptrace(PTRACE_GETREGS)"));
        }
        Ok(regs)
    }
}

/// Sets the registers of stopped `tid`.
pub(super) fn set_regs(tid: i32, regs: &Regs) -> Result<()> {
    // SAFETY: ptrace reads a valid user_regs_struct.
    if unsafe { libc::ptrace(libc::PTRACE_SETREGS, tid, 0, regs as *const Regs) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_SETREGS)"));
    }
    Ok(())
}

/// Sets the ptrace options of stopped `tid`.
pub(super) fn set_options(tid: i32, options: i32) -> Result<()> {
    // SAFETY: ptrace on a stopped tracee; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, tid, 0, options) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_SETOPTIONS)"));
    }
    Ok(())
}

/// What `PTRACE_GETSIGINFO` says of a signal stop.
#[derive(Clone, Copy, Debug)]
pub(super) struct SignalInfo {
    /// `si_addr` (the faulting address of SIGSEGV/SIGBUS).
    pub addr: u64,
}

/// The signal information of a signal-delivery-stop; `None` for a group-stop.
pub(super) fn signal_info(tid: i32) -> Result<Option<SignalInfo>> {
    // SAFETY: siginfo_t is plain data; ptrace fills it.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        if libc::ptrace(
            libc::PTRACE_GETSIGINFO,
            tid,
            0,
            &mut info as *mut libc::siginfo_t,
        ) != 0
        {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EINVAL) {
                return Ok(None);
            }
            return Err(Error::Os {
                operation: "ptrace(PTRACE_GETSIGINFO)",
                source: error,
            });
        }
        Ok(Some(SignalInfo {
            addr: info.si_addr() as u64,
        }))
    }
}

/// `waitpid` on `pid`, retried on EINTR.
pub(super) fn wait(pid: i32) -> Result<i32> {
    crate::launch::wait(pid)
}

/// The memory of a tracee (`/proc/PID/mem`, read and write).
pub(super) struct Memory {
    file: File,
}

impl Memory {
    /// Opens the memory of `pid`.
    pub fn open(pid: i32) -> Result<Memory> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map_err(|source| Error::Os {
                operation: "open /proc/PID/mem",
                source,
            })?;
        Ok(Memory { file })
    }

    /// Reads as many bytes at `addr` as are mapped; returns how many.
    pub fn read_available(&self, addr: u64, buffer: &mut [u8]) -> usize {
        let mut got = 0;
        while got < buffer.len() {
            match self
                .file
                .read_at(&mut buffer[got..], addr.wrapping_add(got as u64))
            {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        got
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
