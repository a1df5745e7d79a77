//! Quiet runs (`RunOptions::quiet_runs`): the runs of a block that keep
//! the thread's context are counted in the tracee, in the record of the
//! block's first run since the context last could have changed, instead
//! of each appending a record.
//!
//! A thread's runs fall into segments: a segment starts at every run
//! that arrives at its block other than by a quiet exit (a call, a
//! return, an indirect jump, an exit the sink does not call quiet, the
//! tracer sending the thread on), and at a quiet exit whose stack pointer
//! differs from the segment's. Within one segment the sink's context
//! stays as it was (the sink says so of each quiet exit,
//! [`crate::EventSink::continues`], when the stack pointer is the one of
//! the segment's first record), so it need not see the runs in order:
//! a block's second and later runs in a segment add one to the run count
//! of its first run's record.
//!
//! The thread's area holds the segment's number (`SEGMENT`, unique in the
//! thread's life: the tracee's own count in `NEXT_SEGMENT`, the tracer's
//! numbers from `EPOCHS`, above all of them) and its stack pointer
//! (`SEGMENT_SP`), and per translation the segment of its last record and
//! that record's address ([`cache_entry`]). Every translation has
//!
//! - its entry ([`entry`]): a new segment (number and stack pointer),
//!   then the record (label `FRESH`);
//!
//! and one of a block quiet exits may lead to (one that starts no
//! function) whose code is not checked at each run also has
//!
//! - its quiet entry, a `jmp` in its header to the quiet path
//!   ([`quiet_path`], after the block's end), where quiet exits lead: in
//!   another segment's stack pointer, to the entry's new segment (label
//!   `BUMP`); in the segment, when the translation's last record is this
//!   segment's, one more run there, else a record (label `FRESH`).
//!
//! Only a block left through quiet exits alone (a conditional or direct
//! jump, or the block-length limit, with no words recorded) counts its
//! runs so ("cached"): the record of a block left otherwise must come
//! right before the next block's, whose arrival the replay computes from
//! it. Tests are `not`/`lea`/`jrcxz`, flags untouched; rax and rcx are
//! saved in the thread's slots, and rcx is the program's again before the
//! record is written (a record store that faults in a guard page restarts
//! the translation at its entry, see `stops`). The tracer starts a new
//! segment whenever it empties or hands off a buffer half (`Area`), so no
//! run is ever counted in a record it has read.

use std::sync::atomic::{AtomicU64, Ordering};

use iced_x86::{Code, Instruction, MemoryOperand, Register};

use super::area::{Area, CURSOR, NEXT_SEGMENT, RECORD, SAVE_RAX, SEGMENT, SEGMENT_SP, TEMP};
use super::emit::Emit;
use super::layout::COUNTERS;
use super::translator::Refusal;

/// Label of the entry's new segment.
pub(super) const BUMP: u64 = 5;
/// Label of the record's writing.
pub(super) const FRESH: u64 = 6;
/// Label of the quiet path.
pub(super) const QUIET: u64 = 7;
/// Label of the quiet path's test of the translation's last segment.
const SAME_STACK: u64 = 8;
/// Label of one more run in the segment's record.
const HIT: u64 = 9;

/// Segment numbers the tracer gives (`Area::start_half`), above every
/// number a tracee counts to.
static EPOCHS: AtomicU64 = AtomicU64::new(1 << 63);

/// A segment number no thread had.
pub(super) fn new_epoch() -> u64 {
    EPOCHS.fetch_add(1, Ordering::Relaxed)
}

/// The offset in a thread's area of translation `id`'s cache entry: the
/// segment of its last record and that record's address (two words).
/// `None` past the entries an area has.
pub(super) fn cache_entry(id: u32) -> Option<u64> {
    (u64::from(id) < COUNTERS).then(|| Area::QUIET_BASE + 16 * u64::from(id))
}

/// How a translation's entry and record look.
#[derive(Clone, Copy, Debug)]
pub(super) struct Record {
    /// The translation.
    pub id: u32,
    /// Bytes of its record.
    pub bytes: u64,
    /// Whether the record's first word after the id counts runs.
    pub runs: bool,
    /// Whether the record's address goes to the `RECORD` slot.
    pub record_slot: bool,
    /// Where its cache entry is, when its runs are counted in the
    /// segment's record ("cached").
    pub cached: Option<u64>,
}

/// rcx = `from` (a register) minus the slot at `offset`, flags untouched
/// (`not`, `lea`): zero when they are equal.
fn rcx_minus_slot(code: &mut Emit, from: Register, offset: u64) -> Result<(), Refusal> {
    let rcx = Register::RCX;
    code.load(rcx, offset)?;
    code.push(Instruction::with1(Code::Not_rm64, rcx))?;
    let sum = MemoryOperand::new(from, rcx, 1, 1, 1, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, rcx, sum))
}

/// The entry: rax and rcx saved, a new segment (label [`BUMP`]), rcx
/// back, then (label [`FRESH`]) the record appended at the cursor (id,
/// [runs 1], the stack pointer last, as `prologue` writes it), its address
/// in the `RECORD` slot and the cache entry when asked, rax back.
pub(super) fn entry(record: Record) -> Result<Vec<Instruction>, Refusal> {
    let (rax, rcx, rsp) = (Register::RAX, Register::RCX, Register::RSP);
    let mut code = Emit::default();
    code.save(SAVE_RAX, rax)?;
    code.save(TEMP, rcx)?;
    code.load(rax, NEXT_SEGMENT)?;
    code.label(BUMP);
    code.lea(rax, rax, 1)?;
    code.save(NEXT_SEGMENT, rax)?;
    code.save(SEGMENT, rax)?;
    code.save(SEGMENT_SP, rsp)?;
    code.load(rcx, TEMP)?;
    code.load(rax, CURSOR)?;
    code.label(FRESH);
    let size = record.bytes as i64;
    let word = |at: i64| MemoryOperand::with_base_displ(rax, at);
    let id = record.id as i32;
    code.push(Instruction::with2(Code::Mov_rm64_imm32, word(0), id))?;
    if record.runs {
        code.push(Instruction::with2(Code::Mov_rm64_imm32, word(8), 1))?;
    }
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(size - 8), rsp))?;
    if record.record_slot {
        code.save(RECORD, rax)?;
    }
    if let Some(at) = record.cached {
        code.save(TEMP, rcx)?;
        code.load(rcx, SEGMENT)?;
        code.save(at, rcx)?;
        code.save(at + 8, rax)?;
        code.load(rcx, TEMP)?;
    }
    code.lea(rax, rax, size)?;
    code.save(CURSOR, rax)?;
    code.load(rax, SAVE_RAX)?;
    Ok(code.list)
}

/// The quiet path (label [`QUIET`]), after the block's end, ending in
/// jumps to [`BUMP`], [`FRESH`] or the block's first instruction
/// (`body`): rax and rcx saved; unless the stack pointer is the
/// segment's, a new segment; when `cached` (the cache entry's offset)
/// and the translation's last record is the segment's, one more run
/// there (its address also to the `RECORD` slot, for a block that loops
/// on itself), rcx and rax back; else rcx back and a record.
pub(super) fn quiet_path(cached: Option<u64>, body: u64) -> Result<Vec<Instruction>, Refusal> {
    let (rax, rcx, rsp) = (Register::RAX, Register::RCX, Register::RSP);
    let mut code = Emit::default();
    code.save(SAVE_RAX, rax)?;
    code.label(QUIET);
    code.save(TEMP, rcx)?;
    // rcx = rsp - the segment's stack pointer
    rcx_minus_slot(&mut code, rsp, SEGMENT_SP)?;
    code.jump(Code::Jrcxz_rel8_64, SAME_STACK)?;
    code.jump(Code::Jmp_rel32_64, BUMP)?;
    let Some(at) = cached else {
        code.load(rcx, TEMP)?;
        code.label(SAME_STACK);
        code.jump(Code::Jmp_rel32_64, FRESH)?;
        return Ok(code.list);
    };
    // rcx = the segment of the translation's last record - the segment
    code.load(rax, at)?;
    code.label(SAME_STACK);
    rcx_minus_slot(&mut code, rax, SEGMENT)?;
    code.jump(Code::Jrcxz_rel8_64, HIT)?;
    code.load(rcx, TEMP)?;
    code.jump(Code::Jmp_rel32_64, FRESH)?;
    code.load(rax, at + 8)?;
    code.label(HIT);
    code.save(RECORD, rax)?;
    let runs = MemoryOperand::with_base_displ(rax, 8);
    code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, runs))?;
    code.lea(rcx, rcx, 1)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, runs, rcx))?;
    code.load(rcx, TEMP)?;
    code.load(rax, SAVE_RAX)?;
    code.jump(Code::Jmp_rel32_64, body)?;
    Ok(code.list)
}
