//! The auxiliary vector a new program finds on its stack: cgx hides the
//! vDSO from it, as Valgrind does.
//!
//! Under Valgrind a program gets no `AT_SYSINFO_EHDR`, so glibc makes real
//! system calls for `clock_gettime`, `gettimeofday`, `time` and `getcpu`
//! instead of calling the vDSO, and the dynamic linker does not set the
//! vDSO up (a few hundred instructions of symbol lookups). Hiding it the
//! same way gives the same instruction counts.

use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

/// The auxiliary vector's end.
const AT_NULL: u64 = 0;
/// An entry to be ignored.
const AT_IGNORE: u64 = 1;
/// The address of the vDSO.
const AT_SYSINFO_EHDR: u64 = 33;
/// Words of the initial stack read (argc, argv, envp, auxv): far more than
/// any real program's, and the read stops at the end of the stack.
const MOST_WORDS: usize = 1 << 16;

/// Turns the `AT_SYSINFO_EHDR` entry of the auxiliary vector of process
/// `pid`, stopped at its first instruction with stack pointer `rsp`, into
/// `AT_IGNORE`. Returns whether there was one.
pub(crate) fn hide_vdso(pid: i32, rsp: u64) -> Result<bool> {
    let memory = crate::ptrace::open_memory(pid, true)?;
    let mut bytes = vec![0u8; MOST_WORDS * 8];
    let mut got = 0;
    while got < bytes.len() {
        match memory.read_at(&mut bytes[got..], rsp + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let words: Vec<u64> = bytes[..got - got % 8]
        .chunks_exact(8)
        .map(|word| u64::from_ne_bytes(word.try_into().unwrap_or_default()))
        .collect();
    let Some(entry) = vdso_entry(&words) else {
        return Ok(false);
    };
    memory
        .write_at(&AT_IGNORE.to_ne_bytes(), rsp + entry as u64 * 8)
        .map_err(|source| Error::Os {
            operation: "write the auxiliary vector",
            source,
        })?;
    Ok(true)
}

/// The index in `stack` (the initial stack from argc on, as words) of the
/// type word of the `AT_SYSINFO_EHDR` entry.
fn vdso_entry(stack: &[u64]) -> Option<usize> {
    let argc = usize::try_from(*stack.first()?).ok()?;
    // argc, argv[0..argc], NULL, then envp up to its NULL.
    let envp = argc.checked_add(2)?;
    let env_end = envp + stack.get(envp..)?.iter().position(|&word| word == 0)?;
    let mut at = env_end + 1;
    while let (Some(&kind), Some(_)) = (stack.get(at), stack.get(at + 1)) {
        match kind {
            AT_NULL => return None,
            AT_SYSINFO_EHDR => return Some(at),
            _ => at += 2,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_vdso_entry_after_arguments_and_environment() {
        let stack = [
            2,
            0x100,
            0x200,
            0, // argc, argv, NULL
            0x300,
            0, // envp, NULL
            6,
            4096, // AT_PAGESZ
            AT_SYSINFO_EHDR,
            0x7fff_0000,
            AT_NULL,
            0,
        ];
        assert_eq!(vdso_entry(&stack), Some(8));
    }

    #[test]
    fn no_entry_without_a_vdso_or_on_a_short_stack() {
        assert_eq!(vdso_entry(&[0, 0, 0, 6, 4096, AT_NULL, 0]), None);
        assert_eq!(vdso_entry(&[5, 1, 2]), None);
        assert_eq!(vdso_entry(&[]), None);
    }
}
