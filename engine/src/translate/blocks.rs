//! Decoding a block ahead of execution, cut where VEX cuts it for
//! Callgrind (the shared rules of [`crate::flow`]).
//!
//! A block starts at an address control arrives at and takes instructions
//! until one that always ends a block ([`End::ends_block`]) or 60
//! instructions. `loop`/`jrcxz` end the block only when taken (a side
//! exit): such blocks are decoded in full and marked for stepping in this
//! slice.

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpAccess, OpKind, Register};

use crate::flow::{
    client_request_prefix, is_rep_string, End, Flow, CLIENT_REQUEST_LEN, MAX_BLOCK_INSTRUCTIONS,
    MAX_INSTRUCTION_LEN,
};

use super::layout::PAGE;
use super::memory::Memory;
use crate::semantics::Decoded;

/// One instruction of a block.
#[derive(Clone, Debug)]
pub(super) struct Insn {
    /// Its address.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u8,
    /// How it may transfer control.
    pub flow: Flow,
    /// A REP-prefixed string instruction (ends its block).
    pub rep: bool,
    /// The decoded instruction (`None` for the client-request marker).
    pub instruction: Option<Instruction>,
}

impl Insn {
    /// The address after it.
    pub fn next(&self) -> u64 {
        self.addr.wrapping_add(u64::from(self.len))
    }

    /// Whether it is `cpuid` (stepped: the tracer answers it, see
    /// [`crate::cpuid`]).
    pub fn is_cpuid(&self) -> bool {
        self.instruction
            .as_ref()
            .is_some_and(|instruction| instruction.mnemonic() == iced_x86::Mnemonic::Cpuid)
    }

    /// Whether it is `syscall` (a refused one is answered without a step,
    /// see [`crate::refusals`]).
    pub fn is_syscall(&self) -> bool {
        self.instruction
            .as_ref()
            .is_some_and(|instruction| instruction.mnemonic() == iced_x86::Mnemonic::Syscall)
    }

    /// What [`crate::flow::exit`] needs of it.
    pub fn end(&self) -> End {
        End {
            addr: self.addr,
            len: self.len,
            flow: self.flow,
            rep: self.rep,
        }
    }
}

/// A decoded block.
#[derive(Clone, Debug)]
pub(super) struct DecodedBlock {
    /// Its first address.
    pub addr: u64,
    /// Its instructions, at least one.
    pub insns: Vec<Insn>,
}

impl DecodedBlock {
    /// The last instruction.
    pub fn last(&self) -> &Insn {
        // A block has at least one instruction (see `decode`).
        &self.insns[self.insns.len() - 1]
    }

    /// Whether no instruction writes the stack pointer (no push, pop, call,
    /// `enter`/`leave`, nor rsp as a destination): every run of the block
    /// starts with the stack pointer of the run before when it jumps back
    /// to its own start.
    pub fn keeps_stack_pointer(&self) -> bool {
        crate::semantics::with_info_factory(|factory| {
            self.insns.iter().all(|insn| {
                insn.instruction.as_ref().is_some_and(|instruction| {
                    factory
                        .info(instruction)
                        .used_registers()
                        .iter()
                        .all(|used| {
                            used.register().full_register() != Register::RSP
                                || matches!(used.access(), OpAccess::Read | OpAccess::CondRead)
                        })
                })
            })
        })
    }

    /// Whether `other` (the address and decoding of each of its
    /// `other_len` instructions) has the same instructions at the same
    /// addresses, doing the same kinds of things (lengths, control flow,
    /// data accesses): the records of translations of either mean the
    /// same. Immediates and branch targets may differ.
    pub fn same_code<'a>(
        &self,
        other: impl Iterator<Item = (u64, &'a Decoded)>,
        other_len: usize,
    ) -> bool {
        self.insns.len() == other_len
            && self.insns.iter().zip(other).all(|(insn, (addr, decoded))| {
                insn.addr == addr
                    && insn.instruction.as_ref().map(Decoded::of).as_ref() == Some(decoded)
            })
    }

    /// Whether an instruction uses the `gs` segment: a `gs:` operand, the
    /// `gs` selector, or `rdgsbase`/`wrgsbase`/`swapgs`.
    pub fn uses_gs(&self) -> bool {
        self.insns
            .iter()
            .filter_map(|insn| insn.instruction.as_ref())
            .any(|instruction| {
                instruction.segment_prefix() == Register::GS
                    || matches!(
                        instruction.mnemonic(),
                        Mnemonic::Rdgsbase | Mnemonic::Wrgsbase | Mnemonic::Swapgs
                    )
                    || (0..instruction.op_count()).any(|operand| {
                        instruction.op_kind(operand) == OpKind::Register
                            && instruction.op_register(operand) == Register::GS
                    })
            })
    }
}

/// The most bytes a block's decoding reads.
const MAX_BLOCK_BYTES: usize =
    MAX_BLOCK_INSTRUCTIONS as usize * MAX_INSTRUCTION_LEN as usize + CLIENT_REQUEST_LEN as usize;

/// Bytes of a [`CodeWindow`]: from the start of a page, it holds the most
/// bytes a block at any address in that page reads.
const WINDOW: usize = 2 * PAGE as usize;
const _: () = assert!(PAGE as usize + MAX_BLOCK_BYTES <= WINDOW);

/// Windows a [`CodeWindow`] keeps (a stop's blocks are mostly in a few
/// places: a function, the PLT, a callee).
const WINDOWS: usize = 4;

/// The original code of a tracee read two pages at a time, for the blocks
/// one stop decodes (mostly near each other): one read of its memory
/// serves many. Made anew at each stop, so it never holds code older
/// than the stop.
pub(super) struct CodeWindow<'a> {
    memory: &'a Memory,
    /// Up to [`WINDOWS`] windows: an address and as many bytes from it as
    /// were readable, up to [`WINDOW`].
    windows: Vec<(u64, Vec<u8>)>,
    /// The window the next read replaces when all are taken.
    next: usize,
}

impl<'a> CodeWindow<'a> {
    /// No window yet on `memory`.
    pub fn new(memory: &'a Memory) -> CodeWindow<'a> {
        CodeWindow {
            memory,
            windows: Vec::new(),
            next: 0,
        }
    }

    /// Up to `len` bytes at `addr`, fewer where the memory stops being
    /// readable (as [`Memory::read_available`]).
    pub fn read(&mut self, addr: u64, len: usize) -> &[u8] {
        let index = match self
            .windows
            .iter()
            .position(|window| serves(window, addr, len))
        {
            Some(index) => index,
            None => self.fill(addr & !(PAGE - 1)),
        };
        let (start, bytes) = &self.windows[index];
        let Some(offset) = addr
            .checked_sub(*start)
            .and_then(|offset| usize::try_from(offset).ok())
            .filter(|&offset| offset < bytes.len())
        else {
            return &[];
        };
        &bytes[offset..bytes.len().min(offset + len)]
    }

    /// Reads a window at `start`; returns its index.
    fn fill(&mut self, start: u64) -> usize {
        let mut bytes = vec![0; WINDOW];
        let got = self.memory.read_available(start, &mut bytes);
        bytes.truncate(got);
        if self.windows.len() < WINDOWS {
            self.windows.push((start, bytes));
            return self.windows.len() - 1;
        }
        let index = self.next;
        self.next = (index + 1) % WINDOWS;
        self.windows[index] = (start, bytes);
        index
    }
}

/// Whether `window` holds `len` bytes at `addr`, or those up to where the
/// memory stopped being readable.
fn serves((start, bytes): &(u64, Vec<u8>), addr: u64, len: usize) -> bool {
    let Some(offset) = addr.checked_sub(*start) else {
        return false;
    };
    let held = bytes.len() as u64;
    offset < held && (offset + len as u64 <= held || bytes.len() < WINDOW)
}

/// Decodes the block at `addr`; `None` when its first bytes do not decode.
/// A block ends early (before 60 instructions and without a transfer) only
/// where the next bytes do not decode or are not mapped.
pub(super) fn decode(code: &mut CodeWindow, addr: u64) -> Option<DecodedBlock> {
    let limit = MAX_BLOCK_INSTRUCTIONS as usize;
    let bytes = code.read(addr, MAX_BLOCK_BYTES);
    let mut insns = Vec::new();
    let mut offset = 0usize;
    while insns.len() < limit && offset < bytes.len() {
        let at = addr.wrapping_add(offset as u64);
        let rest = &bytes[offset..];
        let insn = if client_request_prefix(rest) == usize::from(CLIENT_REQUEST_LEN) {
            Insn {
                addr: at,
                len: CLIENT_REQUEST_LEN,
                flow: Flow::ClientRequest,
                rep: false,
                instruction: None,
            }
        } else {
            let mut decoder = Decoder::with_ip(64, rest, at, DecoderOptions::NONE);
            let instruction = decoder.decode();
            if instruction.is_invalid() {
                break;
            }
            Insn {
                addr: at,
                len: instruction.len() as u8,
                flow: Flow::of(&instruction),
                rep: is_rep_string(&instruction),
                instruction: Some(instruction),
            }
        };
        offset += usize::from(insn.len);
        let ends = insn.end().ends_block();
        insns.push(insn);
        if ends {
            break;
        }
    }
    (!insns.is_empty()).then_some(DecodedBlock { addr, insns })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages of this process mapped readable and writable, the page
    /// after them unmapped; unmapped when dropped.
    struct Pages(*mut u8);

    impl Pages {
        fn new() -> Pages {
            let size = 3 * PAGE as usize;
            // SAFETY: an anonymous mapping, then the unmapping of its last
            // page; no memory of the program is touched.
            unsafe {
                let at = libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(at, libc::MAP_FAILED);
                let at = at.cast::<u8>();
                assert_eq!(
                    libc::munmap(at.add(2 * PAGE as usize).cast(), PAGE as usize),
                    0
                );
                Pages(at)
            }
        }

        fn addr(&self) -> u64 {
            self.0 as u64
        }
    }

    impl Drop for Pages {
        fn drop(&mut self) {
            // SAFETY: the two pages `new` left mapped.
            unsafe { libc::munmap(self.0.cast(), 2 * PAGE as usize) };
        }
    }

    #[test]
    fn a_window_serves_later_reads_from_one_read_up_to_unmapped_memory() {
        let memory = Memory::open(std::process::id() as i32).unwrap();
        let pages = Pages::new();
        let base = pages.addr();
        let pattern: Vec<u8> = (0..2 * PAGE).map(|i| (i % 251) as u8).collect();
        memory.write(base, &pattern).unwrap();
        let mut window = CodeWindow::new(&memory);
        assert_eq!(window.read(base + 100, 16), &pattern[100..116]);
        // Later writes are not seen: the window read both pages at once.
        memory.write(base + 5000, &[0xcc; 8]).unwrap();
        memory.write(base + 100, &[0xcc; 16]).unwrap();
        assert_eq!(window.read(base + 4996, 8), &pattern[4996..5004]);
        // Up to the unmapped page, as a direct read.
        let near_end = base + 2 * PAGE - 10;
        let mut direct = vec![0; MAX_BLOCK_BYTES];
        let got = memory.read_available(near_end, &mut direct);
        assert_eq!(got, 10);
        let mut fresh = CodeWindow::new(&memory);
        assert_eq!(fresh.read(near_end, MAX_BLOCK_BYTES), &direct[..got]);
        assert_eq!(
            window.read(near_end, MAX_BLOCK_BYTES),
            &pattern[pattern.len() - 10..]
        );
        assert!(window.read(base + 2 * PAGE, 4).is_empty());
        // The first window is still there, beside the others.
        assert_eq!(window.read(base + 100, 16), &pattern[100..116]);
    }

    #[test]
    fn code_rewritten_with_other_immediates_is_the_same_code() {
        let memory = Memory::open(std::process::id() as i32).unwrap();
        let pages = Pages::new();
        let base = pages.addr();
        let block = |bytes: &[u8]| {
            memory.write(base, bytes).unwrap();
            decode(&mut CodeWindow::new(&memory), base).expect("a block")
        };
        // mov eax, 5; add [rdi], eax; ret
        let five = block(&[0xb8, 5, 0, 0, 0, 0x01, 0x07, 0xc3]);
        // mov eax, 6: another immediate.
        let six = block(&[0xb8, 6, 0, 0, 0, 0x01, 0x07, 0xc3]);
        // mov eax, 5; mov eax, [rdi]; ret: another access (a load).
        let load = block(&[0xb8, 5, 0, 0, 0, 0x8b, 0x07, 0xc3]);
        // xor eax, eax; add al, 7; ret: other lengths.
        let lengths = block(&[0x31, 0xc0, 0x04, 0x07, 0xc3]);
        let same = |one: &DecodedBlock, other: &DecodedBlock| {
            let kept: Vec<(u64, Decoded)> = other
                .insns
                .iter()
                .map(|insn| (insn.addr, Decoded::of(insn.instruction.as_ref().unwrap())))
                .collect();
            one.same_code(
                kept.iter().map(|(addr, decoded)| (*addr, decoded)),
                kept.len(),
            )
        };
        assert!(same(&five, &six));
        assert!(!same(&five, &load));
        assert!(!same(&five, &lengths));
    }
}
