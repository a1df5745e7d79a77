//! Pending calls (with quiet runs, see `quiet`): a call that repeats an
//! earlier call of the same arc in the same run of the caller's context
//! is counted whole in the records of that earlier call, and writes no
//! record, when nothing in it needs one.
//!
//! A block ending in a call whose cache entry (`quiet::call_cache`)
//! says that the call's last run was made in the thread's segment, and
//! that its return then went on to a block whose record in the segment
//! it kept, counts its run in its record of the segment (found in the
//! table of records) and makes the call pending ([`resume_routine`]'s
//! calling entry): its run kept at the end of the thread's chain of runs
//! in order (`PENDING_CHAIN`, [`CHAIN`] runs at most) and a frame pushed
//! for it (`PENDING_FRAMES`, [`DEPTH`] at most: the call's entry in the
//! stack of calls, its run's place in the chain, and the segment and the
//! record its return is to count in, copied from the cache entry: the
//! calls of a recursion share one cache entry, which each level's call
//! changes). The call goes to the
//! callee's segment of that last run (for an indirect call, when its
//! target is that run's; else to a new segment, where the callee finds no
//! record); there the callee's first block counts its run in its record
//! of that segment, at the chain's end (a block ending in a call makes
//! its own call pending too, nested). A jump into another function (a PLT
//! stub's, or a tail jump, [`Counted::Tail`]) goes on to its target's
//! segment of its last run from the thread's segment (or of an earlier
//! one, from the table of transfers)
//! (`quiet::relay_entry`), where the target's first block counts its run
//! at the chain's end too; so does the block that jumps when it is not
//! already there (its quiet path, [`resume_routine`]'s chained entry).
//! The blocks of the callee that keep the context count theirs as always;
//! a block ending in a call makes a nested call pending as above, and one
//! ending in `ret` counts its run at the chain's end (the chained entry).
//! When the return matches the innermost pending call
//! (`quiet::return_check`: `RETURNED`), the block it goes on to counts
//! its run in the record the call's frame kept ([`resume_routine`]) (a
//! block ending in `ret` or in a jump into another function only while
//! an outer call is pending), and the call is over, counted: the calling
//! block's record says its runs made the call each time (`Repeat::Calls`;
//! a tail jump's, its jump), the sink counts them on the arc of the
//! first, whose callee's records hold the costs of all of them. The runs
//! the call left in the chain, from its calling run on, leave it then
//! (unless the calling run is the first of a callee or of a jump's
//! target, which the run before it needs next: [`FinishedRuns`]), and
//! the returned-to run joins it only when its block ends in `ret` or in a
//! jump into another function; so an outer call pending through many
//! calls does not fill the chain. When the outermost is over, the chain
//! is emptied. So the calling block's record in the segment must be of a
//! run whose call took the same way: a call (or a PLT stub's jump) to
//! another target than its last run's takes that record out of the table
//! of records (or makes the call's next run start no pending call), but
//! an indirect call's run moves, when it can, to a record of the block
//! whose run made the call to that target from the segment before
//! (`quiet::rehome`; an interpreter's dispatch through a table).
//!
//! Anything else that needs a record while a call is pending (a block
//! with no record in the segment, a call that cannot be made pending, a
//! return to elsewhere, a system call, the chain or the frames full)
//! first writes the chain's runs in order ([`write_routine`], each with
//! one run, taken off the record it was counted in), so that the records
//! read in order are those of the calls run plainly: the runs counted
//! elsewhere keep the context of the chain's run before them, and each
//! jump into another function follows the run of the block that made it.
//! So does the tracer at every drain or hand-off of a buffer half
//! ([`settle`]). `RETURNED` is zero whenever `PENDING_DEPTH` is, and so is
//! `CHAIN_END` but for a moment: a block left through an indirect jump
//! ([`Counted::Dispatch`]) counts a run arriving through its quiet entry
//! like a cached block, keeping it in `JUMPER`; when the jump's target
//! does not keep the segment, the run joins the chain (the lookup routine
//! of jumps, [`jumper_check`], or the tracer on a miss, [`jumper_in_order`])
//! and the target's record writes the chain first.
//!
//! A normal return keeps in the call's cache entry the segment and the
//! address of the record it goes on to write ([`resume_routine`],
//! `RETURN_CACHE`), for the next run of the call.
//!
//! A call has two cache entries (`quiet::call_cache`): its last run's
//! and, second, that of its last run from another caller's segment, which
//! a run from yet another segment moves there (`quiet::choose_segment`).
//! A call is made pending from either ([`call_repeats_here`]); from the
//! second, the two swap first, so that the first is always the entry of
//! the thread's segment, as the call's code and its return expect. A
//! function called from two call sites in turn (two segments of its own)
//! so makes its own calls pending from both.

use iced_x86::{Code, Instruction, MemoryOperand, Register};

use crate::error::{Error, Result};
use crate::event::Repeat;

use super::area::{
    slot, Area, BACK, CHAIN, CHAIN_END, CURSOR, DEPTH, FRAME, JUMP, JUMPER, JUMPER_SP,
    PENDING_CHAIN, PENDING_DEPTH, PENDING_FRAMES, PENDING_SLOTS, RECORD, RELAYING, RETURNED,
    RETURN_CACHE, SAVE_RDX, SEGMENT, TEMP, TOP_CALL, WRITE_RDX,
};
use super::emit::Emit;
use super::memory::Memory;
use super::quiet::{runs_index_of, runs_word, RunsWord};
use super::translator::Refusal;

/// Which runs of a translation may be counted in a record of it written
/// before, in the thread's segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Counted {
    /// None: each run writes a record.
    Never,
    /// A block left through quiet exits alone, with a quiet entry: the
    /// runs that arrive through it (`quiet`), and those of a pending call.
    Cached,
    /// A block left through quiet exits alone, with no quiet entry (it
    /// starts a function): the runs of a pending call.
    Callee,
    /// A block ending in a call, with a cache entry for it
    /// (`quiet::call_cache`): the runs that make a call pending, and those
    /// a pending call returns to.
    Calls,
    /// A block ending in `ret`: the runs in a pending call's callee.
    Returns,
    /// A block left through an indirect jump (not a PLT stub's), with a
    /// quiet entry: the runs that arrive through it, kept in `JUMPER` until
    /// the lookup routine of jumps finds whether the jump keeps the
    /// segment (else the run joins the chain, in order, before the
    /// target's record), and those of a pending call.
    Dispatch,
    /// A PLT stub (a block of a function that costs its caller, ending in
    /// an indirect jump), with a cache entry for its jump
    /// (`quiet::relay_entry`): the runs of a pending call's callee.
    Relay,
    /// A block of a function not skipped ending in a direct jump into
    /// another function (a tail call, which the sink takes for a call from
    /// the block), or a stub's jump through a slot to one (in `.plt.got`,
    /// which Callgrind does not skip: `cache::stub_jumps_away`), with a
    /// cache entry for its jump (`quiet::relay_entry`): the runs of a
    /// pending call's callee, each followed by its jump.
    Tail,
}

impl Counted {
    /// How the runs counted in a record of the translation are reported
    /// (`WholeBlock::repeat`); `None` for a record with no count.
    pub fn repeat(self) -> Option<Repeat> {
        match self {
            Counted::Never => None,
            Counted::Cached | Counted::Dispatch => Some(Repeat::Again),
            Counted::Calls | Counted::Tail => Some(Repeat::Calls),
            Counted::Callee | Counted::Returns | Counted::Relay => Some(Repeat::InContext),
        }
    }

    /// Whether a run a pending call returns to may be counted
    /// ([`AfterReturn`]): a block whose successor needs no record right
    /// after its own, or one ending in `ret` or in a jump into another
    /// function while an outer call stays pending (whatever needs a
    /// record next writes the chain first).
    fn after_return(self) -> AfterReturn {
        match self {
            Counted::Cached | Counted::Callee | Counted::Calls => AfterReturn::Yes,
            Counted::Returns | Counted::Tail => AfterReturn::Nested,
            Counted::Never | Counted::Dispatch | Counted::Relay => AfterReturn::No,
        }
    }

    /// Whether the first run of a pending call's callee (or of a jump's
    /// target in it) may be counted, and how ([`AsCallee`]).
    fn as_callee(self) -> AsCallee {
        match self {
            Counted::Never => AsCallee::No,
            Counted::Calls => AsCallee::Calling,
            Counted::Cached
            | Counted::Dispatch
            | Counted::Callee
            | Counted::Returns
            | Counted::Relay
            | Counted::Tail => AsCallee::Yes,
        }
    }
}

/// Whether a run a pending call returns to may be counted (the byte the
/// resume routine reads, [`data_word`]); also whether a normal return to
/// it keeps its record for the call's next run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum AfterReturn {
    /// No: it writes its record.
    No = 0,
    /// Yes.
    Yes = 1,
    /// When the call returning is not the outermost pending call: the
    /// run is kept in the chain (what needs a record next, while the
    /// outer call is pending, writes the chain first).
    Nested = 2,
}

/// Whether the first run of a pending call's callee may be counted (the
/// byte the resume routine reads, [`data_word`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum AsCallee {
    /// No: it writes its record.
    No = 0,
    /// Yes, kept in the chain.
    Yes = 1,
    /// Yes, and its call is made pending too (nested): a block ending in
    /// a call, when the call's cache entry allows.
    Calling = 2,
}

/// The word at `displacement` of the thread's area plus `base` (a
/// register holding an offset in the area).
pub(super) fn area_word(base: Register, displacement: i64) -> MemoryOperand {
    MemoryOperand::new(
        base,
        Register::None,
        1,
        displacement,
        1,
        false,
        Register::GS,
    )
}

/// `mov qword gs:[offset], 0`.
fn clear(code: &mut Emit, offset: u64) -> Result<(), Refusal> {
    code.push(Instruction::with2(Code::Mov_rm64_imm32, slot(offset), 0))
}

/// What the resume routine needs of a translation (`quiet::resume_path`),
/// a word in its header ([`super::quiet::DATA`] bytes before its entry):
/// its number (whose low half is its part of the index in the table of
/// records, `quiet::runs_index_of`), whether a run a pending call returns
/// to may be counted, and whether the first run of a pending call's
/// callee may.
pub(super) fn data_word(counted: Counted, id: u32) -> [u8; 8] {
    let mut word = [0u8; 8];
    word[..4].copy_from_slice(&id.to_le_bytes());
    word[6] = counted.after_return() as u8;
    word[7] = counted.as_callee() as u8;
    word
}

/// Labels of the resume routine.
const NOT_RETURNED: u64 = 1;
const RETURNED_COUNT: u64 = 2;
const NOT_RETURN: u64 = 3;
const DROP_KEPT: u64 = 4;
const TO_BODY: u64 = 5;
const TO_FRESH: u64 = 6;
const PLAIN_FRESH: u64 = 7;
const NOT_RELAYED: u64 = 8;
const RETURNED_FAIL: u64 = 9;
const CALLING: u64 = 10;
const CHAINED: u64 = 11;
const APPEND: u64 = 12;
const AS_CALLEE: u64 = 13;
const OUTERMOST: u64 = 14;
const CALLS_OUTERMOST: u64 = 15;
const MAKE_PENDING: u64 = 16;
const NESTED_CHECKED: u64 = 17;
const MAKE_PENDING_DROPPED: u64 = 18;
const CALLS_POPPED: u64 = 19;
const RETURNED_KEPT: u64 = 20;
/// Labels of the uses of `call_repeats_here`, four each: after a pending
/// call's return, and (plus four times their own label) where a call is
/// made pending.
const REPEATS_RETURNED: u64 = 0x100;
const REPEATS_CALLING: u64 = 0x110;

/// The last place in the chain the resume routine appends at: the
/// chain's last entry is kept for a run in `JUMPER` (the lookup routine
/// of jumps appends it, and the target's record writes the chain at
/// once).
const LAST_APPEND: i32 = (16 * (CHAIN - 2)) as i32;

/// The byte or word at `at` of the data word of the translation whose
/// entry is in rdx.
fn data(at: i64) -> MemoryOperand {
    data_of(Register::RDX, at)
}

/// The byte or word at `at` of the data word ([`data_word`]) of the
/// translation whose entry is in `entry`.
pub(super) fn data_of(entry: Register, at: i64) -> MemoryOperand {
    MemoryOperand::with_base_displ(entry, at - super::quiet::DATA as i64)
}

/// The word at `word` of the innermost pending call's frame, `depth` a
/// register holding the `PENDING_DEPTH` slot (not 0).
pub(super) fn innermost_frame(depth: Register, word: i64) -> MemoryOperand {
    area_word(depth, PENDING_FRAMES as i64 - FRAME as i64 + word)
}

/// Compares the [`AfterReturn`] byte of the translation whose entry is in
/// rdx with [`AfterReturn::Nested`] (equal: a block ending in `ret` or in
/// a jump into another function).
fn cmp_nested(code: &mut Emit) -> Result<(), Refusal> {
    code.push(Instruction::with2(
        Code::Cmp_rm8_imm8,
        data(6),
        AfterReturn::Nested as u8 as i32,
    ))
}

/// The resume routine, encoded at `at`: the rest of every translation's
/// resume path (`quiet::resume_path`: rax in its slot, the region set,
/// the translation's entry in rax; rcx saved first), its flags saved, by
/// what the run arrives from:
///
/// - the innermost pending call's return (`RETURNED`): when the
///   translation allows ([`data_word`]) and the call's frame kept a
///   record of the translation in the thread's segment, the run counted
///   there, the call over (for a block ending in a call, its own call
///   pending when the calling entry's conditions hold);
/// - a normal return (`RETURN_CACHE`): the segment and the address of the
///   record it writes kept in the call's cache entry, when the
///   translation allows and no call is pending;
/// - a jump into another function (`RELAYING`) while a call is pending:
///   when the translation allows and the chain has room, the run counted
///   in its record of the segment (found in the table of records), kept
///   at the chain's end;
/// - the innermost pending call: the same, for its callee's first run;
///
/// and its other entries, for the quiet paths of blocks ending in a call
/// (`calling`: a pending call made, nested in those pending when there is
/// room) or in `ret` or a jump into another function (`chained`: the run
/// counted and kept at the chain's end); then on at the translation's
/// first instruction (its body entry, [`super::quiet::BODY_ENTRY`] bytes
/// before its entry) when the run was counted, else at the writing of its
/// record (its fresh entry), through `write_pending` (the routine writing
/// the pending calls' records first) while a call is pending.
pub(super) fn resume_routine(
    at: u64,
    write_pending: u64,
) -> std::result::Result<RuleRoutine, Refusal> {
    use super::quiet::{BODY_ENTRY, FRESH_ENTRY};
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    let mut code = Emit::default();
    let cmp_zero = |code: &mut Emit, operand: MemoryOperand| {
        code.push(Instruction::with2(Code::Cmp_rm8_imm8, operand, 0))
    };
    let cmp_slot_zero = |code: &mut Emit, offset: u64| {
        code.push(Instruction::with2(Code::Cmp_rm64_imm8, slot(offset), 0))
    };
    let count = |code: &mut Emit| -> std::result::Result<(), Refusal> {
        let runs = MemoryOperand::with_base_displ(rax, 8);
        code.push(Instruction::with1(Code::Inc_rm64, runs))?;
        code.save(RECORD, rax)
    };
    // Each entry: the translation's entry kept, the flags and rdx saved,
    // rdx the entry.
    let enter = |code: &mut Emit| -> std::result::Result<(), Refusal> {
        code.save(super::area::RESUMING, rax)?;
        code.push(Ok::<_, iced_x86::IcedError>(Instruction::with(Code::Lahf)))?;
        code.push(Instruction::with1(Code::Seto_rm8, Register::AL))?;
        code.save(super::area::RESUME_FLAGS, rax)?;
        code.save(SAVE_RDX, rdx)?;
        code.load(rdx, super::area::RESUMING)
    };
    // The resume entry (rax saved, rcx the program's).
    code.save(TEMP, rcx)?;
    enter(&mut code)?;

    // The innermost pending call's return (when the chain has room for
    // the run, kept there while an outer call is pending).
    code.load(rcx, RETURNED)?;
    code.push(Instruction::with2(Code::Test_rm64_r64, rcx, rcx))?;
    code.jump(Code::Je_rel32_64, NOT_RETURNED)?;
    cmp_zero(&mut code, data(6))?;
    code.jump(Code::Je_rel32_64, RETURNED_FAIL)?;
    // A block ending in `ret` or a jump into another function: only
    // while another call stays pending.
    cmp_nested(&mut code)?;
    code.jump(Code::Jne_rel32_64, NESTED_CHECKED)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_imm8,
        slot(PENDING_DEPTH),
        FRAME as i32,
    ))?;
    code.jump(Code::Jbe_rel32_64, RETURNED_FAIL)?;
    code.label(NESTED_CHECKED);
    code.push(Instruction::with2(
        Code::Cmp_rm64_imm32,
        slot(CHAIN_END),
        LAST_APPEND,
    ))?;
    code.jump(Code::Ja_rel32_64, RETURNED_FAIL)?;
    // What the innermost frame says its return counts in.
    code.load(rcx, PENDING_DEPTH)?;
    let kept = |at: i64| innermost_frame(rcx, at);
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, kept(16)))?;
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rax, slot(SEGMENT)))?;
    code.jump(Code::Jne_rel32_64, RETURNED_FAIL)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, kept(24)))?;
    code.push(Instruction::with2(
        Code::Mov_r32_rm32,
        Register::ECX,
        data(0),
    ))?;
    let number = MemoryOperand::with_base(rax);
    code.push(Instruction::with2(Code::Cmp_rm64_r64, number, rcx))?;
    code.jump(Code::Jne_rel32_64, RETURNED_FAIL)?;
    code.push(Instruction::with2(
        Code::Cmp_rm8_imm8,
        data(7),
        AsCallee::Calling as u8 as i32,
    ))?;
    code.jump(Code::Jne_rel32_64, RETURNED_COUNT)?;
    // A block ending in a call: its own call pending when its cache entry
    // says so (as at the calling entry), and when its record in the
    // segment is the one kept (a call to another target takes it out of
    // the table).
    code.load(rdx, SEGMENT)?;
    call_repeats_here(&mut code, rdx, RETURNED_FAIL, REPEATS_RETURNED)?;
    code.load(rcx, super::area::RESUMING)?;
    runs_index_of(&mut code, rcx, rdx)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_r64,
        runs_word(RunsWord::Segment),
        rdx,
    ))?;
    code.jump(Code::Jne_rel32_64, RETURNED_FAIL)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_r64,
        runs_word(RunsWord::Record),
        rax,
    ))?;
    code.jump(Code::Jne_rel32_64, RETURNED_FAIL)?;
    count(&mut code)?;
    clear(&mut code, RETURNED)?;
    pop_frame(&mut code, CALLS_OUTERMOST, CALLS_POPPED)?;
    code.label(CALLS_POPPED);
    push_frame(&mut code, FinishedRuns::Dropped)?;
    code.jump(Code::Jmp_rel32_64, TO_BODY)?;
    code.label(CALLS_OUTERMOST);
    clear(&mut code, CHAIN_END)?;
    push_frame(&mut code, FinishedRuns::Dropped)?;
    code.jump(Code::Jmp_rel32_64, TO_BODY)?;
    code.label(RETURNED_COUNT);
    count(&mut code)?;
    clear(&mut code, RETURNED)?;
    pop_frame(&mut code, OUTERMOST, RETURNED_KEPT)?;
    // The call's runs out of the chain: the run joins it only when the
    // block ends in `ret` or in a jump into another function (a jump's
    // target follows the jumping run in the chain).
    code.load(rdx, super::area::RESUMING)?;
    cmp_nested(&mut code)?;
    code.jump(Code::Jne_rel32_64, TO_BODY)?;
    code.label(RETURNED_KEPT);
    append(&mut code)?;
    code.jump(Code::Jmp_rel32_64, TO_BODY)?;
    // The outermost pending call over: the chain's runs are all counted.
    code.label(OUTERMOST);
    clear(&mut code, CHAIN_END)?;
    code.jump(Code::Jmp_rel32_64, TO_BODY)?;

    // Not counted: the call's next run makes no pending call until a
    // normal return keeps a record again.
    code.label(RETURNED_FAIL);
    code.load(rcx, RETURNED)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        area_word(rcx, 16),
        0,
    ))?;
    forget_returned(&mut code)?;
    code.jump(Code::Jmp_rel32_64, TO_FRESH)?;

    // A normal return.
    code.label(NOT_RETURNED);
    code.load(rcx, RETURN_CACHE)?;
    code.push(Instruction::with2(Code::Test_rm64_r64, rcx, rcx))?;
    code.jump(Code::Je_rel32_64, NOT_RETURN)?;
    clear(&mut code, RETURN_CACHE)?;
    cmp_zero(&mut code, data(6))?;
    code.jump(Code::Je_rel32_64, TO_FRESH)?;
    cmp_slot_zero(&mut code, PENDING_DEPTH)?;
    code.jump(Code::Jne_rel32_64, DROP_KEPT)?;
    code.load(rax, SEGMENT)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        area_word(rcx, 16),
        rax,
    ))?;
    code.load(rax, CURSOR)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        area_word(rcx, 24),
        rax,
    ))?;
    keep_returned(&mut code)?;
    code.jump(Code::Jmp_rel32_64, TO_FRESH)?;
    code.label(DROP_KEPT);
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        area_word(rcx, 16),
        0,
    ))?;
    forget_returned(&mut code)?;
    code.jump(Code::Jmp_rel32_64, TO_FRESH)?;

    // The target of a jump into another function (`quiet::relay_entry`),
    // while a call is pending: its jumping block's run is the chain's
    // last.
    code.label(NOT_RETURN);
    cmp_slot_zero(&mut code, RELAYING)?;
    code.jump(Code::Je_rel32_64, NOT_RELAYED)?;
    clear(&mut code, RELAYING)?;
    cmp_zero(&mut code, data(7))?;
    code.jump(Code::Je_rel32_64, TO_FRESH)?;
    chain_has_room(&mut code)?;
    code.jump(Code::Jmp_rel32_64, AS_CALLEE)?;

    // The innermost pending call's callee: its calling block's run the
    // chain's last.
    code.label(NOT_RELAYED);
    cmp_zero(&mut code, data(7))?;
    code.jump(Code::Je_rel32_64, TO_FRESH)?;
    code.load(rcx, PENDING_DEPTH)?;
    code.push(Instruction::with2(Code::Test_rm64_r64, rcx, rcx))?;
    code.jump(Code::Je_rel32_64, TO_FRESH)?;
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        rax,
        innermost_frame(rcx, 8),
    ))?;
    // The calling run's place, without the bit of [`FinishedRuns`].
    code.push(Instruction::with2(Code::And_rm64_imm8, rax, -16))?;
    code.lea(rax, rax, 16)?;
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rax, slot(CHAIN_END)))?;
    code.jump(Code::Jne_rel32_64, TO_FRESH)?;
    chain_has_room(&mut code)?;
    // A block ending in a call counted so makes its call pending too,
    // when there is room for it and its cache entry allows.
    code.label(AS_CALLEE);
    code.push(Instruction::with2(
        Code::Cmp_rm8_imm8,
        data(7),
        AsCallee::Calling as u8 as i32,
    ))?;
    code.jump(Code::Jne_rel32_64, APPEND)?;
    // The block's call made pending (the chain has room for its run):
    // when there is room for one more pending call and the call's cache
    // entry says its last run was made in the thread's segment with a
    // record kept for its return, the run counted in the block's record
    // of the segment.
    // Made at the callee's entry above (its run the first of a callee or
    // of a jump's target: it stays in the chain when the call is over) or
    // from the calling entry below (it leaves).
    let make_pending = |code: &mut Emit, label: u64, runs: FinishedRuns| {
        code.label(label);
        code.push(Instruction::with2(
            Code::Cmp_rm64_imm32,
            slot(PENDING_DEPTH),
            (FRAME * (DEPTH - 1)) as i32,
        ))?;
        code.jump(Code::Ja_rel32_64, TO_FRESH)?;
        code.push(Instruction::with2(
            Code::Mov_r32_rm32,
            Register::ECX,
            data(0),
        ))?;
        code.load(rax, SEGMENT)?;
        call_repeats_here(code, rax, TO_FRESH, REPEATS_CALLING + 4 * label)?;
        count_in_segment(code)?;
        push_frame(code, runs)?;
        code.jump(Code::Jmp_rel32_64, TO_BODY)
    };
    make_pending(&mut code, MAKE_PENDING, FinishedRuns::Kept)?;
    code.label(APPEND);
    count_in_segment(&mut code)?;
    append(&mut code)?;
    code.jump(Code::Jmp_rel32_64, TO_BODY)?;

    // A block ending in a call, from its quiet path: its call made pending
    // when the chain has room.
    code.label(CALLING);
    enter(&mut code)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_imm32,
        slot(CHAIN_END),
        LAST_APPEND,
    ))?;
    code.jump(Code::Ja_rel32_64, TO_FRESH)?;
    make_pending(&mut code, MAKE_PENDING_DROPPED, FinishedRuns::Dropped)?;

    // A block ending in `ret` or in a jump into another function, from
    // its quiet path: while a call is pending, the run counted and kept
    // at the chain's end (a jump's target follows it there).
    code.label(CHAINED);
    enter(&mut code)?;
    chain_has_room(&mut code)?;
    code.jump(Code::Jmp_rel32_64, APPEND)?;

    // On at the translation's first instruction, everything back.
    code.label(TO_BODY);
    code.load(rdx, super::area::RESUMING)?;
    code.lea(rax, rdx, -(BODY_ENTRY as i64))?;
    code.save(JUMP, rax)?;
    restore_flags(&mut code, super::area::RESUME_FLAGS)?;
    super::records::back_through_jump(&mut code)?;

    // On at the writing of its record (rax and rcx in their slots).
    code.label(TO_FRESH);
    code.load(rdx, super::area::RESUMING)?;
    code.lea(rax, rdx, -(FRESH_ENTRY as i64))?;
    cmp_slot_zero(&mut code, CHAIN_END)?;
    code.jump(Code::Je_rel32_64, PLAIN_FRESH)?;
    code.save(BACK, rax)?;
    restore_flags(&mut code, super::area::RESUME_FLAGS)?;
    code.load(rdx, SAVE_RDX)?;
    code.jump(Code::Jmp_rel32_64, write_pending)?;
    code.label(PLAIN_FRESH);
    code.save(JUMP, rax)?;
    restore_flags(&mut code, super::area::RESUME_FLAGS)?;
    code.load(rdx, SAVE_RDX)?;
    code.load(rax, super::area::RESUMING)?;
    code.push(Instruction::with1(Code::Jmp_rm64, slot(JUMP)))?;
    let (bytes, offsets) = super::encode::encode(&code.list, at)
        .map_err(|error| format!("the resume routine: {error}"))?;
    let entry =
        |label| super::encode::labelled(&code.list, &offsets, at, label, "the resume routine");
    Ok(RuleRoutine {
        entries: RuleEntries {
            calling: entry(CALLING)?,
            chained: entry(CHAINED)?,
        },
        bytes,
    })
}

/// The resume routine's bytes and its other entries.
pub(super) struct RuleRoutine {
    /// The bytes, from its resume entry (`resume_routine`).
    pub bytes: Vec<u8>,
    /// Its entries for quiet paths.
    pub entries: RuleEntries,
}

/// The resume routine's entries where quiet paths go on
/// (`quiet::quiet_path`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RuleEntries {
    /// For a block ending in a call.
    pub calling: u64,
    /// For a block ending in `ret` or in a jump into another function
    /// ([`Counted::Returns`], [`Counted::Tail`]).
    pub chained: u64,
}

/// In the resume routine: on to [`TO_FRESH`] unless a call is pending
/// and the chain has room for one more run.
fn chain_has_room(code: &mut Emit) -> Result<(), Refusal> {
    code.push(Instruction::with2(
        Code::Cmp_rm64_imm8,
        slot(PENDING_DEPTH),
        0,
    ))?;
    code.jump(Code::Je_rel32_64, TO_FRESH)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_imm32,
        slot(CHAIN_END),
        LAST_APPEND,
    ))?;
    code.jump(Code::Ja_rel32_64, TO_FRESH)
}

/// In the resume routine: the record in rax, with the stack pointer, at
/// the chain's end; rcx lost.
fn append(code: &mut Emit) -> Result<(), Refusal> {
    let (rax, rcx) = (Register::RAX, Register::RCX);
    code.load(rcx, CHAIN_END)?;
    let record = area_word(rcx, PENDING_CHAIN as i64);
    code.push(Instruction::with2(Code::Mov_rm64_r64, record, rax))?;
    let sp = area_word(rcx, PENDING_CHAIN as i64 + 8);
    code.push(Instruction::with2(Code::Mov_rm64_r64, sp, Register::RSP))?;
    code.lea(rcx, rcx, 16)?;
    code.save(CHAIN_END, rcx)
}

/// What becomes of the runs a pending call leaves in the chain (its
/// calling block's run and those after it) when the call is over,
/// counted whole: a frame's word 8 is its calling run's place in the
/// chain, plus 1 when they stay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum FinishedRuns {
    /// They leave the chain: all counted in the records of the segment,
    /// the records read in order need none of them.
    Dropped = 0,
    /// They stay: the calling run is the first run of a pending call's
    /// callee or of a jump's target, which the run before it in the chain
    /// needs next.
    Kept = 1,
}

/// In the resume routine: the calling block's record in rax (its run
/// counted) at the chain's end and a frame for its call pushed, the
/// call's entry in the stack of calls the one after the top (the block's
/// call enters it next), with the segment and record its return is to
/// count in from the first cache entry of the call of the translation the
/// routine works for (`RESUMING`); rcx, rdx and the flags lost.
fn push_frame(code: &mut Emit, runs: FinishedRuns) -> Result<(), Refusal> {
    let (rbx, rcx, rdx) = (Register::RBX, Register::RCX, Register::RDX);
    code.load(rdx, PENDING_DEPTH)?;
    let frame = |at: i64| area_word(rdx, PENDING_FRAMES as i64 + at);
    code.save(super::area::SWAP_RBX, rbx)?;
    code.load(rbx, super::area::RESUMING)?;
    code.push(Instruction::with2(
        Code::Mov_r32_rm32,
        Register::EBX,
        data_of(rbx, 0),
    ))?;
    cache_entry_of(code, rbx)?;
    for word in [16, 24] {
        let cached = area_word(rbx, (Area::QUIET_BASE + word) as i64);
        code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, cached))?;
        code.push(Instruction::with2(
            Code::Mov_rm64_r64,
            frame(word as i64),
            rcx,
        ))?;
    }
    code.load(rbx, super::area::SWAP_RBX)?;
    code.load(rcx, CHAIN_END)?;
    if runs == FinishedRuns::Kept {
        code.lea(rcx, rcx, FinishedRuns::Kept as i64)?;
    }
    code.push(Instruction::with2(Code::Mov_rm64_r64, frame(8), rcx))?;
    append(code)?;
    code.load(rcx, TOP_CALL)?;
    code.lea(rcx, rcx, 32)?;
    code.push(Instruction::with2(
        Code::Movzx_r32_rm16,
        Register::ECX,
        Register::CX,
    ))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, frame(0), rcx))?;
    code.lea(rdx, rdx, FRAME as i64)?;
    code.save(PENDING_DEPTH, rdx)
}

/// In the resume routine: the innermost pending call over, counted: its
/// frame popped, then on to `outermost` when it was the outermost, else
/// its runs out of the chain, or on to `kept` when they stay
/// ([`FinishedRuns`]); rcx, rdx and the flags lost.
fn pop_frame(code: &mut Emit, outermost: u64, kept: u64) -> Result<(), Refusal> {
    let (rcx, rdx) = (Register::RCX, Register::RDX);
    code.load(rcx, PENDING_DEPTH)?;
    code.lea(rcx, rcx, -(FRAME as i64))?;
    code.save(PENDING_DEPTH, rcx)?;
    code.push(Instruction::with2(Code::Test_rm64_r64, rcx, rcx))?;
    code.jump(Code::Je_rel32_64, outermost)?;
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        rdx,
        area_word(rcx, PENDING_FRAMES as i64 + 8),
    ))?;
    code.push(Instruction::with2(
        Code::Test_rm8_imm8,
        Register::DL,
        FinishedRuns::Kept as u32,
    ))?;
    code.jump(Code::Jne_rel32_64, kept)?;
    code.save(CHAIN_END, rdx)
}

/// In the resume routine (the translation's entry in rdx): when the
/// thread's table of records holds a record of the translation in the
/// thread's segment, one more run there (its address in rax and in the
/// `RECORD` slot), else on to [`TO_FRESH`]; rcx lost.
fn count_in_segment(code: &mut Emit) -> std::result::Result<(), Refusal> {
    let (rax, rcx) = (Register::RAX, Register::RCX);
    code.load(rax, SEGMENT)?;
    runs_index_of(code, Register::RDX, rax)?;
    let segment = runs_word(RunsWord::Segment);
    code.push(Instruction::with2(Code::Cmp_rm64_r64, segment, rax))?;
    code.jump(Code::Jne_rel32_64, TO_FRESH)?;
    let record = runs_word(RunsWord::Record);
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, record))?;
    code.push(Instruction::with2(
        Code::Mov_r32_rm32,
        Register::ECX,
        data(0),
    ))?;
    let number = MemoryOperand::with_base(rax);
    code.push(Instruction::with2(Code::Cmp_rm64_r64, number, rcx))?;
    code.jump(Code::Jne_rel32_64, TO_FRESH)?;
    let runs = MemoryOperand::with_base_displ(rax, 8);
    code.push(Instruction::with1(Code::Inc_rm64, runs))?;
    code.save(RECORD, rax)
}

/// In the resume routine, rcx a call's cache entry (`quiet::call_cache`)
/// and rax the thread's segment: rdx the calling translation's number,
/// rcx the place of its entry for the segment in the table of transfers
/// (`quiet::transfer_index_in`).
fn transfer_entry_of_cache(code: &mut Emit) -> Result<(), Refusal> {
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    code.lea(rdx, rcx, -(Area::QUIET_BASE as i64))?;
    code.push(Instruction::with2(
        Code::Shr_rm64_imm8,
        rdx,
        super::quiet::CALL_CACHE_BYTES.trailing_zeros(),
    ))?;
    super::quiet::transfer_index_in(code, rcx, rdx, rax)
}

/// In the resume routine, after a normal return kept the record it goes
/// on to write (the `CURSOR` slot) in the call's cache entry (in rcx):
/// the same record kept in the call's entry of the table of transfers
/// for the thread's segment, when the entry is that direct call's from
/// this segment; rax, rcx, rdx and the flags lost.
pub(super) fn keep_returned(code: &mut Emit) -> Result<(), Refusal> {
    use super::quiet::{transfer_word_in, TransferWord};
    const DONE: u64 = 0x40;
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    code.load(rax, SEGMENT)?;
    transfer_entry_of_cache(code)?;
    let word = |word| transfer_word_in(rcx, word);
    code.push(Instruction::with2(
        Code::Cmp_rm64_r64,
        word(TransferWord::Segment),
        rax,
    ))?;
    code.jump(Code::Jne_rel32_64, DONE)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_r64,
        word(TransferWord::Translation),
        rdx,
    ))?;
    code.jump(Code::Jne_rel32_64, DONE)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_imm8,
        word(TransferWord::Target),
        0,
    ))?;
    code.jump(Code::Jne_rel32_64, DONE)?;
    code.load(rax, CURSOR)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        word(TransferWord::Returned),
        rax,
    ))?;
    code.label(DONE);
    Ok(())
}

/// In the resume routine, where a call's cache entry (in rcx) forgets the
/// record its return went on to: the call's entry of the table of
/// transfers for the thread's segment forgets it too (an entry of another
/// transfer that shares its index loses nothing it needs: the record is
/// only ever taken when the entry is found for the call); rax, rcx, rdx
/// and the flags lost.
pub(super) fn forget_returned(code: &mut Emit) -> Result<(), Refusal> {
    use super::quiet::{transfer_word_in, TransferWord};
    code.load(Register::RAX, SEGMENT)?;
    transfer_entry_of_cache(code)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        transfer_word_in(Register::RCX, TransferWord::Returned),
        0,
    ))
}

/// `register` = the offset from `Area::QUIET_BASE` of the cache entries
/// of the call of the translation whose number is in it
/// (`quiet::call_cache`); the flags lost.
fn cache_entry_of(code: &mut Emit, register: Register) -> Result<(), Refusal> {
    use super::quiet::CALL_CACHE_BYTES;
    code.push(Instruction::with2(
        Code::Shl_rm64_imm8,
        register,
        CALL_CACHE_BYTES.trailing_zeros(),
    ))
}

/// In the resume routine, rcx the number of a translation ending in a
/// call (lost): on to `fail` unless one of the call's cache entries
/// (`quiet::call_cache`) says that a run of it was made in the thread's
/// segment (in `segment`) and that a record of the block its return went
/// on to is kept in that segment, or, for a direct call, the call's entry
/// of the table of transfers for the segment says so
/// ([`TransferWord::Returned`](super::quiet::TransferWord)). When the
/// second cache entry says so, the two swap; when the table does, the
/// first moves to the second and takes the table's (rbx and rsi kept in
/// their slots): so the first is always the one of the call's run in the
/// segment, as the call's code and its return expect. `labels` and the
/// three labels after it are this use's.
pub(super) fn call_repeats_here(
    code: &mut Emit,
    segment: Register,
    fail: u64,
    labels: u64,
) -> Result<(), Refusal> {
    use super::quiet::{CALL_CACHE_BYTES, SECOND_ENTRY};
    let (second, found, table) = (labels, labels + 1, labels + 2);
    let (rbx, rcx) = (Register::RBX, Register::RCX);
    cache_entry_of(code, rcx)?;
    let cache = |at: u64| area_word(rcx, (Area::QUIET_BASE + at) as i64);
    // The entry at `entry`: the caller's segment, then its return's.
    let made_here = |code: &mut Emit, entry: u64, word: u64| {
        let compare = Instruction::with2(Code::Cmp_rm64_r64, cache(entry + word), segment);
        code.push(compare)
    };
    made_here(code, 0, 0)?;
    code.jump(Code::Jne_rel32_64, second)?;
    made_here(code, 0, 16)?;
    code.jump(Code::Je_rel32_64, found)?;
    code.label(second);
    made_here(code, SECOND_ENTRY, 0)?;
    code.jump(Code::Jne_rel32_64, table)?;
    made_here(code, SECOND_ENTRY, 16)?;
    code.jump(Code::Jne_rel32_64, table)?;
    code.save(super::area::SWAP_RBX, rbx)?;
    for word in [0, 8, 16, 24] {
        code.push(Instruction::with2(Code::Mov_r64_rm64, rbx, cache(word)))?;
        code.push(Instruction::with2(
            Code::Xchg_rm64_r64,
            cache(SECOND_ENTRY + word),
            rbx,
        ))?;
        code.push(Instruction::with2(Code::Mov_rm64_r64, cache(word), rbx))?;
    }
    // The last run's target (an indirect call's) was the other entry's:
    // no target is taken for this entry's.
    code.push(Instruction::with2(Code::Mov_r64_rm64, rbx, Register::RCX))?;
    code.push(Instruction::with2(
        Code::Shr_rm64_imm8,
        rbx,
        CALL_CACHE_BYTES.trailing_zeros() - 3,
    ))?;
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        area_word(rbx, Area::COUNTER_BASE as i64),
        0,
    ))?;
    code.load(rbx, super::area::SWAP_RBX)?;
    code.jump(Code::Jmp_rel32_64, found)?;
    code.label(table);
    from_transfers(code, segment, fail, found, labels + 3)?;
    code.label(found);
    Ok(())
}

/// In [`call_repeats_here`] (rcx the translation's number times the bytes
/// of its cache entries), neither cache entry of the call's run in
/// `segment`: when the call's entry of the table of transfers for the
/// segment is the direct call's and keeps a record its return went on to
/// ([`TransferWord::Returned`](super::quiet::TransferWord)), the first
/// cache entry moves to the second (unless its caller's segment was
/// forgotten, as `quiet::choose_segment` moves it) and takes the
/// segment, the callee's segment the entry chose and that record, then on
/// to `found`; else on to `fail`. rbx and rsi kept in their slots; label
/// `own` is this use's.
fn from_transfers(
    code: &mut Emit,
    segment: Register,
    fail: u64,
    found: u64,
    own: u64,
) -> Result<(), Refusal> {
    use super::area::{SWAP_RBX, SWAP_RSI};
    use super::quiet::{transfer_index_in, transfer_word_in, TransferWord, SECOND_ENTRY};
    let (rbx, rcx, rsi) = (Register::RBX, Register::RCX, Register::RSI);
    let (missed, forgotten) = (own, own + 1);
    let cache = |at: u64| area_word(rcx, (Area::QUIET_BASE + at) as i64);
    let word = |word| transfer_word_in(rsi, word);
    code.save(SWAP_RBX, rbx)?;
    code.save(SWAP_RSI, rsi)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rbx, rcx))?;
    code.push(Instruction::with2(
        Code::Shr_rm64_imm8,
        rbx,
        super::quiet::CALL_CACHE_BYTES.trailing_zeros(),
    ))?;
    transfer_index_in(code, rsi, rbx, segment)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_r64,
        word(TransferWord::Segment),
        segment,
    ))?;
    code.jump(Code::Jne_rel32_64, missed)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_r64,
        word(TransferWord::Translation),
        rbx,
    ))?;
    code.jump(Code::Jne_rel32_64, missed)?;
    for (kept, value) in [
        (TransferWord::Target, Code::Jne_rel32_64),
        (TransferWord::Returned, Code::Je_rel32_64),
    ] {
        code.push(Instruction::with2(Code::Cmp_rm64_imm8, word(kept), 0))?;
        code.jump(value, missed)?;
    }
    code.push(Instruction::with2(Code::Mov_r64_rm64, rbx, cache(0)))?;
    code.push(Instruction::with2(Code::Test_rm64_r64, rbx, rbx))?;
    code.jump(Code::Je_rel32_64, forgotten)?;
    for at in [0, 8, 16, 24] {
        code.push(Instruction::with2(Code::Mov_r64_rm64, rbx, cache(at)))?;
        code.push(Instruction::with2(
            Code::Mov_rm64_r64,
            cache(SECOND_ENTRY + at),
            rbx,
        ))?;
    }
    code.label(forgotten);
    code.push(Instruction::with2(Code::Mov_rm64_r64, cache(0), segment))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, cache(16), segment))?;
    for (at, kept) in [(8, TransferWord::Chosen), (24, TransferWord::Returned)] {
        code.push(Instruction::with2(Code::Mov_r64_rm64, rbx, word(kept)))?;
        code.push(Instruction::with2(Code::Mov_rm64_r64, cache(at), rbx))?;
    }
    code.load(rsi, SWAP_RSI)?;
    code.load(rbx, SWAP_RBX)?;
    code.jump(Code::Jmp_rel32_64, found)?;
    code.label(missed);
    code.load(rsi, SWAP_RSI)?;
    code.load(rbx, SWAP_RBX)?;
    code.jump(Code::Jmp_rel32_64, fail)
}

/// The flags kept with `lahf`/`seto` at `from` saved (rax lost).
pub(super) fn save_flags(code: &mut Emit, into: u64) -> std::result::Result<(), Refusal> {
    code.push(Ok::<_, iced_x86::IcedError>(Instruction::with(Code::Lahf)))?;
    code.push(Instruction::with1(Code::Seto_rm8, Register::AL))?;
    code.save(into, Register::RAX)
}

/// The tracee's flags back from the slot at `from` (rax lost).
pub(super) fn restore_flags(code: &mut Emit, from: u64) -> std::result::Result<(), Refusal> {
    let rax = Register::RAX;
    code.load(rax, from)?;
    code.push(Instruction::with2(Code::Add_rm8_imm8, Register::AL, 0x7f))?;
    code.push(Ok::<_, iced_x86::IcedError>(Instruction::with(Code::Sahf)))
}

/// The code of the lookup routine of jumps once it has found the target
/// (its quiet entry in the `JUMP` slot; flags, rax and rbx saved, both
/// free): a run counted in `JUMPER` by the jumping block's quiet path
/// stays counted when the target's quiet path keeps the segment (the
/// target has one, of the segment's region, and the stack pointer is at
/// most 64 KiB below the segment's: the same tests); else it joins the
/// chain (in the entry kept for it), whose runs the target's record then
/// writes first, in order. `JUMPER` is 0 after.
pub(super) fn jumper_check() -> Result<Vec<Instruction>, Refusal> {
    const IN_ORDER: u64 = 0x30;
    const DONE: u64 = 0x31;
    let (rax, rbx) = (Register::RAX, Register::RBX);
    let mut code = Emit::default();
    code.load(rbx, JUMPER)?;
    code.push(Instruction::with2(Code::Test_rm64_r64, rbx, rbx))?;
    code.jump(Code::Je_rel32_64, DONE)?;
    clear(&mut code, JUMPER)?;
    code.load(rax, JUMP)?;
    let place = super::quiet::QUIET_ENTRY as i64 - super::quiet::PLACE as i64;
    code.push(Instruction::with2(
        Code::Movsxd_r64_rm32,
        rax,
        MemoryOperand::with_base_displ(rax, place),
    ))?;
    code.push(Instruction::with2(
        Code::Cmp_r64_rm64,
        rax,
        slot(super::area::SEGMENT_REGION),
    ))?;
    code.jump(Code::Jne_rel32_64, IN_ORDER)?;
    code.load(rax, super::area::SEGMENT_SP)?;
    code.push(Instruction::with2(Code::Sub_r64_rm64, rax, Register::RSP))?;
    code.push(Instruction::with2(Code::Cmp_rm64_imm32, rax, 0xffff))?;
    code.jump(Code::Jbe_rel32_64, DONE)?;
    code.label(IN_ORDER);
    code.load(rax, CHAIN_END)?;
    let entry = |at: i64| area_word(rax, PENDING_CHAIN as i64 + at);
    code.push(Instruction::with2(Code::Mov_rm64_r64, entry(0), rbx))?;
    code.load(rbx, JUMPER_SP)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, entry(8), rbx))?;
    code.lea(rax, rax, 16)?;
    code.save(CHAIN_END, rax)?;
    // (rax is the routine's scratch until it restores the program's.)
    code.label(DONE);
    code.load(rax, JUMP)?;
    Ok(code.list)
}

/// What the lookup routine of jumps does with a run in `JUMPER` when the
/// tracer finds the target instead (a miss), which it enters at its entry
/// (a new segment, whose record writes the chain first): the run joins
/// the chain, in the entry kept for it (`jumper_check`).
pub(super) fn jumper_in_order(memory: &Memory, area: &Area) -> Result<()> {
    let record = memory.read_u64(area.at(JUMPER))?;
    if record == 0 {
        return Ok(());
    }
    let sp = memory.read_u64(area.at(JUMPER_SP))?;
    let end = memory.read_u64(area.at(CHAIN_END))?;
    if end >= 16 * CHAIN {
        return Err(Error::Unexpected(
            "translate: no room in the chain for a jumping block's run".into(),
        ));
    }
    let entry = area.at(PENDING_CHAIN + end);
    memory.write_u64(entry, record)?;
    memory.write_u64(entry + 8, sp)?;
    memory.write_u64(area.at(CHAIN_END), end + 16)?;
    memory.write_u64(area.at(JUMPER), 0)
}

/// The tracee's flags `eflags` with the status flags the write routine
/// kept (`kept`: `lahf` in bits 8-15, `seto` in bits 0-7) back: what the
/// tracer restores when a store of the routine faults.
pub(super) fn flags_kept(eflags: u64, kept: u64) -> u64 {
    // SF, ZF, AF, PF and CF are where `lahf` puts them, one byte up.
    const FROM_AH: u64 = 0xd5;
    const OF: u64 = 1 << 11;
    let ah = (kept >> 8) & FROM_AH;
    let of = if kept & 0xff != 0 { OF } else { 0 };
    (eflags & !(FROM_AH | OF)) | ah | of
}

/// Labels of the routine.
const COPY: u64 = 1;
const COPIED: u64 = 2;
const TAKE: u64 = 3;
const TAKEN: u64 = 4;
const LEARNT: u64 = 5;

/// The routine, encoded at `at`, that writes the pending calls' records
/// in order, entered by a jump from a translation's record writing (rax
/// and rcx in their slots, a call pending) and going back through the
/// `BACK` slot (the translation's fresh entry, rax its entry), the flags
/// kept: at the cursor, the chain's, each with one run and the stack
/// pointer of its run; only then (a store that faults in a guard page has
/// changed nothing: the tracer settles the calls, `stops`) the address of
/// the last one kept where the `LEARN` slot says (`quiet::rehome`), the
/// cursor moved, a run taken off each record they were counted in, and
/// no call pending.
pub(super) fn write_routine(at: u64) -> std::result::Result<Vec<u8>, Refusal> {
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    let flags = super::area::RESUME_FLAGS;
    let mut code = Emit::default();
    code.save(WRITE_RDX, rdx)?;
    save_flags(&mut code, flags)?;
    code.load(rdx, CURSOR)?;
    code.push(Instruction::with2(
        Code::Xor_r32_rm32,
        Register::ECX,
        Register::ECX,
    ))?;
    let entry = |at: i64| area_word(rcx, PENDING_CHAIN as i64 + at);
    code.label(COPY);
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rcx, slot(CHAIN_END)))?;
    code.jump(Code::Jae_rel32_64, COPIED)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, entry(0)))?;
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        rax,
        MemoryOperand::with_base(rax),
    ))?;
    let word = |at: i64| MemoryOperand::with_base_displ(rdx, at);
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(0), rax))?;
    code.push(Instruction::with2(Code::Mov_rm64_imm32, word(8), 1))?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, entry(8)))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(16), rax))?;
    code.lea(rdx, rdx, 24)?;
    code.lea(rcx, rcx, 16)?;
    code.jump(Code::Jmp_rel32_64, COPY)?;
    code.label(COPIED);
    // The last run's record, where an indirect call asked for it.
    code.load(rcx, super::area::LEARN)?;
    code.push(Instruction::with2(Code::Test_rm64_r64, rcx, rcx))?;
    code.jump(Code::Je_rel32_64, LEARNT)?;
    code.lea(rax, rdx, -24)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        area_word(rcx, 0),
        rax,
    ))?;
    code.label(LEARNT);
    code.save(CURSOR, rdx)?;
    code.push(Instruction::with2(
        Code::Xor_r32_rm32,
        Register::ECX,
        Register::ECX,
    ))?;
    code.label(TAKE);
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rcx, slot(CHAIN_END)))?;
    code.jump(Code::Jae_rel32_64, TAKEN)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, entry(0)))?;
    let runs = MemoryOperand::with_base_displ(rax, 8);
    code.push(Instruction::with1(Code::Dec_rm64, runs))?;
    code.lea(rcx, rcx, 16)?;
    code.jump(Code::Jmp_rel32_64, TAKE)?;
    code.label(TAKEN);
    for done in [PENDING_DEPTH, CHAIN_END, RETURNED, super::area::LEARN] {
        clear(&mut code, done)?;
    }
    restore_flags(&mut code, flags)?;
    code.load(rdx, WRITE_RDX)?;
    // The fresh entry is entered with rax its translation's entry.
    code.load(rax, BACK)?;
    code.lea(rax, rax, super::quiet::FRESH_ENTRY as i64)?;
    code.push(Instruction::with1(Code::Jmp_rm64, slot(BACK)))?;
    let (bytes, _) = super::encode::encode(&code.list, at)
        .map_err(|error| format!("the routine of pending calls: {error}"))?;
    Ok(bytes)
}

/// What [`write_routine`] does, by the tracer for a stopped thread
/// (`area`): the words of the chain's runs and of the run in `JUMPER`
/// (none when there are none), a run taken off each record they were
/// counted in, and the thread's pending slots zeroed. The caller appends the words to the
/// records read so far, in order.
pub(super) fn settle(memory: &Memory, area: &Area) -> Result<Vec<u64>> {
    let mut slots = [0u64; PENDING_SLOTS];
    memory.read(area.at(PENDING_DEPTH), bytemuck::cast_slice_mut(&mut slots))?;
    let slot = |offset: u64| slots.get(((offset - PENDING_DEPTH) / 8) as usize).copied();
    let end = slot(CHAIN_END).unwrap_or(0).min(16 * CHAIN);
    let jumper = [(JUMPER, JUMPER_SP)]
        .into_iter()
        .filter(|_| slot(JUMPER) != Some(0));
    let runs: Vec<(u64, u64)> = (0..end)
        .step_by(16)
        .map(|at| (PENDING_CHAIN + at, PENDING_CHAIN + at + 8))
        .chain(jumper)
        .collect();
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let mut words = Vec::with_capacity(3 * runs.len());
    for (record, sp) in runs {
        let (Some(record), Some(sp)) = (slot(record), slot(sp)) else {
            break;
        };
        let id = memory.read_u64(record)?;
        let runs = memory.read_u64(record + 8)?.checked_sub(1).ok_or_else(|| {
            Error::Unexpected("translate: a pending call's record counts no run".into())
        })?;
        memory.write_u64(record + 8, runs)?;
        words.extend([id, 1, sp]);
    }
    memory.write(area.at(PENDING_DEPTH), &[0u8; 8 * PENDING_SLOTS])?;
    Ok(words)
}

/// One of each kind of [`Counted`], for tests.
#[cfg(test)]
pub(super) const KINDS: [Counted; 8] = [
    Counted::Never,
    Counted::Cached,
    Counted::Dispatch,
    Counted::Callee,
    Counted::Calls,
    Counted::Returns,
    Counted::Relay,
    Counted::Tail,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_word_says_what_the_resume_routine_may_count() {
        for counted in KINDS {
            let word = data_word(counted, 7);
            assert_eq!(u32::from_le_bytes([word[0], word[1], word[2], word[3]]), 7);
            assert_eq!(word[6], counted.after_return() as u8, "{counted:?}");
            assert_eq!(word[7], counted.as_callee() as u8, "{counted:?}");
        }
    }

    #[test]
    fn the_flags_the_write_routine_kept_come_back() {
        // A tracee's flags: IF and the reserved bit, then ZF and CF set.
        let base = 0x202;
        let kept = |ah: u64, of: u64| (ah << 8) | of;
        // ZF and CF set, OF clear.
        assert_eq!(flags_kept(base | 0x800, kept(0x41, 0)), base | 0x41);
        // OF set; SF, AF, PF from AH (bit 1 of AH is always 1: ignored).
        assert_eq!(flags_kept(base, kept(0x96, 1)), base | 0x94 | 0x800);
        // Everything clear.
        assert_eq!(flags_kept(base | 0x8d5, kept(0x02, 0)), base);
    }

    /// The routine writing the pending runs out, run: the chain's runs
    /// written at the cursor in order, each with one run, taken off the
    /// records they were counted in; the last one's address kept where
    /// the `LEARN` slot says (`quiet::rehome`), then nothing pending.
    #[test]
    fn the_write_routine_keeps_its_last_record_where_asked() {
        std::thread::spawn(|| {
            use super::super::area::LEARN;
            use super::super::running::Running;
            let running = Running::new();
            let buffer = vec![0u64; 12];
            let first = Box::new([7u64, 3, 0x7ffd_0000_1000]);
            let last = Box::new([9u64, 2, 0x7ffd_0000_2000]);
            let at = |words: &[u64]| words.as_ptr() as u64;
            running.set(CURSOR, at(&buffer));
            running.set(PENDING_CHAIN, at(&first[..]));
            running.set(PENDING_CHAIN + 8, 0x7ffd_0000_0ff0);
            running.set(PENDING_CHAIN + 16, at(&last[..]));
            running.set(PENDING_CHAIN + 24, 0x7ffd_0000_0fe0);
            running.set(CHAIN_END, 32);
            running.set(PENDING_DEPTH, FRAME);
            // A word of the area nothing else uses here.
            let learnt = Area::TRANSFERS_BASE + 32;
            running.set(LEARN, learnt);
            running.call(|at, back| {
                running.set(BACK, back);
                write_routine(at).unwrap()
            });
            let read = |words: &[u64], index: usize| unsafe {
                std::ptr::read_volatile(words.as_ptr().add(index))
            };
            let written: Vec<u64> = (0..6).map(|index| read(&buffer, index)).collect();
            assert_eq!(written, [7, 1, 0x7ffd_0000_0ff0, 9, 1, 0x7ffd_0000_0fe0]);
            assert_eq!((read(&first[..], 1), read(&last[..], 1)), (2, 1));
            assert_eq!(running.get(learnt), at(&buffer) + 24);
            assert_eq!(running.get(CURSOR), at(&buffer) + 48);
            for slot in [LEARN, CHAIN_END, PENDING_DEPTH] {
                assert_eq!(running.get(slot), 0);
            }
            // Asked nowhere: nothing kept.
            running.set(learnt, 0);
            running.set(CHAIN_END, 16);
            running.set(PENDING_DEPTH, FRAME);
            running.call(|at, back| {
                running.set(BACK, back);
                write_routine(at).unwrap()
            });
            assert_eq!(running.get(learnt), 0);
            assert_eq!(running.get(CURSOR), at(&buffer) + 72);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_routines_encode_with_their_entries() {
        assert!(write_routine(0x7f00_0000_0000).is_ok());
        let at = 0x7f00_0000_0000;
        let routine = resume_routine(at, 0x7f00_0000_1000).unwrap();
        let end = at + routine.bytes.len() as u64;
        let entries = routine.entries;
        assert!((at + 1..end).contains(&entries.calling));
        assert!((entries.calling + 1..end).contains(&entries.chained));
    }

    /// A thread's slots up to its pending calls', in this process's
    /// memory (written and read as the tracer does a tracee's).
    struct Slots {
        memory: Memory,
        words: Vec<u64>,
    }

    impl Slots {
        fn new() -> Slots {
            Slots {
                memory: Memory::open(std::process::id() as i32).unwrap(),
                words: vec![0; (PENDING_DEPTH / 8) as usize + PENDING_SLOTS],
            }
        }

        fn area(&self) -> Area {
            Area::for_test(self.words.as_ptr() as u64)
        }

        fn set(&self, offset: u64, value: u64) {
            self.memory
                .write_u64(self.area().at(offset), value)
                .unwrap();
        }

        fn get(&self, offset: u64) -> u64 {
            self.memory.read_u64(self.area().at(offset)).unwrap()
        }
    }

    /// The tracer settles pending calls as the routine writing their
    /// records does: the chain's runs in order, each with one run taken
    /// off its record, and every slot zeroed.
    #[test]
    fn settling_writes_the_chain_in_order() {
        let slots = Slots::new();
        let (memory, area) = (&slots.memory, slots.area());
        // Records: [translation number, runs], each counted twice.
        let records: Vec<[u64; 2]> = (0..5).map(|id| [10 + id, 2]).collect();
        let record = |index: usize| records[index].as_ptr() as u64;
        let set = |offset: u64, value: u64| slots.set(offset, value);
        // Two calls pending, the inner one's callee running: the outer
        // call, its callee's first run, the inner call, its callee's
        // first run and a jump's target's.
        set(PENDING_DEPTH, 2 * FRAME);
        set(PENDING_FRAMES + 8, 0);
        set(PENDING_FRAMES + FRAME + 8, 32);
        for index in 0..4 {
            set(PENDING_CHAIN + 16 * index, record(index as usize));
            set(PENDING_CHAIN + 16 * index + 8, 0x100 - 8 * index);
        }
        // A stale entry past the chain's end.
        set(PENDING_CHAIN + 64, record(4));
        set(CHAIN_END, 64);
        set(RELAYING, 1);
        let words = settle(memory, &area).unwrap();
        let expected = [
            [10, 1, 0x100],
            [11, 1, 0x0f8],
            [12, 1, 0x0f0],
            [13, 1, 0x0e8],
        ];
        assert_eq!(words, expected.concat());
        for index in 0..records.len() {
            let runs = memory.read_u64(record(index) + 8).unwrap();
            assert_eq!(runs, if index < 4 { 1 } else { 2 }, "record {index}");
        }
        for index in 0..PENDING_SLOTS as u64 {
            assert_eq!(slots.get(PENDING_DEPTH + 8 * index), 0, "slot {index}");
        }
        assert!(settle(memory, &area).unwrap().is_empty(), "nothing pending");
    }

    /// A run of a block left through an indirect jump, counted from its
    /// quiet path: on a lookup miss the tracer puts it at the chain's end
    /// (the entry kept for it), and settling writes it after the chain.
    #[test]
    fn a_jumping_block_s_run_joins_the_chain_in_order() {
        let slots = Slots::new();
        let (memory, area) = (&slots.memory, slots.area());
        let records: Vec<[u64; 2]> = (0..2).map(|id| [20 + id, 3]).collect();
        let record = |index: usize| records[index].as_ptr() as u64;
        let set = |offset: u64, value: u64| slots.set(offset, value);
        let get = |offset: u64| slots.get(offset);
        // Nothing kept: nothing to do.
        jumper_in_order(memory, &area).unwrap();
        assert_eq!(get(CHAIN_END), 0);
        // A pending call's run in the chain, then the jumping block's.
        set(PENDING_DEPTH, FRAME);
        set(PENDING_CHAIN, record(0));
        set(PENDING_CHAIN + 8, 0x200);
        set(CHAIN_END, 16);
        set(JUMPER, record(1));
        set(JUMPER_SP, 0x1f0);
        jumper_in_order(memory, &area).unwrap();
        assert_eq!(get(JUMPER), 0);
        assert_eq!(get(CHAIN_END), 32);
        assert_eq!(
            [get(PENDING_CHAIN + 16), get(PENDING_CHAIN + 24)],
            [record(1), 0x1f0]
        );
        let words = settle(memory, &area).unwrap();
        assert_eq!(words, [20, 1, 0x200, 21, 1, 0x1f0]);
        // A run still in `JUMPER` when the tracer settles comes last.
        set(JUMPER, record(1));
        set(JUMPER_SP, 0x1e0);
        assert_eq!(settle(memory, &area).unwrap(), [21, 1, 0x1e0]);
        assert_eq!(memory.read_u64(record(1) + 8).unwrap(), 1);
        // A full chain is an error, not a lost run.
        set(CHAIN_END, 16 * CHAIN);
        set(JUMPER, record(0));
        assert!(jumper_in_order(memory, &area).is_err());
    }

    /// A frame's word 8 is a place in the chain (16 bytes a run), plus
    /// the bit saying whether the call's runs stay when it is over: the
    /// bit is below every place.
    #[test]
    fn a_frame_s_place_in_the_chain_has_room_for_what_becomes_of_its_runs() {
        assert_eq!(FinishedRuns::Dropped as u64, 0);
        assert!((FinishedRuns::Kept as u64) < 16);
        assert_eq!(LAST_APPEND % 16, 0);
    }

    #[test]
    fn repeats_are_reported_as_the_runs_were_counted() {
        assert_eq!(Counted::Never.repeat(), None);
        assert_eq!(Counted::Cached.repeat(), Some(Repeat::Again));
        assert_eq!(Counted::Calls.repeat(), Some(Repeat::Calls));
        assert_eq!(Counted::Returns.repeat(), Some(Repeat::InContext));
        assert_eq!(Counted::Callee.repeat(), Some(Repeat::InContext));
        // A block that calls is a pending call's callee only with its own
        // call pending too; one that returns runs counted right after a
        // pending call's return only when an outer call stays pending.
        let calls = Counted::Calls;
        assert_eq!(calls.as_callee(), AsCallee::Calling);
        assert_eq!(Counted::Never.as_callee(), AsCallee::No);
        assert_eq!(Counted::Returns.after_return(), AfterReturn::Nested);
        assert_eq!(Counted::Cached.as_callee(), AsCallee::Yes);
        assert_eq!(Counted::Cached.after_return(), AfterReturn::Yes);
        // A tail jump's runs each jump on, as a call: counted so, as a
        // callee's first block or a jump's target, and after a return
        // while an outer call stays pending.
        let tail = Counted::Tail;
        assert_eq!(tail.repeat(), Some(Repeat::Calls));
        assert_eq!(tail.as_callee(), AsCallee::Yes);
        assert_eq!(tail.after_return(), AfterReturn::Nested);
        assert_eq!(Counted::Dispatch.after_return(), AfterReturn::No);
    }

    /// A recursion two deep, run through the resume routine: the outer
    /// level's call made pending keeps in its frame the segment and the
    /// record its return is to count in, from the call's cache entry;
    /// the inner level then changes that cache entry (the same call, in
    /// the next segment), and the outer level's return still counts its
    /// run in the record its frame kept, and pops the frame.
    #[test]
    fn a_pending_call_s_return_counts_in_the_record_its_frame_kept() {
        std::thread::spawn(|| {
            use super::super::quiet::{CALL_CACHE_BYTES, DATA, FRESH_ENTRY};
            use super::super::running::Running;
            let running = Running::new();
            let (calling, returned_to) = (3u32, 4u32);
            let (outer, inner) = (0x10_0008u64, 0x10_0010u64);
            let call_record = Box::new([u64::from(calling), 1]);
            let return_record = Box::new([u64::from(returned_to), 1]);
            let inner_record = Box::new([u64::from(returned_to), 1]);
            let at = |words: &[u64; 2]| words.as_ptr() as u64;
            let read = |words: &[u64; 2]| unsafe { std::ptr::read_volatile(&words[1]) };
            let cache = Area::QUIET_BASE + CALL_CACHE_BYTES * u64::from(calling);
            let runs_entry = |segment: u64, id: u32| {
                let index = (segment * 8 + u64::from(super::super::quiet::id_part(id))) & 0xffff;
                Area::RUNS_BASE + 16 * index
            };
            // Translation `id`'s header at `entry`: its data word, and its
            // body and fresh entries jumping back to the test.
            let header = |bytes: &mut Vec<u8>, base: u64, entry: u64, id: u32, counted, back| {
                let word = data_word(counted, id);
                let offset = (entry - DATA - base) as usize;
                bytes[offset..offset + 8].copy_from_slice(&word);
                for from in [entry - super::super::quiet::BODY_ENTRY, entry - FRESH_ENTRY] {
                    let jump = Instruction::with_branch(Code::Jmp_rel32_64, back).unwrap();
                    let (code, _) = super::super::encode::encode(&[jump], from).unwrap();
                    let offset = (from - base) as usize;
                    bytes[offset..offset + code.len()].copy_from_slice(&code);
                }
            };
            // Runs the routine's entry `which` (of the routine at `at` +
            // 0x200) for the translation whose entry is `entry`.
            let run = |which: fn(&RuleRoutine, u64) -> u64, entry_of: fn(u64) -> u64| {
                running.call(|base, back| {
                    let mut bytes = vec![0xcc; 0x200];
                    let routine = resume_routine(base + 0x200, base + 0x180).unwrap();
                    header(&mut bytes, base, base + 0x80, calling, Counted::Calls, back);
                    header(
                        &mut bytes,
                        base,
                        base + 0x100,
                        returned_to,
                        Counted::Returns,
                        back,
                    );
                    let to_back = Instruction::with_branch(Code::Jmp_rel32_64, back).unwrap();
                    let (code, _) = super::super::encode::encode(&[to_back], base + 0x180).unwrap();
                    bytes[0x180..0x180 + code.len()].copy_from_slice(&code);
                    let stub = [
                        Instruction::with2(Code::Mov_r64_imm64, Register::RAX, entry_of(base))
                            .unwrap(),
                        Instruction::with_branch(Code::Jmp_rel32_64, which(&routine, base + 0x200))
                            .unwrap(),
                    ];
                    let (code, _) = super::super::encode::encode(&stub, base).unwrap();
                    bytes[..code.len()].copy_from_slice(&code);
                    bytes.extend_from_slice(&routine.bytes);
                    bytes
                })
            };
            // An outer call pending (its frame's run first in the chain).
            running.set(SEGMENT, outer);
            running.set(PENDING_DEPTH, FRAME);
            running.set(PENDING_FRAMES + 8, 0);
            running.set(CHAIN_END, 16);
            running.set(PENDING_CHAIN, at(&call_record));
            // The calling block's call, last made from this segment, its
            // return counted in `return_record`; its record in the segment.
            for (word, value) in [
                (0, outer),
                (8, inner),
                (16, outer),
                (24, at(&return_record)),
            ] {
                running.set(cache + word, value);
            }
            running.set(runs_entry(outer, calling), outer);
            running.set(runs_entry(outer, calling) + 8, at(&call_record));
            run(|routine, _| routine.entries.calling, |base| base + 0x80);
            assert_eq!(read(&call_record), 2, "the calling run counted");
            assert_eq!(running.get(PENDING_DEPTH), 2 * FRAME);
            assert_eq!(running.get(PENDING_FRAMES + FRAME + 16), outer);
            assert_eq!(running.get(PENDING_FRAMES + FRAME + 24), at(&return_record));
            // The inner level's run of the same call, from the next segment.
            for (word, value) in [(0, inner), (16, inner), (24, at(&inner_record))] {
                running.set(cache + word, value);
            }
            // The outer level's return, to a block ending in `ret`.
            running.set(RETURNED, cache);
            run(|_, routine| routine, |base| base + 0x100);
            assert_eq!(read(&return_record), 2, "the returned-to run counted");
            assert_eq!(read(&inner_record), 1);
            assert_eq!(running.get(RECORD), at(&return_record));
            assert_eq!(running.get(PENDING_DEPTH), FRAME, "its frame popped");
            assert_eq!(running.get(RETURNED), 0);
        })
        .join()
        .unwrap();
    }
}
