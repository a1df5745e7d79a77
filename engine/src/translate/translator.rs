//! Translation: the instrumented copy of a block, and the shared lookup
//! routine for indirect transfers.
//!
//! A translation is laid out as
//!
//! ```text
//! header:   exit slot 0: int3 x3, jmp rel32 (to the target's translation,
//!                        or to stub 0; the displacement 4-byte aligned)
//!           exit slot 1: int3 x3, jmp rel32
//!           stub 0: int3                (the tracer translates the target and patches slot 0)
//!           stub 1: int3
//!           [system call trap: int3     (a block ending in `syscall`)]
//!           int3 padding to 16 bytes
//!           [fresh entry: jmp rel32     (with quiet runs, see `quiet`)]
//!           [resume entry: jmp rel32    (with quiet runs, see `quiet`)]
//!           [quiet entry: jmp rel32     (with quiet runs, see `quiet`)]
//! entry:    [check: the block's original code compared with the bytes it
//!           was translated from, when they may change unseen; the
//!           stale path at the end when they differ]
//!           prologue: append the record (id, recorded words, rsp) at the
//!           thread's cursor, with rax saved in a slot of the thread's
//!           area (`gs:`-relative, see `area`; mov/lea only: flags
//!           untouched)
//!           the block's instructions (re-encoded, see `encode`:
//!           RIP-relative operands keep their original targets), each
//!           preceded by the code recording its words (`capture`; only
//!           when the run feeds simulations)
//!           the block's end, rewritten (below), leaving through the exit
//!           slots or the lookup routine; a `syscall` between the code
//!           reading the clocks before and after it when the run times
//!           system calls (`timing`)
//! ```
//!
//! Ends: a `jcc` goes to slot 0 (taken) or slot 1; a direct `jmp` to slot
//! 0; a direct `call` pushes the ORIGINAL return address (the program sees
//! its own addresses) and goes to slot 0; an indirect `jmp`/`call` loads
//! its target into rax (saved first) and, for a call, pushes the original
//! return address, then enters the lookup routine; a `ret` pops into rax
//! and enters the lookup routine. A block ending in a REP string
//! instruction runs one iteration per pass, as VEX does: `jrcxz` to slot 0
//! (the next instruction), the string instruction without its prefix,
//! `lea rcx, [rcx-1]`, for REPE/REPNE a `jne`/`je` to slot 0, then slot 1
//! (the REP instruction's own block, so every further iteration appends
//! its own record). Other ends (system call, the 60-instruction limit,
//! `pause`, `clflush`) run natively and go to slot 0, the next
//! instruction. A `syscall` is preceded by a check of its number (the
//! region's filter, see `invalidate`) that jumps to the system call trap
//! for the calls that may change code mappings.
//!
//! With quiet runs (`RunOptions::quiet_runs`) the prologue is `quiet`'s
//! entry and the quiet path follows the block's end (and the repeat
//! path); exits the sink calls quiet lead to their target's quiet entry.
//!
//! A block that jumps back to its own start (a loop of one block, or a
//! REP string instruction's block) and leaves the stack pointer alone
//! counts its runs in its record when the run records no words: the
//! record is (id, runs, rsp), the prologue writes runs = 1 and makes it
//! the area's open record (`RECORD`), and the exit to its own start goes
//! to a repeat path after the block's end that adds one to the open
//! record's runs (mov/lea only) and jumps back to the block's first
//! instruction. So a loop of one block appends one record, not one per
//! iteration; the tracer keeps such a record open across a drain (see
//! `buffer`).
//!
//! The stale path (after the block's end, for a checked translation)
//! restores rax and rcx and executes `int3`: the tracer drops the
//! translation and translates the block anew (`Stub::Stale`). A checked
//! translation's quiet and resume paths start with the same check, so a
//! run counted in its record is checked too; it has no repeat path (a
//! loop of one block records each run).
//!
//! The lookup routine (entered with the target in rax and the program's
//! rax in its slot) saves the flags with `lahf`/`seto`, looks the target up
//! in the two ways of its set of the indirect-branch table (`table`),
//! restores flags and registers and jumps to the translation; on a miss it
//! restores everything and executes `int3` with the target in the `target`
//! slot, for the tracer.

use iced_x86::{Code, Instruction, MemoryOperand, Mnemonic, OpKind, Register};

use crate::flow::{rep_counter_32, rep_while_zero_flag, Flow};
use crate::semantics::Decoded;

use super::area::{
    slot, Area, CURSOR, JUMP, RECORD, RESUME, SAVE_FLAGS, SAVE_RAX, SAVE_RBX, TABLE_BASE, TARGET,
    TEMP,
};
use super::blocks::{DecodedBlock, Insn};
use super::capture::{Capture, Recorder, Sources};
use super::emit::Emit;
use super::filter;
use super::layout::{Layout, COUNTERS};
use super::pending::{self, Counted, RuleEntries};
use super::quiet;
use super::records::RecordEntries;
use super::table;
use super::timing::{self, SystemCallWords};
use crate::event::{Place, Repeat};

/// Why a block is not translated (it is stepped instead).
pub(super) type Refusal = String;

/// The `int3` opcode.
const INT3: u8 = 0xCC;
/// The `jmp rel32` opcode.
const JMP_REL32: u8 = 0xE9;
/// Bytes of an exit slot's `jmp rel32`.
pub(super) const SLOT_LEN: u64 = 5;
/// Bytes each exit slot takes in the header: three `int3`s, then the
/// `jmp rel32`, whose displacement is then 4-byte aligned (a header is
/// 16-byte aligned), so that linking it later is one aligned 4-byte
/// write ([`slot_link`]) that a thread running through it meanwhile sees
/// whole, before or after.
const SLOT_STRIDE: u64 = 8;
/// Where the `jmp rel32` starts in its slot.
const SLOT_JUMP: u64 = SLOT_STRIDE - SLOT_LEN;
/// Labels: fake addresses of instructions of a translation (no copied
/// instruction has them; `encode` resolves branches to instruction
/// addresses).
const REPEAT: u64 = 2;
/// The label of a `syscall` (or of the code timing it) after its number's
/// check.
const SYSCALL: u64 = 1;
const BODY: u64 = 3;
/// The stale path of a translation that checks its code (see [`check`]);
/// the checks of its chunks go on at labels from `CHECKED` at its entry,
/// from `QUIET_CHECKED` on its quiet path and from `RESUME_CHECKED` on its
/// resume path (one each, above the labels of `quiet` and `filter`; a
/// block's bytes make at most 114 pieces).
const STALE: u64 = 4;
const CHECKED: u64 = 0xa00;
const QUIET_CHECKED: u64 = 0xb00;
const RESUME_CHECKED: u64 = 0xc00;

/// One exit of a translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ExitSlot {
    /// Address of its `jmp rel32`.
    pub slot: u64,
    /// Address of its `int3` stub.
    pub stub: u64,
    /// The original address it leads to.
    pub target: u64,
    /// Where it enters its target's translation.
    pub entrance: Entrance,
}

/// Where an exit enters its target's translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Entrance {
    /// Its entry: a new segment of quiet runs when the run counts them.
    Entry,
    /// Its quiet entry when it has one (a run arriving so keeps the
    /// thread's context: `RunOptions::quiet_runs`), else its entry.
    Quiet,
    /// Its resume entry (a record in the segment the call chose, see
    /// `quiet::call_entry`): the exit of a direct call with quiet runs.
    Resume,
}

impl Entrance {
    /// All of them, in the order of their numbers (`as u64`).
    pub const ALL: [Entrance; 3] = [Entrance::Entry, Entrance::Quiet, Entrance::Resume];
}

/// The bytes of a translation, to be written at `at`.
#[derive(Clone, Debug)]
pub(super) struct Emitted {
    /// Where the bytes go.
    pub at: u64,
    /// The header and the body.
    pub bytes: Vec<u8>,
    /// Where execution enters the translation.
    pub entry: u64,
    /// Its exits through slots.
    pub exits: Vec<ExitSlot>,
    /// The `int3` taken before a watched system call (a block ending in
    /// `syscall`).
    pub syscall_trap: Option<u64>,
    /// Where its record holds the time of its `syscall`, when the run
    /// times system calls (`timing`).
    pub system_call: Option<SystemCallWords>,
    /// The `int3`s that stand for its `cpuid`s (see [`Target::cpuid_trap`]).
    pub cpuid_traps: Vec<u64>,
    /// The `int3` taken when its original code changed (see
    /// [`Target::original`]).
    pub stale_trap: Option<u64>,
    /// What the backends know of each of the block's instructions.
    pub decoded: Vec<Decoded>,
    /// Where the replay finds what each instruction did (empty when the
    /// translation records no words, see `capture`).
    pub sources: Vec<Sources>,
    /// Words its record holds besides the id and the stack pointer.
    pub words: usize,
    /// Whether it loops on itself counting its runs in its record (its
    /// first word; see the module documentation).
    pub repeats: bool,
    /// Whether quiet runs are counted in its record of the segment (its
    /// first word, see `quiet`), and how they ran.
    pub counts_runs: Option<Repeat>,
    /// Where quiet exits enter it (a `jmp` in its header to its quiet
    /// path, see `quiet`), when it has a quiet entry.
    pub quiet_entry: Option<u64>,
    /// Whether it counts its runs in the thread's area instead of
    /// appending a record.
    pub counted: bool,
    /// Its safe points besides its entry, ascending: where a signal may
    /// interrupt it (see `signals`). The first ones are those of its
    /// instructions, in order, up to the last one that is copied (a
    /// block's last `jmp`, `call` or `ret` is not).
    pub safe: Vec<u64>,
    /// With a filter, where each of its record paths restarts after its
    /// record store faulted, ascending (`filter`).
    pub filter_paths: Vec<u64>,
}

/// Where the displacement of the slot at `slot` is, and its bytes when
/// the slot jumps to `to`: the write that links (or unlinks) the slot of
/// a translation other threads may be running.
pub(super) fn slot_link(slot: u64, to: u64) -> (u64, [u8; 4]) {
    let rel = to.wrapping_sub(slot + SLOT_LEN) as i64 as i32;
    (slot + 1, rel.to_le_bytes())
}

/// The `jmp rel32` bytes of a slot at `slot` jumping to `to`.
pub(super) fn slot_jump(slot: u64, to: u64) -> [u8; 5] {
    let rel = to.wrapping_sub(slot + SLOT_LEN) as i64 as i32;
    let mut bytes = [JMP_REL32, 0, 0, 0, 0];
    bytes[1..].copy_from_slice(&rel.to_le_bytes());
    bytes
}

/// Whether a `jmp rel32` at `slot` reaches `to`.
pub(super) fn reachable(slot: u64, to: u64) -> bool {
    let rel = to.wrapping_sub(slot + SLOT_LEN) as i64;
    i32::try_from(rel).is_ok()
}

/// Whether `block` can be translated; the reason when not.
pub(super) fn refusal(block: &DecodedBlock) -> Option<Refusal> {
    for insn in &block.insns {
        match insn.flow {
            Flow::SideExit => return Some("loop/jrcxz side exit".into()),
            Flow::ClientRequest => return Some("client request".into()),
            _ => {}
        }
    }
    let last = block.last();
    let instruction = last.instruction.as_ref()?;
    if last.rep && rep_counter_32(instruction) {
        return Some("REP with a 32-bit counter".into());
    }
    let supported = match last.flow {
        Flow::Stop => matches!(instruction.mnemonic(), Mnemonic::Pause | Mnemonic::Clflush),
        Flow::Return => instruction.mnemonic() == Mnemonic::Ret,
        Flow::Call => matches!(instruction.code(), Code::Call_rel32_64 | Code::Call_rm64),
        Flow::Jump { direct: true } => {
            matches!(instruction.code(), Code::Jmp_rel8_64 | Code::Jmp_rel32_64)
        }
        Flow::Jump { direct: false } => instruction.code() == Code::Jmp_rm64,
        _ => true,
    };
    (!supported).then(|| format!("{:?}", instruction.code()))
}

/// Whether `block`'s exits may be quiet (`quiet`): it ends in a
/// conditional or direct jump or at the block-length limit, not in a REP
/// string instruction.
pub(super) fn may_leave_quietly(block: &DecodedBlock) -> bool {
    let last = block.last();
    !last.rep
        && match last.flow {
            Flow::ConditionalJump | Flow::Next => true,
            Flow::Jump { direct: true } => is_direct(last),
            _ => false,
        }
}

/// Whether `block` ends in a direct call.
fn calls_directly(block: &DecodedBlock) -> bool {
    let last = block.last();
    !last.rep && last.flow == Flow::Call && is_direct(last)
}

/// The original targets of the exits through slots of `block`.
pub(super) fn exit_targets(block: &DecodedBlock) -> Vec<u64> {
    let last = block.last();
    let next = last.next();
    let branch_target = || {
        last.instruction
            .as_ref()
            .map_or(next, Instruction::near_branch_target)
    };
    if last.rep {
        return vec![next, last.addr];
    }
    match last.flow {
        Flow::ConditionalJump => vec![branch_target(), next],
        Flow::Jump { direct: true } | Flow::Call if is_direct(last) => vec![branch_target()],
        Flow::Jump { .. } | Flow::Call | Flow::Return => Vec::new(),
        _ => vec![next],
    }
}

fn is_direct(insn: &Insn) -> bool {
    insn.instruction
        .as_ref()
        .is_some_and(|instruction| instruction.op0_kind() == OpKind::NearBranch64)
}

/// A RIP-relative memory operand at absolute address `addr`.
fn rip_relative(addr: u64) -> MemoryOperand {
    MemoryOperand::new(
        Register::RIP,
        Register::None,
        1,
        addr as i64,
        8,
        false,
        Register::None,
    )
}

/// Instruction building, with iced's errors as refusals.
struct Emitter {
    list: Vec<Instruction>,
    /// The instructions where the thread holds no state of the
    /// instrumentation (registers nor slots): the program's instructions
    /// and the first of the repeat path (see [`Emitted::safe`]).
    safe: Vec<usize>,
    /// Whether a `cpuid` of the program becomes an `int3` (see
    /// [`Target::cpuid_trap`]).
    cpuid_trap: bool,
    /// Those `int3`s.
    cpuid_traps: Vec<usize>,
}

impl Emitter {
    fn new() -> Emitter {
        Emitter {
            // Room for a translation of a few instructions.
            list: Vec::with_capacity(128),
            safe: Vec::with_capacity(16),
            cpuid_trap: false,
            cpuid_traps: Vec::new(),
        }
    }

    /// Pushes one of the program's instructions (a safe point); a `cpuid`
    /// as an `int3` when it traps.
    fn program(&mut self, instruction: Instruction) {
        self.safe.push(self.list.len());
        if self.cpuid_trap && instruction.mnemonic() == Mnemonic::Cpuid {
            self.cpuid_traps.push(self.list.len());
            self.list.push(Instruction::with(Code::Int3));
        } else {
            self.list.push(instruction);
        }
    }

    fn push(&mut self, built: Result<Instruction, iced_x86::IcedError>) -> Result<(), Refusal> {
        self.list
            .push(built.map_err(|error| format!("iced: {error}"))?);
        Ok(())
    }

    fn jump(&mut self, code: Code, target: u64) -> Result<(), Refusal> {
        self.push(Instruction::with_branch(code, target))
    }

    /// `mov [TEMP], rax; mov rax, R; push rax; mov rax, [TEMP]`: pushes the
    /// original return address `value`, registers and flags unchanged.
    fn push_value(&mut self, value: u64) -> Result<(), Refusal> {
        if value <= i32::MAX as u64 {
            return self.push(Instruction::with1(Code::Pushq_imm32, value as i32));
        }
        self.push(Instruction::with2(
            Code::Mov_rm64_r64,
            slot(TEMP),
            Register::RAX,
        ))?;
        self.push(Instruction::with2(
            Code::Mov_r64_imm64,
            Register::RAX,
            value,
        ))?;
        self.push(Instruction::with1(Code::Push_r64, Register::RAX))?;
        self.push(Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RAX,
            slot(TEMP),
        ))
    }

    /// The repeat path (at label [`REPEAT`]): one more run in the open
    /// record (`RECORD`'s second word), rax and rcx restored and flags
    /// untouched, then the block's first instruction (label [`BODY`]).
    fn repeat_path(&mut self) -> Result<(), Refusal> {
        let (rax, rcx) = (Register::RAX, Register::RCX);
        let runs = MemoryOperand::with_base_displ(rax, 8);
        self.safe.push(self.list.len());
        self.push(Instruction::with2(Code::Mov_rm64_r64, slot(SAVE_RAX), rax))?;
        if let Some(first) = self.list.last_mut() {
            first.set_ip(REPEAT);
        }
        self.push(Instruction::with2(Code::Mov_r64_rm64, rax, slot(RECORD)))?;
        self.push(Instruction::with2(Code::Mov_rm64_r64, slot(TEMP), rcx))?;
        self.add_one(runs, rcx)?;
        self.push(Instruction::with2(Code::Mov_r64_rm64, rcx, slot(TEMP)))?;
        self.push(Instruction::with2(Code::Mov_r64_rm64, rax, slot(SAVE_RAX)))?;
        self.jump(Code::Jmp_rel32_64, BODY)
    }

    /// Adds one to the word at `counter` through `scratch` (mov/lea only:
    /// flags untouched).
    fn add_one(&mut self, counter: MemoryOperand, scratch: Register) -> Result<(), Refusal> {
        self.push(Instruction::with2(Code::Mov_r64_rm64, scratch, counter))?;
        self.push(Instruction::with2(
            Code::Lea_r64_m,
            scratch,
            MemoryOperand::with_base_displ(scratch, 1),
        ))?;
        self.push(Instruction::with2(Code::Mov_rm64_r64, counter, scratch))
    }

    /// Saves rax and loads the target operand of indirect `instruction`
    /// into it.
    fn target_to_rax(&mut self, instruction: &Instruction) -> Result<(), Refusal> {
        self.push(Instruction::with2(
            Code::Mov_rm64_r64,
            slot(SAVE_RAX),
            Register::RAX,
        ))?;
        match instruction.op0_kind() {
            OpKind::Register => self.push(Instruction::with2(
                Code::Mov_r64_rm64,
                Register::RAX,
                instruction.op0_register(),
            )),
            OpKind::Memory => {
                let base = instruction.memory_base();
                let operand = MemoryOperand::new(
                    base,
                    instruction.memory_index(),
                    instruction.memory_index_scale(),
                    instruction.memory_displacement64() as i64,
                    if base == Register::RIP {
                        8
                    } else {
                        instruction.memory_displ_size()
                    },
                    false,
                    instruction.segment_prefix(),
                );
                self.push(Instruction::with2(
                    Code::Mov_r64_rm64,
                    Register::RAX,
                    operand,
                ))
            }
            kind => Err(format!("indirect operand {kind:?}")),
        }
    }
}

/// Where a translation goes and what it uses: its region (`layout`, whose
/// system call filter it uses), the region's lookup routine, and what it
/// records. Slots and the record cursor are the running thread's
/// (`area`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Target<'a> {
    /// The region the translation is written to.
    pub layout: &'a Layout,
    /// The region's lookup routine.
    pub lookup: u64,
    /// The region's lookup routine of returns (the return check of quiet
    /// runs first, see `quiet`).
    pub returns: u64,
    /// The region's lookup routine of indirect jumps with quiet runs (to
    /// the target's quiet entry, see `quiet`).
    pub jumps: u64,
    /// The region's lookup routine of indirect calls with quiet runs (to
    /// the target's resume entry, see `quiet`).
    pub calls: u64,
    /// The entries of the region's record routine (see `records`).
    pub records: RecordEntries,
    /// The region's resume routine, where resume paths go on (see
    /// `pending`).
    pub resume: u64,
    /// Its entries where quiet paths go on.
    pub rules: RuleEntries,
    /// Whether and how it records what its executions did.
    pub capture: Capture,
    /// Whether a `cpuid` traps, for the tracer to answer as Valgrind's
    /// processor (else it runs as it is).
    pub cpuid_trap: bool,
    /// The block's bytes as they were decoded, when they may change with
    /// no system call the tracer watches (code in writable memory, as
    /// JITs write it): the translation then compares the original code
    /// with them at each entry and traps when they differ, before doing
    /// anything else (see [`check`]), as Valgrind's `--smc-check` does.
    pub original: Option<&'a [u8]>,
    /// With `RunOptions::quiet_runs`: which of its exits are quiet and
    /// where the block is for the sink's rules of contexts (see `quiet`).
    pub quiet: Option<Quiet<'a>>,
    /// With a filter, the region's routines its record paths go on in
    /// (`filter`).
    pub filter_routines: Option<filter::Routines>,
}

/// A translation's part in quiet runs (`quiet`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Quiet<'a> {
    /// For each exit through a slot (in the order of [`exit_targets`]),
    /// whether it is quiet: a run arriving through it keeps the thread's
    /// context (`EventSink::place`).
    pub exits: &'a [bool],
    /// Where the block is for the sink's rules of contexts: when it starts
    /// no function, quiet exits and indirect jumps may lead to it, and it
    /// has a quiet entry (whose path, as the resume path, checks its code
    /// first when it may change unseen).
    pub place: Option<Place>,
    /// Whether the block is a stub the sink does not skip whose jump
    /// through a slot the sink takes for a call (`cache`): it chooses its
    /// target's segment as a PLT stub's does, and counts as a tail jump
    /// ([`Counted::Tail`]).
    pub stub_jumps_away: bool,
}

/// Translates `block` as translation number `id` at `at`, in `target`'s
/// region. `linked` gives the entry of an existing translation of an
/// original address (exits to it are linked at once when a `jmp rel32`
/// reaches it).
pub(super) fn translate(
    block: &DecodedBlock,
    id: u32,
    at: u64,
    target: Target<'_>,
    linked: &dyn Fn(u64, Entrance) -> Option<u64>,
) -> Result<Emitted, Refusal> {
    let Target {
        layout,
        lookup,
        returns,
        jumps,
        calls,
        records,
        resume,
        rules,
        capture,
        cpuid_trap,
        original,
        quiet,
        filter_routines,
    } = target;
    let place = quiet.and_then(|quiet| quiet.place);
    // The region quiet exits lead into: none for a block that starts a
    // function.
    let region = place
        .filter(|place| !place.starts_function)
        .map(|place| place.region);
    // A translation that checks its code checks it on its quiet path too.
    let quiet_entry = region.is_some();
    if let Some(refusal) = refusal(block) {
        return Err(refusal);
    }
    let targets = exit_targets(block);
    let count = targets.len() as u64;
    let watches_syscall = !block.last().rep
        && block.last().flow == Flow::SystemCall
        && block
            .last()
            .instruction
            .is_some_and(|instruction| instruction.mnemonic() == Mnemonic::Syscall);
    let stubs_end = count * (SLOT_STRIDE + 1) + u64::from(watches_syscall);
    // With quiet runs, the header ends in the data word and the body,
    // fresh, resume and quiet entries.
    let entries = if quiet.is_some() { quiet::PLACE } else { 0 };
    let header = (stubs_end + entries + 15) & !15;
    let syscall_trap = watches_syscall.then_some(at + count * (SLOT_STRIDE + 1));
    let entry = at + header;
    let quiet_jump = quiet_entry.then_some(entry - quiet::QUIET_ENTRY);
    // A direct call chooses its callee's segment (`quiet::call_entry`).
    let calls_directly = calls_directly(block);
    // A jump into another function chooses its target's segment as a
    // call does, its cache entry that of a call (`quiet::relay_entry`):
    // a PLT stub's, a stub's through a slot to another function (one the
    // sink does not skip, `Quiet::stub_jumps_away`), and a direct one
    // (the sink takes it for a call, `Place::continues_to`) from a
    // function not skipped.
    let jumps_away = quiet
        .filter(|_| !capture.enabled && original.is_none() && !block.last().rep)
        .filter(|_| matches!(block.last().flow, Flow::Jump { .. }))
        .zip(quiet::call_cache(id));
    let relay = jumps_away
        .filter(|(quiet, _)| {
            quiet.place.is_some_and(|place| place.skipped) || quiet.stub_jumps_away
        })
        .filter(|_| block.last().flow == Flow::Jump { direct: false })
        .map(|(_, cache)| cache);
    let tail = jumps_away
        .filter(|(quiet, _)| quiet.place.is_some_and(|place| !place.skipped))
        .filter(|(quiet, _)| quiet.exits == [false] && is_direct(block.last()))
        .filter(|_| targets != [block.addr])
        .map(|(_, cache)| cache);
    let exits: Vec<ExitSlot> = targets
        .iter()
        .enumerate()
        .map(|(index, &target)| ExitSlot {
            slot: at + index as u64 * SLOT_STRIDE + SLOT_JUMP,
            stub: at + count * SLOT_STRIDE + index as u64,
            target,
            entrance: match quiet {
                Some(_) if calls_directly || tail.is_some() => Entrance::Resume,
                Some(quiet) if quiet.exits.get(index) == Some(&true) => Entrance::Quiet,
                _ => Entrance::Entry,
            },
        })
        .collect();
    // A block ending in `syscall` keeps its record: a `fork` splits the
    // replay before its last instruction (see `buffer`); with a filter, a
    // REP block too: its record says whether a pass iterates.
    let filter = capture.filter;
    let filtered_rep = filter.is_some() && block.last().rep;
    let counted = capture.counting && !watches_syscall && !filtered_rep && u64::from(id) < COUNTERS;
    // An exit back to the block's own start (never the fall-through); not
    // when the code is checked (each run checks it).
    let repeat_exit = (!capture.enabled
        && !counted
        && !filtered_rep
        && original.is_none()
        && block.keeps_stack_pointer())
    .then(|| targets.iter().position(|&target| target == block.addr))
    .flatten();
    // Quiet runs counted in the segment's record (`quiet`): a block left
    // through quiet exits alone (a run that counts quiet runs records no
    // words).
    let ends_quietly =
        !exits.is_empty() && exits.iter().all(|exit| exit.entrance == Entrance::Quiet);
    let cached = quiet_entry && ends_quietly;
    // A block left through an indirect jump (not a PLT stub's) whose runs
    // arriving quietly may be counted too (`pending`).
    let dispatches = quiet_entry
        && relay.is_none()
        && !block.last().rep
        && matches!(block.last().flow, Flow::Jump { .. })
        && !is_direct(block.last());
    let slot_of = |index: usize| {
        if repeat_exit == Some(index) {
            return REPEAT;
        }
        exits.get(index).map_or(0, |exit| exit.slot)
    };

    let decoded: Vec<Decoded> = block
        .insns
        .iter()
        .map(|insn| insn.instruction.as_ref().map(Decoded::of))
        .collect::<Option<_>>()
        .ok_or_else(|| "client request".to_string())?;
    let mut recorder = Recorder::new(capture);
    let mut system_call = None;
    let mut code = Emitter::new();
    code.cpuid_trap = cpuid_trap;
    let mut checks = match (filter, filter_routines) {
        (Some(filter), Some(routines)) => {
            Some(filter::Checks::new(filter, capture.fsgsbase, routines))
        }
        (Some(_), None) => return Err("a filter without its routines".into()),
        (None, _) => None,
    };
    let instructions: Vec<(u64, u8)> = block.insns.iter().map(|i| (i.addr, i.len)).collect();
    let fetch_points = filter.map_or_else(Vec::new, |filter| filter.fetch_points(&instructions));
    let fetch_check = |checks: &mut Option<filter::Checks>,
                       list: &mut Vec<Instruction>,
                       at: usize| {
        match (checks.as_mut(), fetch_points.get(at)) {
            (Some(checks), Some(true)) => checks.fetch(list, instructions[at]),
            _ => Ok(()),
        }
    };
    // The scratch registers each instruction's checks need not keep.
    let dead = match checks {
        Some(_) => {
            let instructions: Vec<Option<Instruction>> =
                block.insns.iter().map(|insn| insn.instruction).collect();
            super::dead::dead_before(&instructions)
        }
        None => Vec::new(),
    };
    let (body, last) = block.insns.split_at(block.insns.len() - 1);
    for (index, (insn, decoded)) in body.iter().zip(&decoded).enumerate() {
        let Some(instruction) = insn.instruction else {
            return Err("client request".into());
        };
        if let (Some(checks), Some(&dead)) = (checks.as_mut(), dead.get(index)) {
            checks.before(dead);
        }
        fetch_check(&mut checks, &mut code.list, index)?;
        if let Some(checks) = checks.as_mut() {
            access_checks(checks, &mut code.list, insn.addr, decoded)?;
        }
        recorder.next_instruction();
        recorder.addresses(&mut code.list, &decoded.accesses)?;
        let mut instruction = instruction;
        instruction.set_ip(0);
        code.program(instruction);
        recorder.ran(decoded);
    }
    let last = &last[0];
    let Some(mut instruction) = last.instruction else {
        return Err("client request".into());
    };
    instruction.set_ip(0);
    let next = last.next();
    let last_decoded = decoded.last().ok_or_else(|| "an empty block".to_string())?;
    let last_index = block.insns.len() - 1;
    // With a filter, a block ending in `syscall` writes its record after
    // the filter records of the instructions before it, so that a `fork`
    // splits the replay there (`buffer`).
    let late_record =
        filter.is_some() && !capture.quiet && watches_syscall && repeat_exit.is_none();
    if let (true, Some(checks)) = (late_record, checks.as_mut()) {
        let label = checks.restart_label()?;
        let mut record = prologue(id, &recorder, false)?;
        if let Some(first) = record.first_mut() {
            first.set_ip(label);
        }
        code.list.append(&mut record);
    }
    if let Some(checks) = checks.as_mut() {
        checks.before(super::dead::Scratch::NONE);
    }
    fetch_check(&mut checks, &mut code.list, last_index)?;
    recorder.next_instruction();
    if last.rep {
        if let Some(checks) = checks.as_mut() {
            checks.close(&mut code.list)?;
        }
        recorder.counter(&mut code.list)?;
        recorder.addresses(&mut code.list, &last_decoded.accesses)?;
        let iterating = match checks.as_mut() {
            Some(checks) => {
                // Past the fetch's check the exit may be out of `jrcxz`'s
                // reach: it jumps over a jump to the exit.
                let (zero, iterate) = (checks.label()?, checks.label()?);
                code.jump(Code::Jrcxz_rel8_64, zero)?;
                code.jump(Code::Jmp_rel32_64, iterate)?;
                code.jump(Code::Jmp_rel32_64, slot_of(0))?;
                if let Some(exit) = code.list.last_mut() {
                    exit.set_ip(zero);
                }
                let iterating = (code.list.len(), iterate);
                // Only a pass that iterates accesses memory.
                access_checks(checks, &mut code.list, last.addr, last_decoded)?;
                Some(iterating)
            }
            None => {
                code.jump(Code::Jrcxz_rel8_64, slot_of(0))?;
                None
            }
        };
        let mut once = instruction;
        once.set_has_rep_prefix(false);
        once.set_has_repne_prefix(false);
        code.program(once);
        if let Some((at, label)) = iterating {
            if let Some(first) = code.list.get_mut(at) {
                first.set_ip(label);
            }
        }
        if rep_while_zero_flag(&instruction).is_some() {
            recorder.zero_flag(&mut code.list)?;
        }
        code.push(Instruction::with2(
            Code::Lea_r64_m,
            Register::RCX,
            MemoryOperand::with_base_displ(Register::RCX, -1),
        ))?;
        if let Some(while_zero_flag) = rep_while_zero_flag(&instruction) {
            // REPE goes on while ZF = 1, REPNE while ZF = 0.
            let leave = if while_zero_flag {
                Code::Jne_rel32_64
            } else {
                Code::Je_rel32_64
            };
            code.jump(leave, slot_of(0))?;
        }
        code.jump(Code::Jmp_rel32_64, slot_of(1))?;
    } else {
        if let Some(checks) = checks.as_mut() {
            access_checks(checks, &mut code.list, last.addr, last_decoded)?;
        }
        recorder.addresses(&mut code.list, &last_decoded.accesses)?;
        match last.flow {
            Flow::ConditionalJump => {
                recorder.guard(&mut code.list, instruction.condition_code())?;
                instruction.set_near_branch64(slot_of(0));
                code.program(instruction);
                code.jump(Code::Jmp_rel32_64, slot_of(1))?;
            }
            Flow::Jump { .. } if is_direct(last) => {
                if let Some(cache) = tail {
                    let callee = quiet::Callee {
                        id,
                        cache: Some(cache),
                        target: None,
                    };
                    code.list.append(&mut quiet::relay_entry(callee)?);
                }
                code.jump(Code::Jmp_rel32_64, slot_of(0))?;
            }
            Flow::Call if is_direct(last) => {
                if quiet.is_some() {
                    let callee = quiet::Callee {
                        id,
                        cache: quiet::call_cache(id),
                        target: None,
                    };
                    code.list.append(&mut quiet::call_entry(next, callee)?);
                }
                code.push_value(next)?;
                code.jump(Code::Jmp_rel32_64, slot_of(0))?;
            }
            Flow::Jump { .. } => {
                code.target_to_rax(&instruction)?;
                recorder.target(&mut code.list)?;
                let routine = match (quiet, relay) {
                    (Some(_), Some(cache)) => {
                        let callee = quiet::Callee {
                            id,
                            cache: Some(cache),
                            target: quiet::call_target(id),
                        };
                        code.list.append(&mut quiet::relay_entry(callee)?);
                        calls
                    }
                    (Some(_), None) => jumps,
                    (None, _) => lookup,
                };
                code.jump(Code::Jmp_rel32_64, routine)?;
            }
            Flow::Call => {
                code.target_to_rax(&instruction)?;
                recorder.target(&mut code.list)?;
                let routine = match quiet {
                    Some(_) => {
                        let callee = quiet::Callee {
                            id,
                            cache: quiet::call_cache(id),
                            target: quiet::call_target(id),
                        };
                        code.list.append(&mut quiet::call_entry(next, callee)?);
                        calls
                    }
                    None => lookup,
                };
                code.push_value(next)?;
                code.jump(Code::Jmp_rel32_64, routine)?;
            }
            Flow::Return => {
                code.push(Instruction::with2(
                    Code::Mov_rm64_r64,
                    slot(SAVE_RAX),
                    Register::RAX,
                ))?;
                code.push(Instruction::with1(Code::Pop_r64, Register::RAX))?;
                let extra = if instruction.op_count() > 0 {
                    instruction.immediate16()
                } else {
                    0
                };
                if extra > 0 {
                    code.push(Instruction::with2(
                        Code::Lea_r64_m,
                        Register::RSP,
                        MemoryOperand::with_base_displ(Register::RSP, i64::from(extra)),
                    ))?;
                }
                let routine = if quiet.is_some() { returns } else { lookup };
                code.jump(Code::Jmp_rel32_64, routine)?;
            }
            Flow::SystemCall => {
                let timed = match syscall_trap {
                    Some(_) => recorder.system_call()?,
                    None => None,
                };
                if let Some(trap) = syscall_trap {
                    // rcx and r11 are free (the kernel overwrites them):
                    // trap when the filter has a 1 at the number's low 16
                    // bits (no flag changed: `jrcxz`).
                    code.push(Instruction::with2(
                        Code::Movzx_r32_rm16,
                        Register::ECX,
                        Register::AX,
                    ))?;
                    code.push(Instruction::with2(
                        Code::Lea_r64_m,
                        Register::R11,
                        rip_relative(layout.syscall_filter()),
                    ))?;
                    code.push(Instruction::with2(
                        Code::Movzx_r32_rm8,
                        Register::ECX,
                        MemoryOperand::with_base_index(Register::R11, Register::RCX),
                    ))?;
                    code.jump(Code::Jrcxz_rel8_64, SYSCALL)?;
                    code.jump(Code::Jmp_rel32_64, trap)?;
                    instruction.set_ip(SYSCALL);
                }
                if let Some(words) = &timed {
                    // The clocks right before and right after the call; the
                    // filter's jump lands on the first.
                    let mut before = timing::before(words)?;
                    if let Some(first) = before.first_mut() {
                        first.set_ip(SYSCALL);
                    }
                    instruction.set_ip(0);
                    code.list.append(&mut before);
                }
                // The kernel leaves the address after the `syscall` in rcx:
                // the program sees its original one.
                code.program(instruction);
                if let Some(words) = &timed {
                    code.list.append(&mut timing::after(words)?);
                }
                system_call = timed;
                code.push(Instruction::with2(
                    Code::Lea_r64_m,
                    Register::RCX,
                    MemoryOperand::new(
                        Register::RIP,
                        Register::None,
                        1,
                        next as i64,
                        8,
                        false,
                        Register::None,
                    ),
                ))?;
                code.jump(Code::Jmp_rel32_64, slot_of(0))?;
            }
            _ => {
                code.program(instruction);
                code.jump(Code::Jmp_rel32_64, slot_of(0))?;
            }
        }
    }

    // The filter's record paths, after the body; each access checked is
    // one the plan has, in the same order (`filter`).
    let filter_labels = match checks {
        Some(checks) => {
            let planned = super::plan::plan(&decoded, &recorder.sources)
                .map(|plan| plan.every.accesses.len());
            if planned != Some(checks.accesses()) {
                return Err("filtered accesses the plan does not have".into());
            }
            checks.finish(&mut code.list)?
        }
        None => Vec::new(),
    };
    let repeats = repeat_exit.is_some();
    if repeats || quiet.is_some() {
        if let Some(first) = code.list.first_mut() {
            first.set_ip(BODY);
        }
    }
    if repeats {
        code.repeat_path()?;
    }
    // Which runs its record of a segment counts (`pending`): a block
    // that records no words, in a function not skipped.
    let plain = quiet.is_some()
        && !repeats
        && !counted
        && recorder.words() == 0
        && !block.last().rep
        && place.is_some_and(|place| !place.skipped);
    let has_cache = quiet::call_cache(id).is_some();
    let counts = match block.last().flow {
        _ if cached => Counted::Cached,
        _ if relay.is_some()
            && recorder.words() == 0
            && place.is_some_and(|place| place.skipped) =>
        {
            Counted::Relay
        }
        _ if !plain => Counted::Never,
        _ if ends_quietly => Counted::Callee,
        _ if tail.is_some() || relay.is_some() => Counted::Tail,
        _ if dispatches => Counted::Dispatch,
        Flow::Call if has_cache => Counted::Calls,
        Flow::Return => Counted::Returns,
        _ => Counted::Never,
    };
    // The record counts runs.
    let runs = repeats || counts != Counted::Never;
    let quiet_path = code.list.len();
    if let (true, Some(region)) = (quiet_entry, region) {
        let rules = quiet::Rules {
            entry,
            routine: rules,
        };
        // The quiet path runs before the block's first instruction.
        let instructions = block
            .insns
            .iter()
            .filter_map(|insn| insn.instruction.as_ref());
        let flags = match super::flags::status_flags_dead(instructions) && id <= i32::MAX as u32 {
            true => quiet::Flags::Free,
            false => quiet::Flags::Kept,
        };
        if let Some(bytes) = original {
            code.list
                .append(&mut check(block.addr, bytes, QUIET_CHECKED)?);
        }
        code.list.append(&mut quiet::quiet_path(
            counts, id, region, BODY, rules, flags,
        )?);
    }
    let resume_path = code.list.len();
    if quiet.is_some() {
        if let Some(bytes) = original {
            code.list
                .append(&mut check(block.addr, bytes, RESUME_CHECKED)?);
        }
        let region = place.map(|place| place.region);
        code.list
            .append(&mut quiet::resume_path(region, entry, resume)?);
    }
    let mut list = match original {
        Some(bytes) => check(block.addr, bytes, CHECKED)?,
        None => Vec::new(),
    };
    let record = quiet::Record {
        layout: RecordLayout {
            id,
            bytes: recorder.record_bytes() + 8 * u64::from(runs),
            runs,
            // A filter's records name the record of their run.
            record_slot: recorder.words() > 0 || runs || capture.filter_records(),
        },
        counted: counts,
        // The segment a new one starts is in the block's region.
        region: place.map(|place| place.region),
        entry,
        records,
    };
    list.append(&mut match (counted, quiet.is_some()) {
        (true, _) => counting_prologue(id)?,
        (false, true) => quiet::entry(record)?,
        (false, false) if late_record => Vec::new(),
        (false, false) => prologue(id, &recorder, repeats)?,
    });
    // Where the fresh entry goes on: the record's writing (`quiet`), by
    // the region's record routine or in the translation.
    let write_path = list
        .iter()
        .position(|instruction| instruction.ip() == quiet::WRITE);
    let body = list.len();
    list.append(&mut code.list);
    let stale_at = list.len();
    if original.is_some() {
        list.append(&mut stale_path()?);
    }
    let (encoded, offsets) = super::encode::encode(&list, entry)?;
    let at_offset = |&index: &usize| {
        offsets
            .get(body + index)
            .map(|&offset| entry + u64::from(offset))
    };
    let safe = code.safe.iter().filter_map(at_offset).collect();
    let quiet_path = quiet_jump.and_then(|_| at_offset(&quiet_path));
    let write_path = write_path
        .and_then(|index| offsets.get(index))
        .map(|&offset| entry + u64::from(offset))
        .or_else(|| record.written_by_routine());
    let resume_path = at_offset(&resume_path);
    let cpuid_traps = code.cpuid_traps.iter().filter_map(at_offset).collect();
    let filter_paths = filter_labels
        .iter()
        .map(|&label| super::encode::labelled(&list, &offsets, entry, label, "a filter path"))
        .collect::<Result<Vec<u64>, Refusal>>()?;
    // The stale path's last instruction is its `int3`.
    let stale_trap = match original {
        Some(_) => offsets.last().map(|&offset| entry + u64::from(offset)),
        None => None,
    };
    debug_assert!(original.is_none() || offsets.len() > stale_at);

    let mut bytes = Vec::with_capacity(header as usize + encoded.len());
    for exit in &exits {
        let to = linked(exit.target, exit.entrance)
            .filter(|&entry| reachable(exit.slot, entry))
            .unwrap_or(exit.stub);
        bytes.extend_from_slice(&[INT3; SLOT_JUMP as usize]);
        bytes.extend_from_slice(&slot_jump(exit.slot, to));
    }
    bytes.resize(header as usize, INT3);
    if quiet.is_some() {
        // The place and data words, then the body, fresh, resume and quiet
        // entries: to the entry when the translation has no such path.
        let data = (entry - quiet::DATA - at) as usize;
        bytes[data..data + 8].copy_from_slice(&pending::data_word(counts, id));
        let place = (entry - quiet::PLACE - at) as usize;
        let quiet_region = region
            .filter(|_| quiet_entry)
            .map_or(-1, |region| region as i32);
        bytes[place..place + 4].copy_from_slice(&quiet_region.to_le_bytes());
        let first = entry + offsets.get(body).map_or(0, |&offset| u64::from(offset));
        let body_jump = entry - quiet::BODY_ENTRY;
        let fresh = entry - quiet::FRESH_ENTRY;
        let resume = entry - quiet::RESUME_ENTRY;
        let quiet = entry - quiet::QUIET_ENTRY;
        let paths = [
            (body_jump, Some(first)),
            (fresh, write_path),
            (resume, resume_path),
            (quiet, quiet_path),
        ];
        for (jump, path) in paths {
            let start = (jump - at) as usize;
            let to = slot_jump(jump, path.unwrap_or(entry));
            bytes[start..start + SLOT_LEN as usize].copy_from_slice(&to);
        }
    }
    bytes.extend_from_slice(&encoded);
    Ok(Emitted {
        at,
        bytes,
        entry,
        exits,
        syscall_trap,
        system_call,
        cpuid_traps,
        stale_trap,
        decoded,
        words: recorder.words() + usize::from(runs),
        sources: recorder.sources,
        repeats,
        counts_runs: counts.repeat(),
        counted,
        safe,
        quiet_entry: quiet_jump,
        filter_paths,
    })
}

/// The filter's checks of the data accesses of the instruction at `addr`
/// (`decoded`), in the order its plan has them (`plan`), with its fetch's
/// check just before when it has one (one group, `filter::Checks::close`).
fn access_checks(
    checks: &mut filter::Checks,
    list: &mut Vec<Instruction>,
    addr: u64,
    decoded: &Decoded,
) -> Result<(), Refusal> {
    let mut accesses = Vec::new();
    decoded.accesses.templates(|_, memory, offset, size, kind| {
        accesses.push((*memory, offset, size, kind));
    });
    for (memory, offset, size, kind) in accesses {
        checks.access(list, addr, &memory, offset, size, kind)?;
    }
    checks.close(list)
}

/// The pieces the check of a block's `len` bytes reads: (offset, size)
/// with sizes 8, 4, 2 or 1, covering every byte and none past the end
/// (the last piece may overlap the one before).
fn check_pieces(len: usize) -> Vec<(usize, usize)> {
    let size = match len {
        8.. => 8,
        4..=7 => 4,
        2..=3 => 2,
        _ => 1,
    };
    let mut pieces: Vec<(usize, usize)> = (0..len / size).map(|i| (i * size, size)).collect();
    if !len.is_multiple_of(size) {
        pieces.push((len - size, size));
    }
    pieces
}

/// The check of a translation of code that may change unseen, at its
/// entry and at the start of its quiet and resume paths: compares the
/// original code at `addr` with `bytes`, what the block was decoded from,
/// a piece at a time, and goes to the stale path ([`stale_path`], label
/// [`STALE`]) at the first difference; piece `i` goes on at label
/// `labels + i`. Flags
/// untouched: rax takes the piece and `not`, rcx the expected value plus
/// one, `lea` their sum (zero when equal) and `jrcxz` the test; rax and
/// rcx saved in the thread's slots and restored.
fn check(addr: u64, bytes: &[u8], labels: u64) -> Result<Vec<Instruction>, Refusal> {
    let (rax, rcx) = (Register::RAX, Register::RCX);
    let mut code = Emitter::new();
    code.push(Instruction::with2(Code::Mov_rm64_r64, slot(SAVE_RAX), rax))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, slot(TEMP), rcx))?;
    // Piece `i` goes on at label `labels + i`: the next piece's load, or
    // the restoring of rcx after the last piece.
    let mut next_label = None;
    for (index, (offset, size)) in check_pieces(bytes.len()).into_iter().enumerate() {
        let piece = rip_relative(addr + offset as u64);
        let mut load = match size {
            8 => Instruction::with2(Code::Mov_r64_rm64, rax, piece),
            4 => Instruction::with2(Code::Mov_r32_rm32, Register::EAX, piece),
            2 => Instruction::with2(Code::Movzx_r32_rm16, Register::EAX, piece),
            _ => Instruction::with2(Code::Movzx_r32_rm8, Register::EAX, piece),
        }
        .map_err(|error| format!("iced: {error}"))?;
        if let Some(label) = next_label {
            load.set_ip(label);
        }
        code.list.push(load);
        let mut expected = [0u8; 8];
        expected[..size].copy_from_slice(&bytes[offset..offset + size]);
        let expected = u64::from_le_bytes(expected);
        code.push(Instruction::with1(Code::Not_rm64, rax))?;
        code.push(Instruction::with2(
            Code::Mov_r64_imm64,
            rcx,
            expected.wrapping_add(1),
        ))?;
        code.push(Instruction::with2(
            Code::Lea_r64_m,
            rcx,
            MemoryOperand::with_base_index(rax, rcx),
        ))?;
        let label = labels + index as u64;
        code.jump(Code::Jrcxz_rel8_64, label)?;
        code.jump(Code::Jmp_rel32_64, STALE)?;
        next_label = Some(label);
    }
    let mut restore = Instruction::with2(Code::Mov_r64_rm64, rcx, slot(TEMP))
        .map_err(|error| format!("iced: {error}"))?;
    if let Some(label) = next_label {
        restore.set_ip(label);
    }
    code.list.push(restore);
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, slot(SAVE_RAX)))?;
    Ok(code.list)
}

/// The stale path of a checked translation (label [`STALE`]): rax and
/// rcx restored, then the `int3` that has the tracer translate the
/// block anew.
fn stale_path() -> Result<Vec<Instruction>, Refusal> {
    let mut code = Emitter::new();
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        Register::RCX,
        slot(TEMP),
    ))?;
    code.list[0].set_ip(STALE);
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        Register::RAX,
        slot(SAVE_RAX),
    ))?;
    code.list.push(Instruction::with(Code::Int3));
    Ok(code.list)
}

/// The prologue of translation `id` when it counts its runs: one more in
/// its counter of the thread's area, with rax saved in a data slot
/// (mov/lea only: flags untouched).
fn counting_prologue(id: u32) -> Result<Vec<Instruction>, Refusal> {
    let mut code = Emitter::new();
    let counter = slot(Area::COUNTER_BASE + 8 * u64::from(id));
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        slot(SAVE_RAX),
        Register::RAX,
    ))?;
    code.add_one(counter, Register::RAX)?;
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        Register::RAX,
        slot(SAVE_RAX),
    ))?;
    Ok(code.list)
}

/// The prologue of translation `id`: appends its record (id, the words
/// `recorder` records or with `repeats` the runs, 1, the stack pointer) at
/// the cursor ([`write_record`]), with rax saved in a data slot (mov/lea
/// only: flags untouched).
fn prologue(id: u32, recorder: &Recorder, repeats: bool) -> Result<Vec<Instruction>, Refusal> {
    let mut code = Emit::default();
    let layout = RecordLayout {
        id,
        bytes: recorder.record_bytes() + 8 * u64::from(repeats),
        runs: repeats,
        record_slot: recorder.words() > 0 || repeats,
    };
    code.save(SAVE_RAX, Register::RAX)?;
    write_record(&mut code, layout)?;
    advance_cursor(&mut code, layout.bytes)?;
    code.load(Register::RAX, SAVE_RAX)?;
    Ok(code.list)
}

/// How a translation's record looks.
#[derive(Clone, Copy, Debug)]
pub(super) struct RecordLayout {
    /// The translation.
    pub id: u32,
    /// Bytes of the record.
    pub bytes: u64,
    /// Whether its first word after the id counts runs.
    pub runs: bool,
    /// Whether its address goes to the `RECORD` slot (it records words or
    /// counts runs).
    pub record_slot: bool,
}

/// Writes a record of `layout` at the cursor, with rax saved: its id,
/// [runs 1], the stack pointer to its last word (a record overflowing the
/// buffer faults on one of these stores, before the cursor moves, see
/// `area`); its address in rax, and in the `RECORD` slot when asked.
pub(super) fn write_record(code: &mut Emit, layout: RecordLayout) -> Result<(), Refusal> {
    let (rax, rsp) = (Register::RAX, Register::RSP);
    let word = |at: i64| MemoryOperand::with_base_displ(rax, at);
    code.load(rax, CURSOR)?;
    let id = layout.id as i32;
    code.push(Instruction::with2(Code::Mov_rm64_imm32, word(0), id))?;
    if layout.runs {
        code.push(Instruction::with2(Code::Mov_rm64_imm32, word(8), 1))?;
    }
    let last = layout.bytes as i64 - 8;
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(last), rsp))?;
    if layout.record_slot {
        code.save(RECORD, rax)?;
    }
    Ok(())
}

/// Moves the cursor past the record of `bytes` at rax.
pub(super) fn advance_cursor(code: &mut Emit, bytes: u64) -> Result<(), Refusal> {
    code.lea(Register::RAX, Register::RAX, bytes as i64)?;
    code.save(CURSOR, Register::RAX)
}

/// Which transfers a lookup routine serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Any: it goes on at the target's entry.
    Any,
    /// Returns, with quiet runs: it checks the thread's stack of calls
    /// first and goes on at the target's resume entry when the return
    /// matches a call (`quiet`), else at its entry.
    Returns,
    /// Indirect jumps, with quiet runs: it goes on at the target's quiet
    /// entry (`quiet`).
    Jumps,
    /// Indirect calls, with quiet runs: it goes on at the target's resume
    /// entry (the call chose the callee's segment, `quiet`).
    Calls,
}

/// The lookup routine of `kind`, encoded at `at`; returns its bytes and
/// the address of its miss `int3`.
pub(super) fn lookup_routine(at: u64, kind: Lookup) -> Result<(Vec<u8>, u64), Refusal> {
    /// A label: the fake address of the miss path (no real instruction has
    /// it; `encode` resolves branches to instruction addresses).
    const MISS: u64 = 1;
    /// The check of way 1 of the target's set.
    const WAY_1: u64 = 2;
    /// Where a found entry's translated address (rax) is used.
    const FOUND: u64 = 3;
    let mut code = Emitter::new();
    let rax = Register::RAX;
    let rbx = Register::RBX;
    code.push(Instruction::with2(Code::Mov_rm64_r64, slot(TARGET), rax))?;
    code.list.push(Instruction::with(Code::Lahf));
    code.push(Instruction::with1(Code::Seto_rm8, Register::AL))?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        slot(SAVE_FLAGS),
        rax,
    ))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, slot(SAVE_RBX), rbx))?;
    if kind == Lookup::Returns {
        code.list.append(&mut quiet::return_check()?);
    }
    // rbx = the table's set of the target (`table::set_of`).
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, slot(TARGET)))?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rbx, rax))?;
    code.push(Instruction::with2(
        Code::Shr_rm64_imm8,
        rbx,
        table::MIX_SHIFT,
    ))?;
    code.push(Instruction::with2(Code::Xor_r64_rm64, rbx, rax))?;
    code.push(Instruction::with2(
        Code::And_rm32_imm32,
        Register::EBX,
        (table::SETS - 1) as i32,
    ))?;
    code.push(Instruction::with2(
        Code::Shl_rm64_imm8,
        rbx,
        table::SET_BYTES.trailing_zeros(),
    ))?;
    code.push(Instruction::with2(
        Code::Add_r64_rm64,
        rbx,
        slot(TABLE_BASE),
    ))?;
    // Way 0 here, way 1 out of line.
    code.push(Instruction::with2(
        Code::Cmp_r64_rm64,
        rax,
        MemoryOperand::with_base(rbx),
    ))?;
    code.jump(Code::Jne_rel32_64, WAY_1)?;
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        rax,
        MemoryOperand::with_base_displ(rbx, table::TRANSLATED_AT as i64),
    ))?;
    let found = code.list.len();
    match kind {
        Lookup::Any => {}
        Lookup::Returns => code.push(Instruction::with2(Code::Sub_r64_rm64, rax, slot(RESUME)))?,
        Lookup::Jumps => {
            let quiet_entry = quiet::QUIET_ENTRY as i32;
            code.push(Instruction::with2(Code::Sub_rm64_imm8, rax, quiet_entry))?;
        }
        Lookup::Calls => {
            let resume_entry = quiet::RESUME_ENTRY as i32;
            code.push(Instruction::with2(Code::Sub_rm64_imm8, rax, resume_entry))?;
        }
    }
    code.push(Instruction::with2(Code::Mov_rm64_r64, slot(JUMP), rax))?;
    if kind == Lookup::Jumps {
        code.list.append(&mut pending::jumper_check()?);
    }
    let restore = |code: &mut Emitter, first_ip: u64| -> Result<(), Refusal> {
        code.push(Instruction::with2(Code::Mov_r64_rm64, rbx, slot(SAVE_RBX)))?;
        if let Some(first) = code.list.last_mut() {
            first.set_ip(first_ip);
        }
        code.push(Instruction::with2(
            Code::Mov_r64_rm64,
            rax,
            slot(SAVE_FLAGS),
        ))?;
        code.push(Instruction::with2(Code::Add_rm8_imm8, Register::AL, 0x7f))?;
        code.list.push(Instruction::with(Code::Sahf));
        code.push(Instruction::with2(Code::Mov_r64_rm64, rax, slot(SAVE_RAX)))
    };
    restore(&mut code, 0)?;
    code.push(Instruction::with1(Code::Jmp_rm64, slot(JUMP)))?;
    code.list[found].set_ip(FOUND);
    code.push(Instruction::with2(
        Code::Cmp_r64_rm64,
        rax,
        MemoryOperand::with_base_displ(rbx, table::ENTRY_BYTES as i64),
    ))?;
    if let Some(first) = code.list.last_mut() {
        first.set_ip(WAY_1);
    }
    code.jump(Code::Jne_rel32_64, MISS)?;
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        rax,
        MemoryOperand::with_base_displ(rbx, (table::ENTRY_BYTES + table::TRANSLATED_AT) as i64),
    ))?;
    code.jump(Code::Jmp_rel32_64, FOUND)?;
    restore(&mut code, MISS)?;
    code.list.push(Instruction::with(Code::Int3));
    let (encoded, offsets) = super::encode::encode(&code.list, at)
        .map_err(|error| format!("the lookup routine: {error}"))?;
    let miss = offsets
        .last()
        .map(|&offset| at + u64::from(offset))
        .ok_or_else(|| "encoding the lookup routine: no offsets".to_string())?;
    Ok((encoded, miss))
}

#[cfg(test)]
mod tests {
    use super::super::blocks::{decode, CodeWindow};
    use super::super::memory::Memory;
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    /// Every lookup routine encodes, its miss `int3` inside it; the one
    /// of jumps checks a jumping block's kept run (`pending::jumper_check`).
    #[test]
    fn the_lookup_routines_encode() {
        let at = 0x7f00_0000_1000;
        let mut lengths = Vec::new();
        for kind in [Lookup::Any, Lookup::Returns, Lookup::Jumps, Lookup::Calls] {
            let (bytes, miss) = lookup_routine(at, kind).unwrap();
            assert!((at..at + bytes.len() as u64).contains(&miss), "{kind:?}");
            lengths.push(bytes.len());
        }
        let check: usize = super::super::encode::encode(&pending::jumper_check().unwrap(), at)
            .unwrap()
            .0
            .len();
        assert_eq!(
            lengths[2],
            lengths[0] + 4 + check,
            "jumps: Any's, `sub`, the check"
        );
    }

    /// `add eax, 1; cmp eax, 10; jne` back to itself: a loop of one block.
    static LOOP: [u8; 10] = [0x83, 0xc0, 0x01, 0x83, 0xf8, 0x0a, 0x75, 0xf8, 0x90, 0x90];

    /// The first instructions at the path the `jmp rel32` at `jump` of
    /// `emitted`'s header leads to.
    fn path_after(emitted: &Emitted, jump: u64) -> Vec<Instruction> {
        let at = |addr: u64| (addr - emitted.at) as usize;
        let jmp =
            Decoder::with_ip(64, &emitted.bytes[at(jump)..], jump, DecoderOptions::NONE).decode();
        assert_eq!(jmp.code(), Code::Jmp_rel32_64);
        let path = jmp.near_branch64();
        Decoder::with_ip(64, &emitted.bytes[at(path)..], path, DecoderOptions::NONE)
            .into_iter()
            .take(3)
            .collect()
    }

    /// Translates [`LOOP`] (in this process) with quiet runs, its code
    /// checked when `checked`.
    fn translated_loop(checked: bool) -> (u64, Emitted) {
        let addr = LOOP.as_ptr() as u64;
        let memory = Memory::open(std::process::id() as i32).unwrap();
        let block = decode(&mut CodeWindow::new(&memory), addr).unwrap();
        let len = (block.last().next() - addr) as usize;
        // The translation and the routines it leads to, near the code.
        let at = (addr + (1 << 20)) & !15;
        let routine = at + (1 << 16);
        let layout = Layout {
            base: at + (1 << 20),
        };
        let target = Target {
            layout: &layout,
            lookup: routine,
            returns: routine,
            jumps: routine,
            calls: routine,
            records: RecordEntries {
                bump: routine,
                fresh: routine,
                counted: routine,
                plain: routine,
            },
            resume: routine,
            rules: RuleEntries {
                calling: routine,
                chained: routine,
            },
            capture: Capture::new(false, false, true, Default::default(), None),
            cpuid_trap: false,
            original: checked.then_some(&LOOP[..len]),
            quiet: Some(Quiet {
                exits: &[true, true],
                place: Some(Place {
                    region: 0,
                    starts_function: false,
                    skipped: false,
                }),
                stub_jumps_away: false,
            }),
            filter_routines: None,
        };
        (
            addr,
            translate(&block, 1, at, target, &|_, _| None).unwrap(),
        )
    }

    /// A translation of code that may change has quiet and resume paths
    /// (a run counted in its record), and each starts with the check of
    /// its code, as its entry does: rax and rcx saved, then the first
    /// piece of the original code loaded.
    #[test]
    fn code_that_may_change_is_checked_first_on_the_quiet_and_resume_paths() {
        for checked in [false, true] {
            let (addr, emitted) = translated_loop(checked);
            assert!(emitted.quiet_entry.is_some(), "checked: {checked}");
            for before in [quiet::QUIET_ENTRY, quiet::RESUME_ENTRY] {
                let path = path_after(&emitted, emitted.entry - before);
                let loads_code = path[2].memory_base() == Register::RIP
                    && path[2].memory_displacement64() == addr
                    && path[2].op0_register() == Register::RAX;
                assert_eq!(loads_code, checked, "{before}: {path:?}");
                if checked {
                    assert_eq!(path[0].op1_register(), Register::RAX);
                    assert_eq!(path[1].op1_register(), Register::RCX);
                }
            }
            assert_eq!(emitted.stale_trap.is_some(), checked);
        }
    }

    #[test]
    fn a_slot_is_linked_by_one_aligned_four_byte_write() {
        let at = 0x7f00_0000_1230; // a translation's start: 16-byte aligned
        for index in 0..2u64 {
            let slot = at + index * SLOT_STRIDE + SLOT_JUMP;
            let to = 0x7f00_0040_0000;
            let (displacement_at, bytes) = slot_link(slot, to);
            assert_eq!(displacement_at % 4, 0);
            assert_eq!(displacement_at / 8, (displacement_at + 3) / 8);
            // The same jump as the whole slot's.
            assert_eq!(&slot_jump(slot, to)[1..], &bytes);
            assert!(reachable(slot, to));
        }
    }

    #[test]
    fn the_pieces_of_a_check_cover_every_byte_and_none_past_the_end() {
        let cases: &[(usize, &[(usize, usize)])] = &[
            (1, &[(0, 1)]),
            (2, &[(0, 2)]),
            (3, &[(0, 2), (1, 2)]),
            (5, &[(0, 4), (1, 4)]),
            (8, &[(0, 8)]),
            (13, &[(0, 8), (5, 8)]),
            (24, &[(0, 8), (8, 8), (16, 8)]),
        ];
        for &(len, pieces) in cases {
            assert_eq!(check_pieces(len), pieces, "{len} bytes");
        }
        for len in 1..300 {
            let mut covered = vec![false; len];
            for (offset, size) in check_pieces(len) {
                assert!(offset + size <= len, "{len} bytes: past the end");
                covered[offset..offset + size].fill(true);
            }
            assert!(covered.iter().all(|&byte| byte), "{len} bytes: a gap");
        }
    }

    #[test]
    fn a_check_compares_each_piece_and_leaves_at_the_first_difference() {
        const AT: u64 = 0x7f00_0000_0000;
        let code = AT + 0x10_0000;
        let bytes: Vec<u8> = (0..13).map(|i| 0x90 + i).collect();
        let mut list = check(code, &bytes, CHECKED).unwrap();
        list.push(Instruction::with(Code::Nopd));
        list.append(&mut stale_path().unwrap());
        let (encoded, offsets) = super::super::encode::encode(&list, AT).unwrap();
        let decoded: Vec<Instruction> = Decoder::with_ip(64, &encoded, AT, DecoderOptions::NONE)
            .into_iter()
            .collect();
        let stale = AT + u64::from(offsets[offsets.len() - 3]);
        let continues = AT + u64::from(offsets[offsets.len() - 6]);
        // Each piece: a load of the original code, `not`, the expected
        // value plus one, their sum, `jrcxz` over the `jmp` to the stale
        // path.
        let loads: Vec<(u64, usize)> = decoded
            .iter()
            .filter(|i| i.memory_base() == Register::RIP && i.op0_register() == Register::RAX)
            .map(|i| (i.memory_displacement64() - code, i.memory_size().size()))
            .collect();
        assert_eq!(loads, vec![(0, 8), (5, 8)]);
        let expected: Vec<u64> = decoded
            .iter()
            .filter(|i| i.code() == Code::Mov_r64_imm64)
            .map(Instruction::immediate64)
            .collect();
        let word = |offset: usize| {
            u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap()).wrapping_add(1)
        };
        assert_eq!(expected, vec![word(0), word(5)]);
        let branches: Vec<&Instruction> = decoded
            .iter()
            .filter(|i| matches!(i.code(), Code::Jrcxz_rel8_64 | Code::Jmp_rel32_64))
            .collect();
        assert_eq!(branches.len(), 4);
        for pair in branches.chunks(2) {
            assert_eq!(pair[0].near_branch64(), pair[1].next_ip());
            assert_eq!(pair[1].near_branch64(), stale);
        }
        // After the last piece, rcx and rax are restored and the code goes on.
        assert_eq!(branches[3].next_ip(), continues);
        assert_eq!(decoded.last().map(Instruction::code), Some(Code::Int3));
        // The program's flags are never touched.
        assert!(decoded
            .iter()
            .filter(|i| i.code() != Code::Int3)
            .all(|i| i.rflags_modified() == 0));
    }
}
