//! Data accesses: which loads and stores Valgrind's tools (Cachegrind,
//! Callgrind, Lackey) see for an instruction, and their addresses in a step.
//!
//! Valgrind derives accesses from the instruction's VEX IR: each load is a
//! read, each store a write, and a store right after a load of the same
//! address expression and size by the same instruction becomes one modify
//! (`add [m], r`, `inc [m]`, `cmpxchg [m], r`, `xadd`). An IR compare-and-swap
//! (what VEX makes of lock-prefixed instructions and of `xchg` with memory) is
//! a read and a write of its location, so it merges into a modify too; when
//! VEX loads the old value before the CAS (every locked instruction but
//! `cmpxchg`, `cmpxchg8b`, `cmpxchg16b`) a read comes first. Loads come before
//! stores; `cmps` loads `[rdi]` before `[rsi]`. `lea`, `nop [m]`, `prefetch*`
//! and `clflush*` access nothing. `fxsave`/`fxrstor` are 160 bytes of x87 and
//! control state, the 8 bytes of MXCSR at offset 24 again, then the sixteen
//! XMM registers. The iced-x86 instruction info gives the operands; these
//! rules adapt it to VEX (checked against `lackey --trace-mem=yes`).
//!
//! Not reproduced: VEX drops a load whose value is dead in its block (e.g.
//! `cmp [m], 1` whose flags the next instruction overwrites), and VEX's
//! translations of rare instructions (`xsave`, `bt [m], r` with a register
//! bit offset, gathers, masked moves, `enter`) differ from the operands iced
//! reports.

use iced_x86::{Instruction, InstructionInfoFactory, Mnemonic, OpAccess, Register, UsedMemory};

use crate::event::{AccessKind, DataAccess};

use crate::ptrace::Regs;

/// Accesses at most a template holds in its list (`push [m]`, `movs`,
/// `lock add [m], r`: two).
const MAX_LISTED: usize = 3;

/// One access of an instruction: its operand, size and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Template {
    memory: UsedMemory,
    size: u32,
    kind: AccessKind,
}

/// The data accesses of a decoded instruction, in Valgrind's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Accesses {
    /// Up to [`MAX_LISTED`] accesses.
    List([Option<Template>; MAX_LISTED]),
    /// `fxsave` (writes) or `fxrstor` (reads) of the 512-byte area at
    /// `memory`.
    FxState {
        /// The area.
        memory: UsedMemory,
        /// [`AccessKind::Write`] or [`AccessKind::Read`].
        kind: AccessKind,
    },
}

/// Up to [`MAX_LISTED`] templates in the order pushed (more are left
/// out, as the list would leave them).
#[derive(Default)]
struct Listed {
    templates: [Option<Template>; MAX_LISTED],
    len: usize,
}

impl Listed {
    fn push(&mut self, template: Template) {
        if let Some(slot) = self.templates.get_mut(self.len) {
            *slot = Some(template);
            self.len += 1;
        }
    }

    /// Those pushed (each `Some`).
    fn filled(&mut self) -> &mut [Option<Template>] {
        &mut self.templates[..self.len]
    }
}

impl Accesses {
    /// The accesses of `instruction`, whose information `factory` gives.
    pub fn of(instruction: &Instruction, factory: &mut InstructionInfoFactory) -> Accesses {
        let mnemonic = instruction.mnemonic();
        let mut list = [None; MAX_LISTED];
        if no_access(mnemonic) {
            return Accesses::List(list);
        }
        let info = factory.info(instruction);
        let used = info.used_memory();
        match mnemonic {
            Mnemonic::Fxsave | Mnemonic::Fxsave64 | Mnemonic::Fxrstor | Mnemonic::Fxrstor64
                if !used.is_empty() =>
            {
                let kind = if matches!(mnemonic, Mnemonic::Fxsave | Mnemonic::Fxsave64) {
                    AccessKind::Write
                } else {
                    AccessKind::Read
                };
                return Accesses::FxState {
                    memory: used[0],
                    kind,
                };
            }
            _ => {}
        }
        // A string instruction's operands have the element size; iced says
        // "unknown" for the REP forms.
        let element = instruction.memory_size().size() as u32;
        let locked = instruction.has_lock_prefix() || mnemonic == Mnemonic::Xchg;
        let cas_only = matches!(
            mnemonic,
            Mnemonic::Cmpxchg | Mnemonic::Cmpxchg8b | Mnemonic::Cmpxchg16b
        );
        // Reads first, then writes: no more of either than the list holds.
        let (mut reads, mut writes) = (Listed::default(), Listed::default());
        for memory in used {
            let size = match memory.memory_size().size() as u32 {
                0 => element,
                size => size,
            };
            let template = |kind| Template {
                memory: *memory,
                size,
                kind,
            };
            match memory.access() {
                OpAccess::Read | OpAccess::CondRead => reads.push(template(AccessKind::Read)),
                OpAccess::Write | OpAccess::CondWrite => writes.push(template(AccessKind::Write)),
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                    if locked && !cas_only {
                        reads.push(template(AccessKind::Read));
                    }
                    writes.push(template(AccessKind::Modify));
                }
                _ => {}
            }
        }
        if matches!(
            mnemonic,
            Mnemonic::Cmpsb | Mnemonic::Cmpsw | Mnemonic::Cmpsd | Mnemonic::Cmpsq
        ) {
            // VEX loads [rdi] first; iced lists [rsi] first.
            reads.filled().sort_by_key(|template| {
                template.is_some_and(|template| template.memory.segment() != Register::ES)
            });
        }
        let listed = reads.filled().iter().chain(writes.filled().iter());
        for (slot, template) in list.iter_mut().zip(listed) {
            *slot = *template;
        }
        Accesses::List(list)
    }

    /// No access.
    pub fn none() -> Accesses {
        Accesses::List([None; MAX_LISTED])
    }

    /// The memory operands whose addresses the accesses need, in the
    /// order [`Accesses::for_each`] numbers them: one per listed access
    /// (a read and a modify of one operand are two), one for the
    /// `fxsave`/`fxrstor` area.
    pub fn operands(&self) -> impl Iterator<Item = &UsedMemory> {
        let (list, area) = match self {
            Accesses::List(list) => (&list[..], None),
            Accesses::FxState { memory, .. } => (&[][..], Some(memory)),
        };
        list.iter()
            .map_while(|template| template.as_ref().map(|template| &template.memory))
            .chain(area)
    }

    /// Calls `report` with each access of one execution; `address` gives
    /// the address of operand number `index` of [`Accesses::operands`]
    /// (`None`: unknown, e.g. a vector index, and the access is left out).
    pub fn for_each(
        &self,
        address: impl Fn(usize, &UsedMemory) -> Option<u64>,
        mut report: impl FnMut(DataAccess),
    ) {
        self.templates(|operand, memory, offset, size, kind| {
            if let Some(base) = address(operand, memory) {
                report(DataAccess {
                    addr: base.wrapping_add(offset),
                    size,
                    kind,
                });
            }
        });
    }

    /// Calls `each` with what each access of one execution is made of, in
    /// order: the number of its operand in [`Accesses::operands`], that
    /// operand, the offset of the access from the operand's address, its
    /// size and its kind.
    pub fn templates(&self, mut each: impl FnMut(usize, &UsedMemory, u64, u32, AccessKind)) {
        match self {
            Accesses::List(list) => {
                for (index, template) in list.iter().map_while(|t| t.as_ref()).enumerate() {
                    each(index, &template.memory, 0, template.size, template.kind);
                }
            }
            Accesses::FxState { memory, kind } => {
                each(0, memory, 0, 160, *kind);
                each(0, memory, 24, 8, *kind);
                for register in 0..16 {
                    each(0, memory, 160 + 16 * register, 16, *kind);
                }
            }
        }
    }
}

/// The address of `memory` with the registers `regs`, plus `offset` (the
/// progress of the string pointers in earlier iterations of a step);
/// `None` when it uses a register other than a general-purpose one.
pub(crate) fn address_in(regs: &Regs, memory: &UsedMemory, offset: u64) -> Option<u64> {
    memory
        .virtual_address(0, |register, _, _| value(regs, register))
        .map(|addr| addr.wrapping_add(offset))
}

/// Instructions whose memory operand VEX does not access.
fn no_access(mnemonic: Mnemonic) -> bool {
    matches!(
        mnemonic,
        Mnemonic::Lea
            | Mnemonic::Nop
            | Mnemonic::Prefetch
            | Mnemonic::Prefetchw
            | Mnemonic::Prefetchwt1
            | Mnemonic::Prefetchnta
            | Mnemonic::Prefetcht0
            | Mnemonic::Prefetcht1
            | Mnemonic::Prefetcht2
            | Mnemonic::Clflush
            | Mnemonic::Clflushopt
            | Mnemonic::Clwb
    )
}

/// The value of `register` (a general-purpose register of any width, or a
/// segment register: its base) in `regs`; `None` for other registers.
fn value(regs: &Regs, register: Register) -> Option<u64> {
    Some(match register.full_register() {
        Register::RAX => regs.rax,
        Register::RCX => regs.rcx,
        Register::RDX => regs.rdx,
        Register::RBX => regs.rbx,
        Register::RSP => regs.rsp,
        Register::RBP => regs.rbp,
        Register::RSI => regs.rsi,
        Register::RDI => regs.rdi,
        Register::R8 => regs.r8,
        Register::R9 => regs.r9,
        Register::R10 => regs.r10,
        Register::R11 => regs.r11,
        Register::R12 => regs.r12,
        Register::R13 => regs.r13,
        Register::R14 => regs.r14,
        Register::R15 => regs.r15,
        Register::RIP => regs.rip,
        Register::ES | Register::CS | Register::SS | Register::DS => 0,
        Register::FS => regs.fs_base,
        Register::GS => regs.gs_base,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions};

    use super::*;

    fn accesses(bytes: &[u8], regs: &Regs) -> Vec<DataAccess> {
        let instruction = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE).decode();
        let template = Accesses::of(&instruction, &mut InstructionInfoFactory::new());
        let mut found = Vec::new();
        template.for_each(
            |_, memory| address_in(regs, memory, 0),
            |access| found.push(access),
        );
        found
    }

    fn regs() -> Regs {
        // SAFETY: user_regs_struct is plain data; all zeros is valid.
        let mut regs: Regs = unsafe { std::mem::zeroed() };
        regs.rsp = 0x7000;
        regs.rsi = 0x2000;
        regs.rdi = 0x3000;
        regs.rax = 0x4000;
        regs.fs_base = 0x9000;
        regs
    }

    fn access(addr: u64, size: u32, kind: AccessKind) -> DataAccess {
        DataAccess { addr, size, kind }
    }

    #[test]
    fn a_listing_keeps_the_first_templates_pushed_in_order() {
        let template = |size| Template {
            memory: UsedMemory::default(),
            size,
            kind: AccessKind::Read,
        };
        let mut listed = Listed::default();
        for size in 1..=MAX_LISTED as u32 + 1 {
            listed.push(template(size));
        }
        let sizes: Vec<u32> = listed.filled().iter().flatten().map(|t| t.size).collect();
        assert_eq!(sizes, (1..=MAX_LISTED as u32).collect::<Vec<_>>());
    }

    #[test]
    fn stack_instructions() {
        let regs = regs();
        // push rax; call rel32; pop rbx; ret
        assert_eq!(
            accesses(&[0x50], &regs),
            [access(0x6ff8, 8, AccessKind::Write)]
        );
        assert_eq!(
            accesses(&[0xE8, 0, 0, 0, 0], &regs),
            [access(0x6ff8, 8, AccessKind::Write)]
        );
        assert_eq!(
            accesses(&[0x5B], &regs),
            [access(0x7000, 8, AccessKind::Read)]
        );
        assert_eq!(
            accesses(&[0xC3], &regs),
            [access(0x7000, 8, AccessKind::Read)]
        );
        // call [rax]: the target is loaded before the return address is stored.
        assert_eq!(
            accesses(&[0xFF, 0x10], &regs),
            [
                access(0x4000, 8, AccessKind::Read),
                access(0x6ff8, 8, AccessKind::Write)
            ]
        );
    }

    #[test]
    fn read_modify_write() {
        let regs = regs();
        // inc qword [rax]
        assert_eq!(
            accesses(&[0x48, 0xFF, 0x00], &regs),
            [access(0x4000, 8, AccessKind::Modify)]
        );
        // lock add [rax], rbx: load, then the CAS
        assert_eq!(
            accesses(&[0xF0, 0x48, 0x01, 0x18], &regs),
            [
                access(0x4000, 8, AccessKind::Read),
                access(0x4000, 8, AccessKind::Modify)
            ]
        );
        // lock cmpxchg [rax], rbx: the CAS only
        assert_eq!(
            accesses(&[0xF0, 0x48, 0x0F, 0xB1, 0x18], &regs),
            [access(0x4000, 8, AccessKind::Modify)]
        );
    }

    #[test]
    fn strings_and_segments() {
        let regs = regs();
        // rep movsq: one element per iteration
        assert_eq!(
            accesses(&[0xF3, 0x48, 0xA5], &regs),
            [
                access(0x2000, 8, AccessKind::Read),
                access(0x3000, 8, AccessKind::Write)
            ]
        );
        // cmpsb: [rdi] first
        assert_eq!(
            accesses(&[0xA6], &regs),
            [
                access(0x3000, 1, AccessKind::Read),
                access(0x2000, 1, AccessKind::Read)
            ]
        );
        // mov rax, fs:[8]
        assert_eq!(
            accesses(&[0x64, 0x48, 0x8B, 0x04, 0x25, 8, 0, 0, 0], &regs),
            [access(0x9008, 8, AccessKind::Read)]
        );
        // lea rax, [rax+8]; prefetcht0 [rax]
        assert!(accesses(&[0x48, 0x8D, 0x40, 0x08], &regs).is_empty());
        assert!(accesses(&[0x0F, 0x18, 0x08], &regs).is_empty());
    }
}
