//! Code of the region run in this process, for the tests of the rules
//! it follows: a thread's area (its GS base set on the calling thread)
//! and a way to run code with it.

use iced_x86::{Code, Instruction, Register};

use super::area::Area;
use super::encode::encode;

/// A thread's area in this process, its GS base set on the calling
/// thread (tests run it on a thread of their own).
pub(super) struct Running {
    area: *mut u8,
}

/// Bytes of the mapping code runs in.
const CODE_BYTES: usize = 1 << 16;

impl Running {
    /// A new area, the calling thread's GS base.
    pub fn new() -> Running {
        // SAFETY: a private anonymous mapping, unmapped in `drop`.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Area::SIZE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(area, libc::MAP_FAILED);
        // SAFETY: sets this thread's GS base, which Rust code does not use.
        let set = unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1001, area as u64) };
        assert_eq!(set, 0);
        Running { area: area.cast() }
    }

    fn slot(&self, offset: u64) -> *mut u64 {
        // SAFETY: offsets within the area.
        unsafe { self.area.add(offset as usize).cast() }
    }

    /// The word of the area at `offset`.
    pub fn get(&self, offset: u64) -> u64 {
        // SAFETY: an aligned word of the area.
        unsafe { self.slot(offset).read() }
    }

    /// Sets the word of the area at `offset`.
    pub fn set(&self, offset: u64, value: u64) {
        // SAFETY: an aligned word of the area.
        unsafe { self.slot(offset).write(value) }
    }

    /// Runs `code` (then `ret`) with rax `rax`.
    pub fn run(&self, code: &[Instruction], rax: u64) {
        let mut list = vec![Instruction::with2(Code::Mov_r64_imm64, Register::RAX, rax).unwrap()];
        list.extend_from_slice(code);
        list.push(Instruction::with(Code::Retnq));
        self.call(|at, _| encode(&list, at).unwrap().0);
    }

    /// Calls the code `bytes(at, back)` gives, placed at `at`; a jump to
    /// `back` returns. The code must keep every register the ABI asks a
    /// callee to keep.
    pub fn call(&self, bytes: impl FnOnce(u64, u64) -> Vec<u8>) {
        // SAFETY: a private anonymous mapping for the code, unmapped
        // below; a `ret` at its end.
        unsafe {
            let at = libc::mmap(
                std::ptr::null_mut(),
                CODE_BYTES,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(at, libc::MAP_FAILED);
            let back = at as u64 + CODE_BYTES as u64 - 1;
            let bytes = bytes(at as u64, back);
            assert!(bytes.len() < CODE_BYTES);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.cast(), bytes.len());
            (back as *mut u8).write(0xc3);
            let function: extern "C" fn() = std::mem::transmute(at);
            function();
            libc::munmap(at, CODE_BYTES);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.area.cast(), Area::SIZE as usize) };
    }
}
