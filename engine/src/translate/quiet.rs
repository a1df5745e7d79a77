//! Quiet runs (`RunOptions::quiet_runs`): the runs of a block that keep
//! the thread's context are counted in the tracee, in the record of the
//! block's first run since the context last could have changed, instead
//! of each appending a record.
//!
//! A thread's runs fall into segments: a segment starts at every run
//! that arrives at its block other than by a quiet exit or an indirect
//! jump (a call, a return, a jump the sink does not call quiet, the
//! tracer sending the thread on), and at a quiet exit or indirect jump
//! into another of the sink's regions ([`crate::Place`]) or with the
//! stack pointer above the segment's (where its first record had it) or
//! more than 64 KiB below it. Within one segment the sink's context stays
//! as it was (the sink's rule: a jump within a region to a block that
//! starts no function keeps it when the stack pointer is not above where
//! it was at the last block reported in order, [`crate::EventSink::place`];
//! every record of the segment has its stack pointer at or below the
//! first's), so it need not see the runs in order: a block's second and
//! later runs in a segment add one to the run count of its record in the
//! segment.
//!
//! The thread's area holds the segment's number (`SEGMENT`, unique in the
//! thread's life: the tracee's own count in `NEXT_SEGMENT`, the tracer's
//! numbers from `EPOCHS`, above all of them), its region
//! (`SEGMENT_REGION`) and its stack pointer (`SEGMENT_SP`), and a table
//! of records (`Area::RUNS_BASE`, [`RUNS_ENTRIES`] entries, indexed by
//! segment and translation, [`SEGMENT_STRIDE`]): a segment and the
//! address of a record of the translation in it, which the quiet path
//! trusts when the segment is the thread's and the record's number the
//! translation's (another pair may have taken the entry since). Every
//! translation has
//!
//! - its entry ([`entry`]): a new segment (number, stack pointer,
//!   region), then the record (label `FRESH`: first the records of a
//!   pending call, `pending`), the shared steps by the region's record
//!   routine (`records`);
//! - its fresh entry, a `jmp` in its header ([`FRESH_ENTRY`] bytes before
//!   the entry) to the writing of its record (an entry of the record
//!   routine, or label [`WRITE`] for a record of another layout), where
//!   the routine writing a pending call's records goes back; it is
//!   entered with rax the translation's entry;
//! - its resume entry (below; its path starts with the check of code
//!   that may change unseen, `translator`);
//!
//! and one of a block quiet exits may lead to (one with a place that
//! starts no function) also has
//!
//! - its quiet entry, a `jmp` at the end of its header to the quiet path
//!   ([`quiet_path`], after the block's end; first the check of code that
//!   may change unseen, `translator`), where quiet exits and the
//!   lookup routine of indirect jumps lead: in another region or stack
//!   pointer than the segment's, to the entry's new segment (label
//!   `BUMP`); in the segment, when the table holds a record of the
//!   translation in this segment, one more run there, else a record
//!   (label `FRESH`, which enters it in the table). (A translation
//!   without a quiet path has a `jmp` to its entry there.)
//!
//! A call keeps the caller's segment on the thread's stack of calls
//! ([`call_entry`]: segment, stack pointer before the call, return
//! address, its cache entry and how far the segment's stack pointer is
//! above the thread's; a ring in the area) and chooses its callee's
//! segment itself:
//! when the caller's segment (and for an indirect call the target) is the
//! one of the call's last run, the callee's segment of then (the calling
//! translation's cache entry and [`call_target`] keep them); else, when
//! the thread's table of transfers holds the callee's segment of an
//! earlier run of the call from this segment (to this target), that one
//! (an entry per segment and translation, direct-mapped, its words
//! compared: a function called from several segments calls on in the
//! same segments from each); else a new one, kept in both. A jump into
//! another function chooses its target's segment so too
//! ([`relay_entry`]). The call enters the callee at its resume entry, a `jmp` in its
//! header before the quiet entry ([`RESUME_ENTRY`] bytes before the
//! entry; indirect calls through the lookup routine of calls) to the
//! resume path ([`resume_path`]): the segment's region the block's, then
//! a record, with no new segment (or, for a pending call, the run counted
//! in an earlier record, `pending`). A callee in the segment of an earlier
//! call runs in the context it had then (same caller's context, same
//! call, same callee), and its runs count in the records of that call,
//! which the tracer has not read (the caller's segment would have ended
//! with the buffer half): the sink gets the same sums, a call's cost
//! counted in an earlier call of the same arc.
//!
//! A return checks the stack of calls in the lookup routine of returns
//! ([`return_check`]): when the top entry (after dropping those of calls
//! left without their return, whose stack pointer is below the thread's)
//! has the thread's stack pointer and the return's target, the caller's
//! segment goes on with the stack pointer it had at the call (when that
//! was at most 64 KiB above the thread's, else the thread's: the caller
//! may pop what it pushed for the call and stay in its segment), and the
//! return enters
//! the target at its resume entry. The sink then has the return in order
//! and, with it, the context the caller had at the call: later runs of
//! the caller's blocks count in their records of before the call. (A
//! pending call's return counts its run instead, `pending`.)
//!
//! Only a block left through quiet exits alone (a conditional or direct
//! jump, or the block-length limit, with no words recorded) counts its
//! runs so ("cached"): the record of a block left otherwise must come
//! right before the next block's, whose arrival the replay computes from
//! it (but in a pending call, whose records come in order when it needs
//! them, and a block left through an indirect jump, whose run joins them
//! when its target needs it, `pending`). Tests are `not`/`lea`/`jrcxz`,
//! flags untouched (but `cmp` in the quiet path of a block that gives
//! every status flag a value before it reads one, `flags`); rax and rcx
//! are saved in the thread's
//! slots (a record store that faults in a guard page restarts the
//! translation at its entry, see `stops`). The tracer starts a new
//! segment and empties the stack of calls whenever it empties or hands
//! off a buffer half (`Area`), so no run is ever counted in a record it
//! has read.

use std::sync::atomic::{AtomicU64, Ordering};

use iced_x86::{Code, Instruction, MemoryOperand, Register};

use super::area::{
    slot, Area, CHAIN_END, JUMPER, JUMPER_SP, LIVE_CALLS, NEXT_SEGMENT, PENDING_DEPTH, RECORD,
    RELAYING, RESUME, RETURNED, RETURN_CACHE, SAVE_RAX, SAVE_RDX, SEGMENT, SEGMENT_REGION,
    SEGMENT_SP, TARGET, TEMP, TOP_CALL,
};
use super::emit::Emit;
use super::layout::COUNTERS;
use super::pending::{Counted, RuleEntries};
use super::records::RecordEntries;
use super::translator::{advance_cursor, write_record, RecordLayout, Refusal, SLOT_LEN};

/// Label of the entry's new segment.
const BUMP: u64 = 5;
/// Label of the record's writing.
const FRESH: u64 = 6;
/// Label of the quiet path.
const QUIET: u64 = 7;
/// Label of the quiet path's test of the stack pointer.
const TEST_STACK: u64 = 8;
/// Label of the quiet path's test of the table's entry's segment.
const TEST_SEGMENT: u64 = 9;
/// Label of the record's writing once no call is pending (`pending`),
/// where the translation's fresh entry goes on.
pub(super) const WRITE: u64 = 0x900;
/// Label of the resume path.
const RESUME_PATH: u64 = 11;
/// Labels of a call's choice of its callee's segment: the caller's
/// segment is the one of the call's last run, and so is the target.
const SAME_CALLER: u64 = 12;
const SAME_TARGET: u64 = 13;
/// Label of the lookup in the table of transfers.
const LOOKUP: u64 = 18;
/// Label of a new segment once a jump into another function to another
/// target has forgotten its call's caller's segment.
const FORGOTTEN: u64 = 19;
/// Label past the move of a call's cache entry to its second
/// ([`keep_second_entry`]) when its caller's segment was forgotten.
const FORGOTTEN_CALLER: u64 = 0x5a0;
/// Labels of the tests of an entry of the table of transfers, one each.
const TRANSFER_TESTS: u64 = 0x40;
/// Labels of the tests that no call is pending, before an indirect
/// transfer's lookup.
const NONE_PENDING: u64 = 0x48;
/// Label of the lookup of an indirect call while calls are pending
/// ([`rehome`]), and of the lookup's end.
const REHOME: u64 = 0x4a;
const FOUND: u64 = 0x4b;
/// Labels of that lookup's tests, one each.
const REHOME_TESTS: u64 = 0x50;
/// Labels of [`rehome`]'s steps.
const REHOME_STEPS: u64 = 0x58;
/// Labels of [`keep_calling`].
const KEEP_CALLING: u64 = 0x60;
/// Label past the forgetting of a calling record ([`same_target`]).
const OWN_RECORD: u64 = 0x63;
/// Label of a new segment for a pending call's callee, left out of the
/// table of transfers ([`rehome`]).
const UNLISTED: u64 = 0x64;
/// Label of a new segment for the callee.
const NEW: u64 = 14;
/// Label of the callee's segment chosen.
const CHOSEN: u64 = 15;
/// Labels of the return check (in the lookup routine).
const CHECK_CALL: u64 = 20;
const DROP_CALL: u64 = 21;
const CHECKED_CALLS: u64 = 22;
/// Labels of the return check's keeping of the call's cache entry.
const NOT_PENDING: u64 = 23;
const KEPT_CACHE: u64 = 24;
/// Label of the return check's stack pointer of the caller's segment.
const SEGMENT_SP_KEPT: u64 = 25;

/// Bytes before a translation's entry of its quiet entry, the last `jmp
/// rel32` of its header.
pub(super) const QUIET_ENTRY: u64 = SLOT_LEN;
/// Bytes before a translation's entry of its resume entry, the `jmp rel32`
/// before the quiet entry.
pub(super) const RESUME_ENTRY: u64 = QUIET_ENTRY + SLOT_LEN;
/// Bytes before a translation's entry of its fresh entry, the `jmp rel32`
/// before the resume entry: to the writing of its record (label
/// [`WRITE`]), where the routine writing a pending call's records
/// returns (`pending`).
pub(super) const FRESH_ENTRY: u64 = RESUME_ENTRY + SLOT_LEN;
/// Bytes before a translation's entry of its body entry, the `jmp rel32`
/// before the fresh entry: to its first instruction, where the resume
/// routine goes on after counting a run (`pending`).
pub(super) const BODY_ENTRY: u64 = FRESH_ENTRY + SLOT_LEN;
/// Bytes before a translation's entry of its data word for the resume
/// routine (`pending::data_word`), before the body entry.
pub(super) const DATA: u64 = BODY_ENTRY + 8;
/// Bytes before a translation's entry of its place word, before the data
/// word: the sink's region of its quiet path (-1: it has none), for the
/// lookup routine of jumps (`pending`); the bytes of the header that
/// quiet runs take.
pub(super) const PLACE: u64 = DATA + 8;
/// Entries of the stack of calls a return looks at, at most.
const CHECKS: i32 = 8;

/// Segment numbers the tracer gives (`Area::start_half`), above every
/// number a tracee counts to.
static EPOCHS: AtomicU64 = AtomicU64::new(1 << 63);

/// A segment number no thread had (they move on by [`SEGMENT_STRIDE`]).
pub(super) fn new_epoch() -> u64 {
    EPOCHS.fetch_add(SEGMENT_STRIDE, Ordering::Relaxed)
}

/// The offset in a thread's area of the cache entry of translation
/// `id`'s call: the caller's segment at its last run, the callee's
/// segment then, and the segment and address of the record of the run
/// its return went on to (four words: `pending`); for a jump into another
/// function ([`relay_entry`]), the first two ([`choose_segment`]). `None`
/// past the entries an area has. [`SECOND_ENTRY`] bytes after it, the
/// entry of the last run before it from another caller's segment.
pub(super) fn call_cache(id: u32) -> Option<u64> {
    (u64::from(id) < CALL_CACHES).then(|| Area::QUIET_BASE + CALL_CACHE_BYTES * u64::from(id))
}

/// Translations with cache entries of their call ([`call_cache`]): the
/// first half of those with counters, in the area's room for four words
/// per counter.
pub(super) const CALL_CACHES: u64 = COUNTERS / 2;

/// Bytes from a translation's cache entry of its call ([`call_cache`]) to
/// its second: a run from another caller's segment than the last run's
/// moves the last run's entry there ([`choose_segment`]), and a pending
/// call (`pending`) of a run from the second entry's segment swaps the
/// two. So a function called in turn from two segments (two callers, two
/// call sites) keeps a pending call of each of them.
pub(super) const SECOND_ENTRY: u64 = 32;

/// Bytes of a translation's two cache entries of its call.
pub(super) const CALL_CACHE_BYTES: u64 = 2 * SECOND_ENTRY;

/// Entries of a thread's table of transfers ([`Area::TRANSFERS_BASE`]),
/// indexed by 16 bits (a `movzx`).
pub(super) const TRANSFER_ENTRIES: u64 = 1 << 16;

/// Bytes of an entry of the table of transfers: its six
/// [`TransferWord`]s.
pub(super) const TRANSFER_BYTES: u64 = 48;

/// The scale of the register holding an entry's place
/// ([`transfer_place_of`]) in the address of one of its words: the place
/// is the entry's offset in the table divided by it.
const PLACE_SCALE: u32 = 2;
// [`transfer_place_of`] multiplies by 3, then by 8.
const _: () = assert!(TRANSFER_BYTES / PLACE_SCALE as u64 == 3 * 8);

/// A word of an entry of the table of transfers: the segment the transfer
/// was made from, its translation, its target (an indirect one's; 0 for
/// a direct transfer), the segment it chose, for an indirect call a
/// record of the calling block in the segment whose run made that call
/// (0: none known; [`rehome`]), and for a direct call the record its last
/// normal return from the segment went on to write (0: none known), as
/// the call's cache entry keeps it (`pending`: a call made from more
/// segments in turn than its two cache entries hold becomes pending from
/// this entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TransferWord {
    Segment = 0,
    Translation = 1,
    Target = 2,
    Chosen = 3,
    Calling = 4,
    Returned = 5,
}

/// rcx = the place ([`transfer_place_of`]) in the table of transfers of `callee`'s
/// entry for the segment whose number is in rdx (and its indirect target
/// in rax): the segment's number times 8 plus the [`id_part`] of the
/// translation's number (plus the target), 16 bits of it (`lea`, `movzx`:
/// flags untouched). The target spreads an indirect call's targets from
/// one segment over the table.
fn transfer_index(code: &mut Emit, callee: Callee) -> Result<(), Refusal> {
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    // iced's size of a displacement: 8 beside a base register in 64-bit
    // code, 4 without one.
    let (base, displacement_size) = match callee.target {
        Some(_) => (rax, 8),
        None => (Register::None, 4),
    };
    let part = i64::from(id_part(callee.id));
    let sum = MemoryOperand::new(base, rdx, 8, part, displacement_size, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, rcx, sum))?;
    transfer_place_of(code, rcx)
}

/// `index` = the place in the table of transfers of the entry whose index
/// is the low 16 bits of `index`: [`TRANSFER_BYTES`] / [`PLACE_SCALE`]
/// (24) times that index (`movzx`, `lea`: flags untouched).
fn transfer_place_of(code: &mut Emit, index: Register) -> Result<(), Refusal> {
    let (dword, word) = match index {
        Register::RCX => (Register::ECX, Register::CX),
        Register::RSI => (Register::ESI, Register::SI),
        other => return Err(format!("no index of the table of transfers in {other:?}")),
    };
    code.push(Instruction::with2(Code::Movzx_r32_rm16, dword, word))?;
    let thrice = MemoryOperand::new(index, index, 2, 0, 0, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, index, thrice))?;
    let times_eight = MemoryOperand::new(Register::None, index, 8, 0, 4, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, index, times_eight))
}

/// `index` = the place ([`transfer_place_of`]) in the table of transfers of the
/// entry of the direct transfer of the translation whose number is in
/// `id` from the segment whose number is in `segment`, as
/// [`transfer_index`] computes it (`lea`, `movzx`: flags untouched).
pub(super) fn transfer_index_in(
    code: &mut Emit,
    index: Register,
    id: Register,
    segment: Register,
) -> Result<(), Refusal> {
    let sum = MemoryOperand::new(id, segment, 8, 0, 0, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, index, sum))?;
    transfer_place_of(code, index)
}

/// That word of the entry of the table of transfers whose place
/// ([`transfer_place_of`]) is in `index` ([`transfer_index`],
/// [`transfer_index_in`]), in the thread's area.
pub(super) fn transfer_word_in(index: Register, word: TransferWord) -> MemoryOperand {
    transfer_word_at(index, word, Register::GS)
}

/// That word of the entry of the table of transfers whose place is in
/// `index`, at its offset in the area (`segment` [`Register::None`]) or
/// in the thread's area (`segment` [`Register::GS`]).
fn transfer_word_at(index: Register, word: TransferWord, segment: Register) -> MemoryOperand {
    let offset = Area::TRANSFERS_BASE + 8 * word as u64;
    MemoryOperand::new(
        Register::None,
        index,
        PLACE_SCALE,
        offset as i64,
        4,
        false,
        segment,
    )
}

/// That word of the entry of the table of transfers whose place is in rcx
/// ([`transfer_index`]), in the thread's area.
fn transfer_word(word: TransferWord) -> MemoryOperand {
    transfer_word_in(Register::RCX, word)
}

/// In [`choose_segment`] (the thread's segment in rdx, an indirect target
/// in rax, rcx free): on when the table of transfers holds an entry for
/// `callee`'s transfer from this segment (to this target), rcx then its
/// index ([`transfer_index`]), else on to `missed`; for an indirect
/// transfer, only while no call is pending, or (a jump into another
/// function, `forget` [`Forget::Caller`]) to its last run's target, or
/// (a call) when the pending call is the calling block's own and its run
/// can move to a record of a run that made this call ([`rehome`]).
fn transfer_lookup(
    code: &mut Emit,
    callee: Callee,
    forget: Forget,
    missed: u64,
) -> Result<(), Refusal> {
    let (rax, rcx) = (Register::RAX, Register::RCX);
    let rehomes = keeps_calling(callee, forget);
    if let Some(last_target) = callee.target {
        // A run counted in an earlier record while calls are pending
        // (`pending`) says it made that record's call: an indirect
        // transfer then takes a new segment, where its target's first
        // block writes the pending runs out in order, unless the run
        // moves to a record of a run that made this call; but a jump
        // into another function (a PLT stub's) to its last run's target.
        let (none_deep, lookup) = (NONE_PENDING, NONE_PENDING + 1);
        if forget == Forget::Caller {
            jump_if_equal(code, Value::Register(rax), last_target, lookup)?;
        }
        code.load(rcx, PENDING_DEPTH)?;
        code.jump(Code::Jrcxz_rel8_64, none_deep)?;
        code.jump(Code::Jmp_rel32_64, if rehomes { REHOME } else { missed })?;
        code.label(none_deep);
        code.load(rcx, CHAIN_END)?;
        code.jump(Code::Jrcxz_rel8_64, lookup)?;
        code.jump(Code::Jmp_rel32_64, missed)?;
        code.label(lookup);
    }
    transfer_tests(code, callee, missed, TRANSFER_TESTS)?;
    if rehomes {
        code.jump(Code::Jmp_rel32_64, FOUND)?;
        code.label(REHOME);
        transfer_tests(code, callee, missed, REHOME_TESTS)?;
        rehome(code, callee, UNLISTED)?;
        code.label(FOUND);
    }
    Ok(())
}

/// Whether `callee`'s transfer keeps in its entries of the table of
/// transfers a record of the calling block whose run made it
/// ([`TransferWord::Calling`]): an indirect call's.
fn keeps_calling(callee: Callee, forget: Forget) -> bool {
    callee.target.is_some() && forget == Forget::CallingRecord
}

/// In [`transfer_lookup`] (the thread's segment in rdx, an indirect
/// target in rax): on when the table of transfers holds an entry for
/// `callee`'s transfer from this segment (to this target), rcx then its
/// index, else on to `missed`; `labels` and the two after it are this
/// use's.
fn transfer_tests(
    code: &mut Emit,
    callee: Callee,
    missed: u64,
    labels: u64,
) -> Result<(), Refusal> {
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    let mut tests = vec![
        (TransferWord::Segment, Value::Register(rdx)),
        (TransferWord::Translation, Value::Number(callee.id)),
    ];
    if callee.target.is_some() {
        tests.push((TransferWord::Target, Value::Register(rax)));
    }
    for (index, (word, value)) in tests.into_iter().enumerate() {
        let equal = labels + index as u64;
        transfer_index(code, callee)?;
        code.push(Instruction::with2(
            Code::Mov_r64_rm64,
            rcx,
            transfer_word(word),
        ))?;
        jump_if_rcx_equal(code, value, equal)?;
        code.jump(Code::Jmp_rel32_64, missed)?;
        code.label(equal);
    }
    transfer_index(code, callee)
}

/// In [`transfer_lookup`], an indirect call whose target is not its last
/// run's while calls are pending (rcx the index of the entry of the table
/// of transfers for the call from the thread's segment to this target,
/// the target in rax): the innermost pending call must be the calling
/// block's own, its run counted in the record of the segment the chain
/// ends with (`pending`), which says that it made the last run's call.
/// When the entry keeps a record of the block whose run made this call
/// ([`TransferWord::Calling`]), the run moves there: one run fewer in the
/// one, one more in the other, which the chain and the `RECORD` slot then
/// name, and which the table of records holds for the block in the
/// segment; so the sink counts it on the arc of this call, whose callee's
/// records of the segment the entry chose hold its costs. Else on to
/// `unlisted` (a new segment, left out of the table: the pending runs are
/// written out in order), the routine that writes them asked (the `LEARN`
/// slot) to keep the record it writes for this run in the entry when the
/// entry kept none of the block's. Ends as the lookup does: rdx the
/// thread's segment, rcx the entry's index; flags untouched.
fn rehome(code: &mut Emit, callee: Callee, unlisted: u64) -> Result<(), Refusal> {
    use super::area::{LEARN, PENDING_CHAIN, REHOMED};
    use super::pending::area_word;
    let (rcx, rdx) = (Register::RCX, Register::RDX);
    let (moves, learn) = (REHOME_STEPS, REHOME_STEPS + 1);
    // rcx = the number of the record at rcx minus the block's, 0 when
    // they are equal.
    let minus_id = |code: &mut Emit| -> Result<(), Refusal> {
        code.push(Instruction::with2(
            Code::Mov_r64_rm64,
            rcx,
            MemoryOperand::with_base(rcx),
        ))?;
        code.push(Instruction::with1(Code::Not_rm64, rcx))?;
        code.lea(rcx, rcx, i64::from(callee.id) + 1)
    };
    // `jrcxz` to the label after a jump to `otherwise`.
    let zero_or = |code: &mut Emit, label: u64, otherwise: u64| -> Result<(), Refusal> {
        code.jump(Code::Jrcxz_rel8_64, label)?;
        code.jump(Code::Jmp_rel32_64, otherwise)?;
        code.label(label);
        Ok(())
    };
    code.save(REHOMED, rcx)?;
    // The innermost pending call's calling run is the chain's last (its
    // frame's place, plus 1 when its runs stay in the chain), counted in
    // a record of the block.
    code.load(rdx, CHAIN_END)?;
    code.load(rcx, PENDING_DEPTH)?;
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        rcx,
        super::pending::innermost_frame(rcx, 8),
    ))?;
    code.push(Instruction::with1(Code::Not_rm64, rcx))?;
    let sum = MemoryOperand::new(rcx, rdx, 1, -15, 1, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, rcx, sum))?;
    code.jump(Code::Jrcxz_rel8_64, REHOME_STEPS + 2)?;
    code.lea(rcx, rcx, 1)?;
    zero_or(code, REHOME_STEPS + 2, unlisted)?;
    let last_run = area_word(rdx, PENDING_CHAIN as i64 - 16);
    code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, last_run))?;
    minus_id(code)?;
    zero_or(code, REHOME_STEPS + 3, unlisted)?;
    // A record of the block whose run made this call, else the one the
    // routine writing the pending runs out writes for this run, learnt.
    code.load(rcx, REHOMED)?;
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        rcx,
        transfer_word(TransferWord::Calling),
    ))?;
    code.jump(Code::Jrcxz_rel8_64, learn)?;
    code.save(REHOMED, rcx)?;
    minus_id(code)?;
    code.jump(Code::Jrcxz_rel8_64, moves)?;
    code.label(learn);
    code.load(rdx, SEGMENT)?;
    transfer_index(code, callee)?;
    let word = transfer_word_at(rcx, TransferWord::Calling, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, rcx, word))?;
    code.save(LEARN, rcx)?;
    code.jump(Code::Jmp_rel32_64, unlisted)?;
    code.label(moves);
    // One run fewer there, one more in the kept record.
    let runs = |base: Register| MemoryOperand::with_base_displ(base, 8);
    let add_run = |code: &mut Emit, delta: i64| -> Result<(), Refusal> {
        code.push(Instruction::with2(Code::Mov_r64_rm64, rdx, runs(rcx)))?;
        code.lea(rdx, rdx, delta)?;
        code.push(Instruction::with2(Code::Mov_rm64_r64, runs(rcx), rdx))
    };
    code.load(rdx, CHAIN_END)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, last_run))?;
    add_run(code, -1)?;
    code.load(rcx, REHOMED)?;
    add_run(code, 1)?;
    code.save(RECORD, rcx)?;
    code.load(rdx, CHAIN_END)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, last_run, rcx))?;
    code.load(rdx, SEGMENT)?;
    runs_index(code, rdx, callee.id)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        runs_word(RunsWord::Segment),
        rdx,
    ))?;
    code.load(rdx, REHOMED)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        runs_word(RunsWord::Record),
        rdx,
    ))?;
    code.load(rdx, SEGMENT)?;
    transfer_index(code, callee)
}

/// In [`choose_segment`]'s new segment (the thread's segment in rdx, an
/// indirect target in rax): the entry of the table of transfers for
/// `callee`'s transfer from this segment made, but for the segment
/// chosen, which [`transfer_chosen`] writes; rcx keeps its index.
fn transfer_enter(code: &mut Emit, callee: Callee, forget: Forget) -> Result<(), Refusal> {
    let (rax, rdx) = (Register::RAX, Register::RDX);
    if keeps_calling(callee, forget) {
        keep_calling(code, callee)?;
    }
    transfer_index(code, callee)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        transfer_word(TransferWord::Segment),
        rdx,
    ))?;
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        transfer_word(TransferWord::Translation),
        callee.id as i32,
    ))?;
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        transfer_word(TransferWord::Returned),
        0,
    ))?;
    match callee.target {
        Some(_) => code.push(Instruction::with2(
            Code::Mov_rm64_r64,
            transfer_word(TransferWord::Target),
            rax,
        )),
        None => code.push(Instruction::with2(
            Code::Mov_rm64_imm32,
            transfer_word(TransferWord::Target),
            0,
        )),
    }
}

/// In [`transfer_enter`], before the entry is written (the thread's
/// segment in rdx, an indirect target in rax): the entry's record of the
/// calling block's run ([`TransferWord::Calling`]) the run's own while no
/// call is pending (then its run wrote its record), else none (its run
/// is counted in a record of a run that made another call, and the new
/// segment writes it out); rcx lost.
fn keep_calling(code: &mut Emit, callee: Callee) -> Result<(), Refusal> {
    let (rcx, rdx) = (Register::RCX, Register::RDX);
    transfer_index(code, callee)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        transfer_word(TransferWord::Calling),
        0,
    ))?;
    code.load(rcx, PENDING_DEPTH)?;
    code.jump(Code::Jrcxz_rel8_64, KEEP_CALLING)?;
    code.jump(Code::Jmp_rel32_64, KEEP_CALLING + 2)?;
    code.label(KEEP_CALLING);
    code.load(rcx, CHAIN_END)?;
    code.jump(Code::Jrcxz_rel8_64, KEEP_CALLING + 1)?;
    code.jump(Code::Jmp_rel32_64, KEEP_CALLING + 2)?;
    code.label(KEEP_CALLING + 1);
    transfer_index(code, callee)?;
    calling_is_the_run_s(code)?;
    code.load(rdx, SEGMENT)?;
    code.label(KEEP_CALLING + 2);
    Ok(())
}

/// The word of the entry of the table of transfers whose index is in rcx
/// that keeps a record of the calling block's run
/// ([`TransferWord::Calling`]): the run's record (the `RECORD` slot); rdx
/// lost.
fn calling_is_the_run_s(code: &mut Emit) -> Result<(), Refusal> {
    code.load(Register::RDX, RECORD)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        transfer_word(TransferWord::Calling),
        Register::RDX,
    ))
}

/// After [`transfer_enter`] (rcx its index): the segment chosen, in rdx,
/// written to the entry.
fn transfer_chosen(code: &mut Emit) -> Result<(), Refusal> {
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        transfer_word(TransferWord::Chosen),
        Register::RDX,
    ))
}

/// After [`transfer_lookup`] found the entry (rcx its index): rdx the
/// segment it chose.
fn transfer_found(code: &mut Emit) -> Result<(), Refusal> {
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        Register::RDX,
        transfer_word(TransferWord::Chosen),
    ))
}

/// Entries of a thread's table of records ([`Area::RUNS_BASE`]), indexed
/// by 16 bits.
pub(super) const RUNS_ENTRIES: u64 = 1 << 16;

/// What a segment's number moves on by, in the tracee and the tracer
/// ([`new_segment`], [`new_epoch`]): odd and large, so that the segments'
/// entries in the tables of records and of transfers (the number times 8
/// plus the translation's, 16 or 14 bits of it) lie far apart while one
/// segment's entries for translations made one after another (a
/// function's blocks, mostly) lie side by side, four to a cache line.
pub(super) const SEGMENT_STRIDE: u64 = 0x9e37;

/// Translation `id`'s part of its index in the tables of records and of
/// transfers ([`runs_index`], [`transfer_index`]): its low 16 bits (which
/// [`runs_index_of`] reads from the number in its data word).
pub(super) fn id_part(id: u32) -> u16 {
    (u64::from(id) % RUNS_ENTRIES) as u16
}

/// rcx = twice the index in the table of records of translation `id`'s
/// entry for the segment whose number is in `segment` (the index: the
/// segment's number times 8 plus [`id_part`] of `id`, 16 bits of it;
/// `lea`, `movzx`: flags untouched).
fn runs_index(code: &mut Emit, segment: Register, id: u32) -> Result<(), Refusal> {
    let part = id_part(id);
    let sum = MemoryOperand::new(
        Register::None,
        segment,
        8,
        part as i64,
        4,
        false,
        Register::None,
    );
    code.push(Instruction::with2(Code::Lea_r64_m, Register::RCX, sum))?;
    doubled_low_bits(code)
}

/// rcx = twice its low 16 bits (an index in the table of records, for
/// [`runs_word`]'s entries of two words); flags untouched.
fn doubled_low_bits(code: &mut Emit) -> Result<(), Refusal> {
    let low = Instruction::with2(Code::Movzx_r32_rm16, Register::ECX, Register::CX);
    code.push(low)?;
    let rcx = Register::RCX;
    let twice = MemoryOperand::new(rcx, rcx, 1, 0, 0, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, rcx, twice))
}

/// rcx = twice the index in the table of records of the translation
/// whose entry's address is in `entry` for the segment whose number is
/// in `segment`: as [`runs_index`], [`id_part`] read from the number in
/// the translation's data word (`pending::data_word`, little-endian: its
/// first two bytes).
pub(super) fn runs_index_of(
    code: &mut Emit,
    entry: Register,
    segment: Register,
) -> Result<(), Refusal> {
    let part = super::pending::data_of(entry, 0);
    code.push(Instruction::with2(
        Code::Movzx_r32_rm16,
        Register::ECX,
        part,
    ))?;
    let index = MemoryOperand::new(Register::RCX, segment, 8, 0, 8, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, Register::RCX, index))?;
    doubled_low_bits(code)
}

/// What an entry of the table of records holds.
#[derive(Clone, Copy, Debug)]
pub(super) enum RunsWord {
    /// The segment.
    Segment,
    /// The address of a record of the translation in it.
    Record,
}

/// That word of the entry of the table of records whose index, doubled,
/// is in rcx (each entry the segment, then the record's address: one
/// cache line holds both).
pub(super) fn runs_word(word: RunsWord) -> MemoryOperand {
    let array = match word {
        RunsWord::Segment => Area::RUNS_BASE,
        RunsWord::Record => Area::RUNS_BASE + 8,
    };
    MemoryOperand::new(
        Register::None,
        Register::RCX,
        8,
        array as i64,
        4,
        false,
        Register::GS,
    )
}

/// The record at `record` entered in the table of records for the segment
/// whose number is in `segment`, at the index in rcx.
pub(super) fn enter_record(
    code: &mut Emit,
    segment: Register,
    record: Register,
) -> Result<(), Refusal> {
    let entry = [(RunsWord::Segment, segment), (RunsWord::Record, record)];
    for (word, register) in entry {
        code.push(Instruction::with2(
            Code::Mov_rm64_r64,
            runs_word(word),
            register,
        ))?;
    }
    Ok(())
}

/// How a translation's entry and record look.
#[derive(Clone, Copy, Debug)]
pub(super) struct Record {
    /// Its record.
    pub layout: RecordLayout,
    /// Which of its runs may be counted in a record of it written before
    /// (`pending::Counted`); all but [`Counted::Never`] enter their
    /// record in the thread's table of records.
    pub counted: Counted,
    /// The sink's region of the block (`EventSink::place`), if it has one.
    pub region: Option<u32>,
    /// The translation's entry.
    pub entry: u64,
    /// The entries of the region's record routine (`records`).
    pub records: RecordEntries,
}

impl Record {
    /// The entry of the record routine that writes this record, when it
    /// writes records of its layout.
    pub fn written_by_routine(&self) -> Option<u64> {
        let in_table = self.counted != Counted::Never;
        self.records.writing(self.layout, in_table)
    }
}

/// What a quiet test compares with a slot.
#[derive(Clone, Copy, Debug)]
enum Value {
    /// A register.
    Register(Register),
    /// A number.
    Number(u32),
}

/// `into` = `from` minus rcx, flags untouched (`not rcx`, `lea`); rcx
/// is lost.
fn subtract_rcx(code: &mut Emit, from: Register, into: Register) -> Result<(), Refusal> {
    let rcx = Register::RCX;
    code.push(Instruction::with1(Code::Not_rm64, rcx))?;
    let sum = MemoryOperand::new(from, rcx, 1, 1, 1, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, into, sum))
}

/// rcx = `value` minus the slot at `offset`, flags untouched (`not`,
/// `lea`), then `jrcxz` to `equal`: on when they differ, rcx not the
/// program's.
fn jump_if_equal(code: &mut Emit, value: Value, offset: u64, equal: u64) -> Result<(), Refusal> {
    code.load(Register::RCX, offset)?;
    jump_if_rcx_equal(code, value, equal)
}

/// rcx = `value` minus rcx, flags untouched (`not`, `lea`), then `jrcxz`
/// to `equal`.
fn jump_if_rcx_equal(code: &mut Emit, value: Value, equal: u64) -> Result<(), Refusal> {
    let rcx = Register::RCX;
    match value {
        Value::Register(from) => subtract_rcx(code, from, rcx)?,
        Value::Number(number) => {
            code.push(Instruction::with1(Code::Not_rm64, rcx))?;
            code.lea(rcx, rcx, i64::from(number) + 1)?;
        }
    }
    code.jump(Code::Jrcxz_rel8_64, equal)
}

/// `register` = a new segment number, the thread's count moved on by
/// [`SEGMENT_STRIDE`].
pub(super) fn new_segment(code: &mut Emit, register: Register) -> Result<(), Refusal> {
    code.load(register, NEXT_SEGMENT)?;
    code.lea(register, register, SEGMENT_STRIDE as i64)?;
    code.save(NEXT_SEGMENT, register)
}

/// A jump to the record's writing (label [`FRESH`]), rax and rcx in
/// their slots.
fn to_fresh(code: &mut Emit) -> Result<(), Refusal> {
    code.jump(Code::Jmp_rel32_64, FRESH)
}

/// rax = the translation's `entry` (`lea`, relative to the instruction),
/// then a jump to `routine`, a routine of the region (rax and rcx in
/// their slots).
fn to_routine(code: &mut Emit, entry: u64, routine: u64) -> Result<(), Refusal> {
    let address = MemoryOperand::new(
        Register::RIP,
        Register::None,
        1,
        entry as i64,
        8,
        false,
        Register::None,
    );
    code.push(Instruction::with2(Code::Lea_r64_m, Register::RAX, address))?;
    code.jump(Code::Jmp_rel32_64, routine)
}

/// The entry: rax and rcx saved; (label [`BUMP`]) the segment's region
/// the block's, then a new segment by the region's record routine
/// (`records`), which goes on at label [`FRESH`]: the records of a
/// pending call first, then the fresh entry, whose `jmp` leads to the
/// writing of the record, by the routine for the layouts it has, else
/// here (label [`WRITE`], rax and rcx in their slots): the record
/// appended at the cursor (`write_record`), entered in the table of
/// records unless [`Counted::Never`], the cursor moved, rax back.
pub(super) fn entry(record: Record) -> Result<Vec<Instruction>, Refusal> {
    let (rax, rcx) = (Register::RAX, Register::RCX);
    let mut code = Emit::default();
    code.save(SAVE_RAX, rax)?;
    code.save(TEMP, rcx)?;
    code.label(BUMP);
    set_region(&mut code, record.region)?;
    to_routine(&mut code, record.entry, record.records.bump)?;
    code.label(FRESH);
    to_routine(&mut code, record.entry, record.records.fresh)?;
    if record.written_by_routine().is_some() {
        return Ok(code.list);
    }
    code.label(WRITE);
    code.load(rcx, TEMP)?;
    write_record(&mut code, record.layout)?;
    if record.counted != Counted::Never {
        let rdx = Register::RDX;
        code.save(TEMP, rcx)?;
        code.save(SAVE_RDX, rdx)?;
        code.load(rdx, SEGMENT)?;
        runs_index(&mut code, rdx, record.layout.id)?;
        enter_record(&mut code, rdx, rax)?;
        code.load(rdx, SAVE_RDX)?;
        code.load(rcx, TEMP)?;
    }
    advance_cursor(&mut code, record.layout.bytes)?;
    code.load(rax, SAVE_RAX)?;
    Ok(code.list)
}

/// With rax and rcx in their slots: when the thread's table of records
/// holds a record of translation `id` in the thread's segment (its entry
/// for them has the segment, and the record it points at the number),
/// one more run there (its address in rax and in the `RECORD` slot, for
/// a block that loops on itself), rcx and rax back and a jump to `body`;
/// else a record ([`to_fresh`]). With `flags` free, the tests are `cmp`.
/// With `jumper` (a block ending in an indirect jump) the counted run's
/// record and stack pointer are kept in `JUMPER` (`pending`).
fn count_run(
    code: &mut Emit,
    id: u32,
    body: u64,
    flags: Flags,
    jumper: bool,
) -> Result<(), Refusal> {
    let (rax, rcx) = (Register::RAX, Register::RCX);
    // rax = the segment, rcx = the index of its entry for `id`.
    code.load(rax, SEGMENT)?;
    runs_index(code, rax, id)?;
    let segment = runs_word(RunsWord::Segment);
    let record = runs_word(RunsWord::Record);
    let number = MemoryOperand::with_base(rax);
    match flags {
        Flags::Free => {
            code.push(Instruction::with2(Code::Cmp_rm64_r64, segment, rax))?;
            code.jump(Code::Jne_rel32_64, MISS)?;
            code.push(Instruction::with2(Code::Mov_r64_rm64, rax, record))?;
            code.push(Instruction::with2(Code::Cmp_rm64_imm32, number, id as i32))?;
            code.jump(Code::Jne_rel32_64, MISS)?;
        }
        Flags::Kept => {
            // rcx = the segment minus the entry's.
            code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, segment))?;
            subtract_rcx(code, rax, rcx)?;
            code.jump(Code::Jrcxz_rel8_64, TEST_RECORD)?;
            code.label(MISS);
            to_fresh(code)?;
            // rcx = this number minus the record's.
            code.label(TEST_RECORD);
            runs_index(code, rax, id)?;
            code.push(Instruction::with2(Code::Mov_r64_rm64, rax, record))?;
            code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, number))?;
            code.push(Instruction::with1(Code::Not_rm64, rcx))?;
            code.lea(rcx, rcx, i64::from(id) + 1)?;
            code.jump(Code::Jrcxz_rel8_64, HIT)?;
            code.jump(Code::Jmp_rel32_64, MISS)?;
        }
    }
    code.label(HIT);
    code.save(RECORD, rax)?;
    add_run(code, rax, flags)?;
    if jumper {
        code.save(JUMPER, rax)?;
        code.save(JUMPER_SP, Register::RSP)?;
    }
    code.load(rcx, TEMP)?;
    code.load(rax, SAVE_RAX)?;
    code.jump(Code::Jmp_rel32_64, body)?;
    if flags == Flags::Free {
        code.label(MISS);
        to_fresh(code)?;
    }
    Ok(())
}

/// One more run in the record at `record` (its runs word: `inc` with the
/// flags free, else through rcx).
fn add_run(code: &mut Emit, record: Register, flags: Flags) -> Result<(), Refusal> {
    let rcx = Register::RCX;
    let runs = MemoryOperand::with_base_displ(record, 8);
    if flags == Flags::Free {
        return code.push(Instruction::with1(Code::Inc_rm64, runs));
    }
    code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, runs))?;
    code.lea(rcx, rcx, 1)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, runs, rcx))
}

/// Labels of [`count_run`] (above the labels of the checks of a
/// translation's code): the test of the number in the entry's record, its
/// miss, one more run in the segment's record.
const TEST_RECORD: u64 = 0x800;
const MISS: u64 = 0x801;
const HIT: u64 = 0x802;

/// Whether a translation's code at its entry may change the program's
/// status flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flags {
    /// No: the block may read them before it gives them values.
    Kept,
    /// Yes: the block gives them all values before it reads any
    /// (`flags::status_flags_dead`).
    Free,
}

/// Where a translation's quiet path goes on for the rules of pending calls
/// (`pending::resume_routine`'s entries).
#[derive(Clone, Copy, Debug)]
pub(super) struct Rules {
    /// The translation's entry.
    pub entry: u64,
    /// The resume routine's entries.
    pub routine: RuleEntries,
}

/// The quiet path (label [`QUIET`]), after the block's end, ending in
/// jumps to [`BUMP`], [`FRESH`] or the block's first instruction
/// (`body`): rax and rcx saved; unless the block is in the segment's
/// `region` and the stack pointer is at the segment's or at most 64 KiB
/// below it, a new segment; then, as `counted` says, one more run in the
/// translation's (`id`) record of the segment ([`count_run`]: a cached
/// block always; a block ending in a call or a `ret` when its run
/// belongs to a pending call, `pending`), else a record.
pub(super) fn quiet_path(
    counted: Counted,
    id: u32,
    region: u32,
    body: u64,
    rules: Rules,
    flags: Flags,
) -> Result<Vec<Instruction>, Refusal> {
    let (rax, rcx, rsp) = (Register::RAX, Register::RCX, Register::RSP);
    let mut code = Emit::default();
    code.label(QUIET);
    code.save(SAVE_RAX, rax)?;
    code.save(TEMP, rcx)?;
    match flags {
        Flags::Kept => {
            jump_if_equal(&mut code, Value::Number(region), SEGMENT_REGION, TEST_STACK)?;
            code.jump(Code::Jmp_rel32_64, BUMP)?;
            code.label(TEST_STACK);
            // rax = the segment's stack pointer minus the thread's, rcx =
            // that without its low 16 bits: 0 when the thread's is at most
            // 64 KiB below the segment's, or at it.
            code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, rsp))?;
            code.load(rax, SEGMENT_SP)?;
            subtract_rcx(&mut code, rax, rax)?;
            code.push(Instruction::with2(
                Code::Movzx_r32_rm16,
                Register::ECX,
                Register::AX,
            ))?;
            subtract_rcx(&mut code, rax, rcx)?;
            code.jump(Code::Jrcxz_rel8_64, TEST_SEGMENT)?;
            code.jump(Code::Jmp_rel32_64, BUMP)?;
        }
        Flags::Free => {
            // The same tests with `cmp` (the region as `set_region`
            // writes it).
            code.push(Instruction::with2(
                Code::Cmp_rm64_imm32,
                slot(SEGMENT_REGION),
                region as i32,
            ))?;
            code.jump(Code::Jne_rel32_64, BUMP)?;
            code.load(rax, SEGMENT_SP)?;
            code.push(Instruction::with2(Code::Sub_r64_rm64, rax, rsp))?;
            code.push(Instruction::with2(Code::Cmp_rm64_imm32, rax, 0xffff))?;
            code.jump(Code::Ja_rel32_64, BUMP)?;
        }
    }
    code.label(TEST_SEGMENT);
    match counted {
        Counted::Cached => count_run(&mut code, id, body, flags, false)?,
        Counted::Dispatch => count_run(&mut code, id, body, flags, true)?,
        Counted::Calls => to_routine(&mut code, rules.entry, rules.routine.calling)?,
        Counted::Returns | Counted::Tail => {
            to_routine(&mut code, rules.entry, rules.routine.chained)?
        }
        Counted::Never | Counted::Callee | Counted::Relay => to_fresh(&mut code)?,
    }
    Ok(code.list)
}

/// How a call chooses its callee's segment ([`call_entry`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Callee {
    /// The calling translation.
    pub id: u32,
    /// The calling translation's cache entry, which holds the caller's
    /// segment at the call's last run and the segment its callee had then
    /// (`None`: a new segment at each call).
    pub cache: Option<u64>,
    /// For an indirect call (its target in rax), the slot that holds the
    /// target of its last run ([`call_target`]).
    pub target: Option<u64>,
}

/// The offset in a thread's area of the slot that keeps the target of
/// the last run of translation `id`'s indirect call: its run counter,
/// unused when the run counts quiet runs (`counts_only` and quiet runs
/// never go together). `None` past the counters an area has.
pub(super) fn call_target(id: u32) -> Option<u64> {
    (u64::from(id) < COUNTERS).then(|| Area::COUNTER_BASE + 8 * u64::from(id))
}

/// The code before a call that returns to `return_addr`: the call on the
/// thread's stack of calls (segment, stack pointer before the call,
/// return address, its cache entry in the low half of the last word and
/// in its high half how far the segment's stack pointer is above the
/// thread's, modulo 2^32; the ring's top moved first), flags
/// untouched (`lea`, `movzx`, `jrcxz`); rcx and rdx saved and back. With
/// quiet runs (`callee`), then the callee's segment, the call entering
/// the callee at its resume entry: the one the call had at its last run
/// when the caller's segment (and for an indirect call the target) is the
/// one it had then (label [`SAME_CALLER`]), else a new one (label
/// [`NEW`]; kept with the caller's segment and target for the next run);
/// its stack pointer the one after the call.
pub(super) fn call_entry(return_addr: u64, callee: Callee) -> Result<Vec<Instruction>, Refusal> {
    let (rcx, rdx, rsp) = (Register::RCX, Register::RDX, Register::RSP);
    let mut code = Emit::default();
    code.save(TEMP, rcx)?;
    code.save(SAVE_RDX, rdx)?;
    code.load(rcx, TOP_CALL)?;
    move_top_call(&mut code, 32)?;
    code.load(rdx, SEGMENT)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, call_word(0), rdx))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, call_word(8), rsp))?;
    code.push(Instruction::with2(Code::Mov_r64_imm64, rdx, return_addr))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, call_word(16), rdx))?;
    let cache = callee.cache.map_or(0, |at| at as i32);
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        call_word(24),
        cache,
    ))?;
    // rdx = the segment's stack pointer minus the thread's, flags
    // untouched: not(not(segment's) + thread's + 1) + 1.
    code.load(rdx, SEGMENT_SP)?;
    code.push(Instruction::with1(Code::Not_rm64, rdx))?;
    let sum = MemoryOperand::new(rsp, rdx, 1, 1, 1, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, rdx, sum))?;
    code.push(Instruction::with1(Code::Not_rm64, rdx))?;
    code.lea(rdx, rdx, 1)?;
    code.push(Instruction::with2(
        Code::Mov_rm32_r32,
        call_dword(28),
        Register::EDX,
    ))?;
    code.load(rdx, LIVE_CALLS)?;
    code.lea(rdx, rdx, 1)?;
    code.save(LIVE_CALLS, rdx)?;
    // The return address is not pushed yet.
    choose_segment(&mut code, callee, -8, Forget::CallingRecord)?;
    code.load(rdx, SAVE_RDX)?;
    code.load(rcx, TEMP)?;
    Ok(code.list)
}

/// What a transfer to a target other than its last run's forgets
/// ([`choose_segment`]): what a pending call (`pending`) would count in
/// as a run that went there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Forget {
    /// The calling block's record in the segment, out of the table of
    /// records (a call's).
    CallingRecord,
    /// The caller's segment in the cache entry of the call that led here
    /// (a jump into another function, [`relay_entry`]: the call's next run
    /// makes no pending call).
    Caller,
}

/// The segment of a call's callee or of the target of a jump into another
/// function ([`call_entry`], [`relay_entry`]; rcx and rdx free, an
/// indirect target in rax): the one the transfer had at its last run when
/// the thread's segment (and an indirect target) is the one it had then,
/// else the one the table of transfers holds for the transfer from the
/// thread's segment (to that target; to another target than the last
/// run's from the same segment, what `forget` says is forgotten first),
/// else a new one, entered in the table; the cache entry then keeps the
/// segment, the target and the segment chosen, the last run's (the entry
/// it held moved to the second, [`SECOND_ENTRY`]); its stack pointer the
/// thread's plus `sp_delta`.
fn choose_segment(
    code: &mut Emit,
    callee: Callee,
    sp_delta: i64,
    forget: Forget,
) -> Result<(), Refusal> {
    let (rcx, rdx, rsp) = (Register::RCX, Register::RDX, Register::RSP);
    code.load(rdx, SEGMENT)?;
    match callee.cache {
        Some(at) => {
            // The last run's segments first (the pending calls' way),
            // then the table of transfers: a function called from
            // several segments calls on in the same segments from each.
            // The cache entry is always the last run's.
            jump_if_equal(code, Value::Register(rdx), at, SAME_CALLER)?;
            keep_second_entry(code, at)?;
            code.jump(Code::Jmp_rel32_64, LOOKUP)?;
            code.label(SAME_CALLER);
            same_target(code, callee, forget, SAME_TARGET)?;
            code.label(SAME_TARGET);
            code.load(rdx, at + 8)?;
            code.jump(Code::Jmp_rel32_64, CHOSEN)?;
            code.label(LOOKUP);
            transfer_lookup(code, callee, forget, NEW)?;
            keep_caller(code, at, callee.target)?;
            if keeps_calling(callee, forget) {
                // The run's record is its own, or the one it moved to.
                calling_is_the_run_s(code)?;
            }
            transfer_found(code)?;
            code.save(at + 8, rdx)?;
            code.jump(Code::Jmp_rel32_64, CHOSEN)?;
            if keeps_calling(callee, forget) {
                // A pending call's run that cannot move: a new segment,
                // the entry left as it is (its callee's segment and a
                // record of a run that made the call, once one is known).
                code.label(UNLISTED);
                code.load(rdx, SEGMENT)?;
                keep_caller(code, at, callee.target)?;
                new_segment(code, rdx)?;
                code.save(at + 8, rdx)?;
                code.jump(Code::Jmp_rel32_64, CHOSEN)?;
            }
            code.label(NEW);
            keep_caller(code, at, callee.target)?;
            transfer_enter(code, callee, forget)?;
            new_segment(code, rdx)?;
            transfer_chosen(code)?;
            code.save(at + 8, rdx)?;
        }
        None => new_segment(code, rdx)?,
    }
    code.label(CHOSEN);
    code.save(SEGMENT, rdx)?;
    code.lea(rcx, rsp, sp_delta)?;
    code.save(SEGMENT_SP, rcx)
}

/// In [`choose_segment`], a transfer from another caller's segment than
/// its last run's: the cache entry at `at` moves to the second
/// ([`SECOND_ENTRY`]) unless its caller's segment was forgotten (0); rcx
/// lost, flags untouched.
fn keep_second_entry(code: &mut Emit, at: u64) -> Result<(), Refusal> {
    let rcx = Register::RCX;
    code.load(rcx, at)?;
    code.jump(Code::Jrcxz_rel8_64, FORGOTTEN_CALLER)?;
    code.save(at + SECOND_ENTRY, rcx)?;
    for word in [8, 16, 24] {
        code.load(rcx, at + word)?;
        code.save(at + SECOND_ENTRY + word, rcx)?;
    }
    code.label(FORGOTTEN_CALLER);
    Ok(())
}

/// In [`choose_segment`]: the thread's segment (rdx) and an indirect
/// target (rax) kept in the cache entry at `at` (and the target slot).
fn keep_caller(code: &mut Emit, at: u64, target: Option<u64>) -> Result<(), Refusal> {
    code.save(at, Register::RDX)?;
    match target {
        Some(target) => code.save(target, Register::RAX),
        None => Ok(()),
    }
}

/// In [`choose_segment`], a caller's segment found in the cache entry:
/// on to `same` when the transfer is direct or its target (in rax) is the
/// last run's, else what `forget` says is forgotten (a calling record
/// only while calls are pending: else the run wrote its own record, one
/// of a run that made this call), the cache entry's caller's segments too
/// (a stub's: they were kept for the old target), and on to the table of
/// transfers.
fn same_target(code: &mut Emit, callee: Callee, forget: Forget, same: u64) -> Result<(), Refusal> {
    let (Some(target), Some(at)) = (callee.target, callee.cache) else {
        return code.jump(Code::Jmp_rel32_64, same);
    };
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    jump_if_equal(code, Value::Register(rax), target, same)?;
    match forget {
        Forget::CallingRecord => {
            code.load(rcx, PENDING_DEPTH)?;
            code.jump(Code::Jrcxz_rel8_64, OWN_RECORD)?;
            runs_index(code, rdx, callee.id)?;
            code.push(Instruction::with2(
                Code::Mov_rm64_imm32,
                runs_word(RunsWord::Segment),
                0,
            ))?;
            code.label(OWN_RECORD);
        }
        Forget::Caller => {
            code.push(Instruction::with2(Code::Mov_rm64_imm32, slot(at), 0))?;
            code.load(rcx, TOP_CALL)?;
            code.push(Instruction::with2(
                Code::Mov_r32_rm32,
                Register::ECX,
                call_dword(24),
            ))?;
            code.jump(Code::Jrcxz_rel8_64, FORGOTTEN)?;
            let caller = MemoryOperand::new(rcx, Register::None, 1, 0, 1, false, Register::GS);
            code.push(Instruction::with2(Code::Mov_rm64_imm32, caller, 0))?;
            code.label(FORGOTTEN);
        }
    }
    code.jump(Code::Jmp_rel32_64, LOOKUP)
}

/// The code before a jump into another function: a stub's jump to its
/// target (a PLT stub's, or one the sink does not skip, `translator`: in
/// rax; the stub's cache entry and target slot in `callee`; the jump goes
/// through the lookup routine of calls) or a direct tail jump (no target
/// slot): the target's segment chosen as a
/// call's ([`choose_segment`]), and `RELAYING` set, for the target's
/// resume entry: in a pending call the target's first run may be counted
/// too (`pending`). Flags untouched; rcx and rdx saved and back.
pub(super) fn relay_entry(callee: Callee) -> Result<Vec<Instruction>, Refusal> {
    let (rcx, rdx) = (Register::RCX, Register::RDX);
    let mut code = Emit::default();
    code.save(TEMP, rcx)?;
    code.save(SAVE_RDX, rdx)?;
    choose_segment(&mut code, callee, 0, Forget::Caller)?;
    code.push(Instruction::with2(Code::Mov_rm64_imm32, slot(RELAYING), 1))?;
    code.load(rdx, SAVE_RDX)?;
    code.load(rcx, TEMP)?;
    Ok(code.list)
}

/// The segment's region: `region`, or -1 (no block's) for none.
fn set_region(code: &mut Emit, region: Option<u32>) -> Result<(), Refusal> {
    let region = region.map_or(-1, |region| region as i32);
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        slot(SEGMENT_REGION),
        region,
    ))
}

/// Moves the top of the stack of calls, whose offset is in rcx, `by`
/// bytes, round the ring (`lea`, `movzx`: flags untouched).
fn move_top_call(code: &mut Emit, by: i64) -> Result<(), Refusal> {
    code.lea(Register::RCX, Register::RCX, by)?;
    let wrap = Instruction::with2(Code::Movzx_r32_rm16, Register::ECX, Register::CX);
    code.push(wrap)?;
    code.save(TOP_CALL, Register::RCX)
}

/// The double word `at` of the entry of the stack of calls at offset rcx
/// (the same operand as [`call_word`]'s, which the instruction sizes).
fn call_dword(at: i64) -> MemoryOperand {
    call_word(at)
}

/// Word `at` of the entry of the stack of calls at offset rcx.
fn call_word(at: i64) -> MemoryOperand {
    let displacement = Area::CALLS_BASE as i64 + at;
    MemoryOperand::new(
        Register::RCX,
        Register::None,
        1,
        displacement,
        1,
        false,
        Register::GS,
    )
}

/// The resume path (label [`RESUME_PATH`]), where calls and returns
/// enter: rax saved, the segment's region the block's (`region`), rax the
/// translation's `entry`, then the region's resume routine
/// (`pending::resume_routine`), which saves rcx and counts the run in a
/// record of the block written before or goes on to write one.
pub(super) fn resume_path(
    region: Option<u32>,
    entry: u64,
    routine: u64,
) -> Result<Vec<Instruction>, Refusal> {
    let mut code = Emit::default();
    code.label(RESUME_PATH);
    code.save(SAVE_RAX, Register::RAX)?;
    set_region(&mut code, region)?;
    to_routine(&mut code, entry, routine)?;
    Ok(code.list)
}

/// The return check, in the lookup routine of returns (flags, rax and rbx
/// saved, the target in the `TARGET` slot; rcx saved and back): drops
/// the entries of the stack of calls whose stack pointer is below the
/// thread's (calls left without their return); when the next one has the
/// thread's stack pointer and the target as its return address, its
/// segment goes on (number back, stack pointer the one it had at the call
/// when that was at most 64 KiB above the thread's, else the thread's;
/// the resume
/// path sets the region), it is dropped and `RESUME` says to go on at
/// the target's resume entry, its cache entry in `RETURNED` when it is
/// the innermost pending call's (`pending`), else in `RETURN_CACHE`; else
/// `RESUME` is 0. At most [`CHECKS`] entries are looked at.
pub(super) fn return_check() -> Result<Vec<Instruction>, Refusal> {
    let (rax, rcx, rsp) = (Register::RAX, Register::RCX, Register::RSP);
    let mut code = Emit::default();
    code.save(TEMP, rcx)?;
    code.push(Instruction::with2(Code::Mov_rm64_imm32, slot(RESUME), 0))?;
    code.push(Instruction::with2(
        Code::Mov_r32_imm32,
        Register::EBX,
        CHECKS,
    ))?;
    code.load(rcx, LIVE_CALLS)?;
    code.label(CHECK_CALL);
    code.push(Instruction::with2(Code::Test_rm64_r64, rcx, rcx))?;
    code.jump(Code::Je_rel32_64, CHECKED_CALLS)?;
    code.load(rcx, TOP_CALL)?;
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rsp, call_word(8)))?;
    // The entry of a frame the thread is still in: it stays.
    code.jump(Code::Jb_rel32_64, CHECKED_CALLS)?;
    code.jump(Code::Ja_rel32_64, DROP_CALL)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, call_word(16)))?;
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rax, slot(TARGET)))?;
    code.jump(Code::Jne_rel32_64, DROP_CALL)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, call_word(0)))?;
    code.save(SEGMENT, rax)?;
    code.push(Instruction::with2(
        Code::Mov_r32_rm32,
        Register::EAX,
        call_dword(28),
    ))?;
    code.push(Instruction::with2(Code::Cmp_rm64_imm32, rax, 0xffff))?;
    code.jump(Code::Jbe_rel32_64, SEGMENT_SP_KEPT)?;
    code.push(Instruction::with2(
        Code::Xor_r32_rm32,
        Register::EAX,
        Register::EAX,
    ))?;
    code.label(SEGMENT_SP_KEPT);
    let above = MemoryOperand::new(rsp, rax, 1, 0, 0, false, Register::None);
    code.push(Instruction::with2(Code::Lea_r64_m, rax, above))?;
    code.save(SEGMENT_SP, rax)?;
    let resume = RESUME_ENTRY as i32;
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        slot(RESUME),
        resume,
    ))?;
    code.push(Instruction::with2(
        Code::Mov_r32_rm32,
        Register::EAX,
        call_dword(24),
    ))?;
    // The innermost pending call's entry (rbx is set again below).
    code.load(Register::RBX, PENDING_DEPTH)?;
    code.push(Instruction::with2(
        Code::Test_rm64_r64,
        Register::RBX,
        Register::RBX,
    ))?;
    code.jump(Code::Je_rel32_64, NOT_PENDING)?;
    let innermost = super::pending::innermost_frame(Register::RBX, 0);
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rcx, innermost))?;
    code.jump(Code::Jne_rel32_64, NOT_PENDING)?;
    code.save(RETURNED, rax)?;
    code.jump(Code::Jmp_rel32_64, KEPT_CACHE)?;
    code.label(NOT_PENDING);
    code.save(RETURN_CACHE, rax)?;
    // This entry is the last one dropped.
    code.label(KEPT_CACHE);
    code.push(Instruction::with2(Code::Mov_r32_imm32, Register::EBX, 1))?;
    code.label(DROP_CALL);
    move_top_call(&mut code, -32)?;
    code.push(Instruction::with1(Code::Dec_rm64, slot(LIVE_CALLS)))?;
    code.load(rcx, LIVE_CALLS)?;
    code.push(Instruction::with1(Code::Dec_rm32, Register::EBX))?;
    code.jump(Code::Jne_rel32_64, CHECK_CALL)?;
    code.label(CHECKED_CALLS);
    code.load(rcx, TEMP)?;
    Ok(code.list)
}

#[cfg(test)]
mod tests {
    use super::super::area::{FRAME, PENDING_FRAMES};
    use super::super::encode::encode;
    use super::super::running::Running;
    use super::*;

    /// The entries of a region's record routine.
    const RECORDS: RecordEntries = RecordEntries {
        bump: 0x7f00_0020_0000,
        fresh: 0x7f00_0020_0040,
        counted: 0x7f00_0020_0080,
        plain: 0x7f00_0020_00c0,
    };

    /// A translation's record, of `bytes` (24: the layout the record
    /// routine writes; 32: one with a recorded word, written by the
    /// translation).
    fn record(counted: Counted, bytes: u64) -> Record {
        Record {
            layout: RecordLayout {
                id: 7,
                bytes,
                runs: true,
                record_slot: true,
            },
            counted,
            region: Some(2),
            entry: 0x7f00_0000_0100,
            records: RECORDS,
        }
    }

    #[test]
    fn the_entry_writes_the_record_itself_only_in_a_layout_the_routine_has_not() {
        let has_write = |record: Record| {
            let list = entry(record).unwrap();
            list.iter().any(|instruction| instruction.ip() == WRITE)
        };
        let counted = Counted::Cached;
        assert_eq!(
            record(counted, 24).written_by_routine(),
            Some(RECORDS.counted)
        );
        assert!(!has_write(record(counted, 24)));
        assert_eq!(record(counted, 32).written_by_routine(), None);
        assert!(has_write(record(counted, 32)));
    }

    /// Where quiet paths go on for the rules of pending calls.
    const RULES: Rules = Rules {
        entry: 0x7f00_0000_0100,
        routine: RuleEntries {
            calling: 0x7f00_0010_0040,
            chained: 0x7f00_0010_0080,
        },
    };

    /// What the program's code runs into: each piece encodes (at an
    /// address, its labels resolved against the others' fake addresses,
    /// see `encode`) and changes no flag of the program.
    #[test]
    fn the_code_in_the_programs_way_encodes_and_leaves_the_flags_alone() {
        let body = 3;
        for counted in super::super::pending::KINDS {
            for (region, bytes) in [(Some(2), 24), (None, 32)] {
                let pieces = [
                    entry(record(counted, bytes)).unwrap(),
                    quiet_path(counted, 7, 2, body, RULES, Flags::Kept).unwrap(),
                    resume_path(region, 0x7f00_0000_0100, 0x7f00_0010_0000).unwrap(),
                ];
                let mut list: Vec<Instruction> = pieces.concat();
                // The block's first instruction, where the quiet path goes on.
                let mut first = Instruction::with(Code::Nopd);
                first.set_ip(body);
                list.push(first);
                assert!(encode(&list, 0x7f00_0000_0000).is_ok(), "{counted:?}");
                // Every `jrcxz` in reach: no second encoding.
                let one_pass = super::super::encode::encode_in_one_pass(&list, 0x7f00_0000_0000);
                assert!(one_pass.is_some(), "{counted:?}: not in one pass");
                for instruction in &list {
                    assert_eq!(instruction.rflags_modified(), 0, "{:?}", instruction.code());
                }
            }
        }
    }

    /// The quiet path of a block whose flags are dead at its entry tests
    /// with `cmp`: it encodes in one pass, and is shorter.
    #[test]
    fn the_quiet_path_with_the_flags_free_encodes_and_is_shorter() {
        let body = 3;
        let at = 0x7f00_0000_0000;
        for counted in super::super::pending::KINDS {
            let bytes = |flags: Flags| {
                let mut list = entry(record(counted, 24)).unwrap();
                list.append(&mut quiet_path(counted, 7, 2, body, RULES, flags).unwrap());
                let mut first = Instruction::with(Code::Nopd);
                first.set_ip(body);
                list.push(first);
                let one_pass = super::super::encode::encode_in_one_pass(&list, at);
                assert!(one_pass.is_some(), "{counted:?} {flags:?}: not in one pass");
                encode(&list, at).unwrap().0.len()
            };
            let (kept, free) = (bytes(Flags::Kept), bytes(Flags::Free));
            assert!(
                free < kept,
                "{counted:?}: {free} bytes, not fewer than {kept}"
            );
        }
    }

    /// A call's code, direct and indirect (its labels its own: one piece
    /// at a time).
    #[test]
    fn a_call_choosing_its_callee_s_segment_encodes_and_leaves_the_flags_alone() {
        for cache in [None, call_cache(7)] {
            for target in [None, call_target(7)] {
                let callee = Callee {
                    id: 7,
                    cache,
                    target,
                };
                let mut list = call_entry(0x5555_5555_1234, callee).unwrap();
                list.push(Instruction::with(Code::Int3));
                let one_pass = super::super::encode::encode_in_one_pass(&list, 0x7f00_0000_0000);
                assert!(one_pass.is_some(), "{callee:?}: not in one pass");
                for instruction in &list {
                    assert_eq!(instruction.rflags_modified(), 0, "{:?}", instruction.code());
                }
            }
        }
    }

    /// A jump into another function's code, direct and through a PLT
    /// stub: in one pass, flags untouched.
    #[test]
    fn a_jump_into_another_function_encodes_in_one_pass() {
        for target in [None, call_target(7)] {
            let callee = Callee {
                id: 7,
                cache: call_cache(7),
                target,
            };
            let mut list = relay_entry(callee).unwrap();
            list.push(Instruction::with(Code::Int3));
            let one_pass = super::super::encode::encode_in_one_pass(&list, 0x7f00_0000_0000);
            assert!(one_pass.is_some(), "{callee:?}: not in one pass");
            for instruction in &list {
                assert_eq!(instruction.rflags_modified(), 0, "{:?}", instruction.code());
            }
        }
    }

    /// The segment a call from segment `from` (to `target`) chooses for
    /// its callee, run in `running`.
    fn callee_segment(running: &Running, callee: Callee, from: u64, target: u64) -> u64 {
        running.set(SEGMENT, from);
        running.run(&call_entry(0x5555_5555_1234, callee).unwrap(), target);
        running.get(SEGMENT)
    }

    /// The rule of a call's callee's segment, run: from the segment of the
    /// call's last run, or from one it was made from before (to the same
    /// target), the segment chosen then; from any other, a new one.
    #[test]
    fn a_call_from_a_segment_it_was_made_from_goes_on_in_the_segment_it_chose() {
        std::thread::spawn(|| {
            let running = Running::new();
            running.set(NEXT_SEGMENT, 100);
            let new = |count: u64| 100 + count * SEGMENT_STRIDE;
            let direct = Callee {
                id: 7,
                cache: call_cache(7),
                target: None,
            };
            let (x, w, v) = (11, 12, 13);
            let from_x = callee_segment(&running, direct, x, 0);
            assert_eq!(from_x, new(1));
            let from_w = callee_segment(&running, direct, w, 0);
            assert_eq!(from_w, new(2));
            // The last run's segment, then one before it.
            assert_eq!(callee_segment(&running, direct, w, 0), from_w);
            assert_eq!(callee_segment(&running, direct, x, 0), from_x);
            assert_eq!(callee_segment(&running, direct, w, 0), from_w);
            // Another call from the same segment has its own.
            let other = Callee {
                id: 8,
                cache: call_cache(8),
                ..direct
            };
            assert_eq!(callee_segment(&running, other, x, 0), new(3));
            assert_eq!(callee_segment(&running, direct, v, 0), new(4));
            assert_eq!(callee_segment(&running, direct, x, 0), from_x);

            // An indirect call: the same segment and target.
            let indirect = Callee {
                id: 9,
                cache: call_cache(9),
                target: call_target(9),
            };
            let (t, u) = (0x5555_0000_1000, 0x5555_0000_2000);
            let x_to_t = callee_segment(&running, indirect, x, t);
            let w_to_t = callee_segment(&running, indirect, w, t);
            assert_eq!((x_to_t, w_to_t), (new(5), new(6)));
            assert_eq!(callee_segment(&running, indirect, x, t), x_to_t);
            let x_to_u = callee_segment(&running, indirect, x, u);
            assert_eq!(x_to_u, new(7));
            assert_eq!(callee_segment(&running, indirect, w, t), w_to_t);
            assert_eq!(callee_segment(&running, indirect, x, u), x_to_u);
            // Targets taken in turn from one segment keep theirs.
            for _ in 0..2 {
                assert_eq!(callee_segment(&running, indirect, x, t), x_to_t);
                assert_eq!(callee_segment(&running, indirect, x, u), x_to_u);
            }
            // Not while a call is pending (a direct call keeps its own).
            for (pending, target) in [(PENDING_DEPTH, t), (CHAIN_END, u)] {
                running.set(pending, 16);
                let next = running.get(NEXT_SEGMENT) + SEGMENT_STRIDE;
                assert_eq!(callee_segment(&running, indirect, x, target), next);
                assert_eq!(callee_segment(&running, direct, w, 0), from_w);
                running.set(pending, 0);
            }
            // The stack pointer after the call is the segment's.
            assert_ne!(running.get(SEGMENT_SP), 0);
        })
        .join()
        .unwrap();
    }

    /// The rule of a call's second cache entry, run: a call from another
    /// segment than its last run's moves the last run's entry there
    /// (unless its caller's segment was forgotten); one from the last
    /// run's segment leaves both as they are.
    #[test]
    fn a_call_from_another_segment_keeps_the_last_run_s_cache_entry_second() {
        std::thread::spawn(|| {
            let running = Running::new();
            running.set(NEXT_SEGMENT, 100);
            let at = call_cache(7).unwrap();
            let direct = Callee {
                id: 7,
                cache: Some(at),
                target: None,
            };
            let entry = |at: u64| [0, 8, 16, 24].map(|word| running.get(at + word));
            let (x, w, v) = (11, 12, 13);
            let from_x = callee_segment(&running, direct, x, 0);
            // The return's record in x, kept by the call's return.
            running.set(at + 16, x);
            running.set(at + 24, 0x7000_0000_0100);
            let x_entry = entry(at);
            assert_eq!(x_entry, [x, from_x, x, 0x7000_0000_0100]);
            let from_w = callee_segment(&running, direct, w, 0);
            assert_eq!(entry(at + SECOND_ENTRY), x_entry);
            assert_eq!(entry(at)[..2], [w, from_w]);
            // Again from w: nothing moves.
            assert_eq!(callee_segment(&running, direct, w, 0), from_w);
            assert_eq!(entry(at + SECOND_ENTRY), x_entry);
            // A forgotten caller's segment stays where it is.
            running.set(at, 0);
            callee_segment(&running, direct, v, 0);
            assert_eq!(entry(at + SECOND_ENTRY), x_entry);
            assert_eq!(entry(at)[0], v);
        })
        .join()
        .unwrap();
    }

    /// Whether the pending call check (`pending::call_repeats_here`) of
    /// translation `id` passes in `segment`, run.
    fn call_repeats(running: &Running, id: u32, segment: u64) -> bool {
        const FAIL: u64 = 1;
        const DONE: u64 = 2;
        const RBX: u64 = 0x5eed_0000_0bb0;
        let (rbx, rcx, rdx) = (Register::RBX, Register::RCX, Register::RDX);
        let mut code = Emit::default();
        code.push(Instruction::with1(Code::Push_r64, rbx)).unwrap();
        code.push(Instruction::with2(Code::Mov_r64_imm64, rbx, RBX))
            .unwrap();
        code.push(Instruction::with2(Code::Mov_r64_imm64, rcx, u64::from(id)))
            .unwrap();
        code.push(Instruction::with2(Code::Mov_r64_imm64, rdx, segment))
            .unwrap();
        super::super::pending::call_repeats_here(&mut code, rdx, FAIL, 0x10).unwrap();
        code.push(Instruction::with2(Code::Mov_rm64_imm32, slot(TEMP), 1))
            .unwrap();
        code.jump(Code::Jmp_rel32_64, DONE).unwrap();
        code.label(FAIL);
        code.push(Instruction::with2(Code::Mov_rm64_imm32, slot(TEMP), 2))
            .unwrap();
        code.label(DONE);
        // rbx out through a slot the check does not use.
        code.save(SAVE_RDX, rbx).unwrap();
        code.push(Instruction::with1(Code::Pop_r64, rbx)).unwrap();
        running.set(TEMP, 0);
        running.run(&code.list, 0);
        assert_eq!(running.get(SAVE_RDX), RBX, "rbx kept");
        match running.get(TEMP) {
            1 => true,
            2 => false,
            other => panic!("the check ended with {other}"),
        }
    }

    /// The rule of a pending call's cache entries, run: a call repeats in
    /// a segment when either entry was made there and kept the record of
    /// its return there; the second then swaps with the first (which the
    /// call's code and its return use), rbx kept, and the last run's
    /// target (the other entry's) is forgotten.
    #[test]
    fn a_call_repeats_from_either_cache_entry_and_the_second_comes_first() {
        std::thread::spawn(|| {
            let running = Running::new();
            let at = call_cache(7).unwrap();
            let entry = |at: u64| [0, 8, 16, 24].map(|word| running.get(at + word));
            let set = |at: u64, words: [u64; 4]| {
                for (index, word) in words.into_iter().enumerate() {
                    running.set(at + 8 * index as u64, word);
                }
            };
            let (x, w) = (11, 12);
            let (x_entry, w_entry) = ([x, 21, x, 0x100], [w, 22, w, 0x200]);
            set(at, x_entry);
            set(at + SECOND_ENTRY, w_entry);
            let target = call_target(7).unwrap();
            running.set(target, 0x5555_0000_1000);
            assert!(call_repeats(&running, 7, x));
            assert_eq!((entry(at), entry(at + SECOND_ENTRY)), (x_entry, w_entry));
            assert_eq!(running.get(target), 0x5555_0000_1000);
            assert!(call_repeats(&running, 7, w));
            assert_eq!((entry(at), entry(at + SECOND_ENTRY)), (w_entry, x_entry));
            assert_eq!(running.get(target), 0);
            assert!(!call_repeats(&running, 7, 13));
            assert!(!call_repeats(&running, 8, w));
            // An entry whose return kept no record there does not count.
            set(at + SECOND_ENTRY, [x, 21, 0, 0x100]);
            assert!(!call_repeats(&running, 7, x));
            set(at, [w, 22, 0, 0x200]);
            assert!(!call_repeats(&running, 7, w));
        })
        .join()
        .unwrap();
    }

    /// The rule of a call made from more segments in turn than its cache
    /// entries hold, run: a normal return keeps the record it goes on to
    /// in the call's entry of the table of transfers for the segment (a
    /// direct call's own entry only); a call from a segment neither cache
    /// entry holds then repeats from that entry, which the first cache
    /// entry takes (the first moving to the second); a cache entry that
    /// forgets the record makes the table's forget it too.
    #[test]
    fn a_call_from_a_third_segment_repeats_from_the_table_of_transfers() {
        std::thread::spawn(|| {
            use super::super::area::CURSOR;
            use super::super::pending::{forget_returned, keep_returned};
            let running = Running::new();
            running.set(NEXT_SEGMENT, 100);
            let at = call_cache(7).unwrap();
            let direct = Callee {
                id: 7,
                cache: Some(at),
                target: None,
            };
            let entry = |at: u64| [0, 8, 16, 24].map(|word| running.get(at + word));
            let (x, w, v) = (11, 12, 13);
            let from: Vec<u64> = [x, w, v]
                .iter()
                .map(|&segment| callee_segment(&running, direct, segment, 0))
                .collect();
            // The return of the call whose cache entry is at `cache` from
            // `segment`, keeping `record` (`keep`) or forgetting it.
            let returned = |cache: u64, segment: u64, record: u64, keep: bool| {
                running.set(SEGMENT, segment);
                running.set(CURSOR, record);
                let mut code = Emit::default();
                code.push(Instruction::with2(
                    Code::Mov_r64_imm64,
                    Register::RCX,
                    cache,
                ))
                .unwrap();
                match keep {
                    true => keep_returned(&mut code).unwrap(),
                    false => forget_returned(&mut code).unwrap(),
                }
                // (Its last label names the next instruction.)
                code.push(Ok::<_, iced_x86::IcedError>(Instruction::with(Code::Nopd)))
                    .unwrap();
                running.run(&code.list, 0);
            };
            returned(at, x, 0x100, true);
            returned(at, w, 0x200, true);
            // The cache entries hold v's and w's runs (no return kept).
            let (v_entry, w_entry) = (entry(at), entry(at + SECOND_ENTRY));
            assert_eq!((v_entry[0], w_entry[0]), (v, w));
            assert!(call_repeats(&running, 7, x));
            assert_eq!(entry(at), [x, from[0], x, 0x100]);
            assert_eq!(entry(at + SECOND_ENTRY), v_entry);
            assert!(call_repeats(&running, 7, w));
            assert_eq!(entry(at), [w, from[1], w, 0x200]);
            // v's return kept nothing; another translation's entry is
            // not this one's.
            assert!(!call_repeats(&running, 7, v));
            assert!(!call_repeats(&running, 8, x));
            // Forgotten at the return of a run from x (whose entry is
            // then the first, its record forgotten there too): x's run is
            // found in neither place.
            assert!(call_repeats(&running, 7, x));
            returned(at, x, 0, false);
            running.set(at + 16, 0);
            let kept = (entry(at), entry(at + SECOND_ENTRY));
            assert!(!call_repeats(&running, 7, x));
            assert_eq!((entry(at), entry(at + SECOND_ENTRY)), kept);
            // An indirect call's entry keeps no record of its return.
            let indirect = Callee {
                id: 9,
                cache: call_cache(9),
                target: call_target(9),
            };
            callee_segment(&running, indirect, x, 0x5555_0000_1000);
            let indirect_at = call_cache(9).unwrap();
            returned(indirect_at, x, 0x300, true);
            running.set(indirect_at, 0);
            assert!(!call_repeats(&running, 9, x));
        })
        .join()
        .unwrap();
    }

    /// The rule of an indirect call's run counted in a pending call
    /// ([`rehome`]), run: when its target is not the last run's and a
    /// run from the segment made the call to this target before with a
    /// record of its own, the run moves to that record (the chain, the
    /// `RECORD` slot and the table of records name it) and the callee goes
    /// on in that call's segment; else a new segment, the entry of the
    /// table of transfers as it was.
    #[test]
    fn a_pending_call_to_another_target_moves_to_a_record_of_that_call() {
        std::thread::spawn(|| {
            use super::super::area::PENDING_CHAIN;
            let running = Running::new();
            running.set(NEXT_SEGMENT, 100);
            let new = |count: u64| 100 + count * SEGMENT_STRIDE;
            let id = 9;
            let indirect = Callee {
                id,
                cache: call_cache(id),
                target: call_target(id),
            };
            let (x, t, u) = (11, 0x5555_0000_1000, 0x5555_0000_2000);
            let sp = 0x7ffd_0000_0000;
            // Records of the calling block: number, runs, stack pointer
            // (the one of the call to u counts the pending run too).
            let to_t = Box::new([u64::from(id), 1, sp]);
            let to_u = Box::new([u64::from(id), 2, sp]);
            let to_v = Box::new([u64::from(id), 1, sp]);
            let at = |record: &[u64; 3]| record.as_ptr() as u64;
            // Runs that wrote their own records (no call pending).
            running.set(RECORD, at(&to_t));
            let x_to_t = callee_segment(&running, indirect, x, t);
            running.set(RECORD, at(&to_u));
            let x_to_u = callee_segment(&running, indirect, x, u);
            assert_eq!((x_to_t, x_to_u), (new(1), new(2)));
            // A run counted in the record of the call to u (its last run's
            // target), its call pending: the chain ends with it.
            let pending = |record: u64| {
                running.set(PENDING_DEPTH, FRAME);
                running.set(PENDING_FRAMES + 8, 0);
                running.set(CHAIN_END, 16);
                running.set(PENDING_CHAIN, record);
                running.set(PENDING_CHAIN + 8, sp);
            };
            pending(at(&to_u));
            // SAFETY: a word of a live record, which the code run writes.
            let runs = |record: &[u64; 3]| unsafe { std::ptr::read_volatile(&record[1]) };
            assert_eq!(callee_segment(&running, indirect, x, t), x_to_t);
            assert_eq!((runs(&to_u), runs(&to_t)), (1, 2));
            assert_eq!(running.get(PENDING_CHAIN), at(&to_t));
            assert_eq!(running.get(RECORD), at(&to_t));
            let entry = 2 * runs_entry(&running, x, id);
            assert_eq!(running.get(Area::RUNS_BASE + 8 * entry), x);
            assert_eq!(running.get(Area::RUNS_BASE + 8 * entry + 8), at(&to_t));
            // And back to u.
            assert_eq!(callee_segment(&running, indirect, x, u), x_to_u);
            assert_eq!((runs(&to_u), runs(&to_t)), (2, 1));
            assert_eq!(running.get(PENDING_CHAIN), at(&to_u));
            // A target no run from x called with a record of its own: a
            // new segment, left out of the table of transfers (a later
            // call to v from x goes on in the segment its entry chose),
            // the routine writing the pending runs out asked to keep the
            // record it writes for this run in the entry.
            let v = 0x5555_0000_3000;
            running.set(PENDING_DEPTH, 0);
            running.set(CHAIN_END, 0);
            running.set(RECORD, 0);
            let x_to_v = callee_segment(&running, indirect, x, v);
            running.set(RECORD, at(&to_u));
            assert_eq!(callee_segment(&running, indirect, x, u), x_to_u);
            pending(at(&to_u));
            assert_eq!(callee_segment(&running, indirect, x, v), new(4));
            assert_eq!(runs(&to_u), 2);
            assert_eq!(running.get(PENDING_CHAIN), at(&to_u));
            running.set(PENDING_DEPTH, 0);
            running.set(CHAIN_END, 0);
            running.set(RECORD, at(&to_u));
            assert_eq!(callee_segment(&running, indirect, x, u), x_to_u);
            assert_eq!(callee_segment(&running, indirect, x, v), x_to_v);
            // What that routine keeps (`pending::write_routine`), then a
            // pending run moves there.
            let learnt = running.get(super::super::area::LEARN);
            assert_ne!(learnt, 0);
            running.set(learnt, at(&to_v));
            assert_eq!(callee_segment(&running, indirect, x, u), x_to_u);
            pending(at(&to_u));
            assert_eq!(callee_segment(&running, indirect, x, v), x_to_v);
            assert_eq!((runs(&to_u), runs(&to_v)), (1, 2));
            assert_eq!(callee_segment(&running, indirect, x, u), x_to_u);
            assert_eq!((runs(&to_u), runs(&to_v)), (2, 1));
            // A run that is not the pending call's calling run stays.
            pending(at(&to_u));
            running.set(PENDING_FRAMES + 8, 32);
            assert_eq!(callee_segment(&running, indirect, x, t), new(5));
            assert_eq!(runs(&to_u), 2);
        })
        .join()
        .unwrap();
    }

    /// The index in the table of records of translation `id`'s entry for
    /// `segment`, as [`runs_index`] computes it, run.
    fn runs_entry(running: &Running, segment: u64, id: u32) -> u64 {
        let mut code = Emit::default();
        runs_index(&mut code, Register::RAX, id).unwrap();
        code.save(TEMP, Register::RCX).unwrap();
        running.run(&code.list, segment);
        running.get(TEMP) / 2
    }

    /// The place in the table of transfers of translation `id`'s direct
    /// transfer from `segment`, as [`transfer_index_in`] computes it, run.
    fn transfer_place(running: &Running, segment: u64, id: u64) -> u64 {
        let (rcx, rdx) = (Register::RCX, Register::RDX);
        let mut code = Emit::default();
        code.push(Instruction::with2(Code::Mov_r64_imm64, rdx, id))
            .unwrap();
        transfer_index_in(&mut code, rcx, rdx, Register::RAX).unwrap();
        code.save(TEMP, rcx).unwrap();
        running.run(&code.list, segment);
        running.get(TEMP)
    }

    /// An entry's index is the low 16 bits of the segment's number times 8
    /// plus the translation's number; its words lie in the table, the
    /// last entry's last word at the table's end, and higher bits change
    /// nothing.
    #[test]
    fn a_transfer_s_entry_is_chosen_by_16_bits_and_lies_in_the_table() {
        std::thread::spawn(|| {
            let running = Running::new();
            let offset = |place: u64, word: TransferWord| {
                let operand = transfer_word_at(Register::RCX, word, Register::None);
                operand.displacement as u64 - Area::TRANSFERS_BASE + place * operand.scale as u64
            };
            for (segment, id) in [
                (100, 7),
                (100 + 5 * SEGMENT_STRIDE, 0x1234),
                (u64::MAX / 8, 7),
            ] {
                let index = segment.wrapping_mul(8).wrapping_add(id) % TRANSFER_ENTRIES;
                let place = transfer_place(&running, segment, id);
                assert_eq!(offset(place, TransferWord::Segment), index * TRANSFER_BYTES);
            }
            let last = TRANSFER_ENTRIES - 1;
            let place = transfer_place(&running, 1 << 40, last);
            assert_eq!(place, transfer_place(&running, 0, last));
            assert_eq!(transfer_place(&running, 0, last + 1), 0);
            let end = offset(place, TransferWord::Returned) + 8;
            assert_eq!(end, TRANSFER_ENTRIES * TRANSFER_BYTES);
            assert_eq!(Area::TRANSFERS_BASE + end, Area::CALLS_BASE);
        })
        .join()
        .unwrap();
    }

    /// One segment's entries for translations made one after another share
    /// cache lines; the entries of a translation in 64 segments made one
    /// after another are at least 256 entries (64 lines) apart.
    #[test]
    fn a_segment_s_entries_lie_side_by_side_and_segments_far_apart() {
        std::thread::spawn(|| {
            let running = Running::new();
            let first = 100;
            let entry = runs_entry(&running, first, 7);
            assert_eq!(runs_entry(&running, first, 8), entry + 1);
            assert_eq!(runs_entry(&running, first, 11), entry + 4);
            let entries: Vec<u64> = (0..64)
                .map(|count| runs_entry(&running, first + count * SEGMENT_STRIDE, 7))
                .collect();
            for (at, a) in entries.iter().enumerate() {
                for b in &entries[at + 1..] {
                    let apart = a.abs_diff(*b).min(RUNS_ENTRIES - a.abs_diff(*b));
                    assert!(apart >= 256, "{a:#x} and {b:#x}");
                }
            }
        })
        .join()
        .unwrap();
    }

    /// The resume path's index, read from a translation's data word, is
    /// the one its own code computes (a number above 16 bits).
    #[test]
    fn the_index_read_from_a_data_word_is_the_translation_s() {
        std::thread::spawn(|| {
            let running = Running::new();
            let (id, segment) = (0x1_2345, 100 + 3 * SEGMENT_STRIDE);
            let mut header = vec![0u8; DATA as usize + 8];
            let word = super::super::pending::data_word(super::super::pending::Counted::Cached, id);
            header[..8].copy_from_slice(&word);
            let entry = header.as_ptr() as u64 + DATA;
            let mut code = Emit::default();
            let rdx = Register::RDX;
            code.push(Instruction::with2(Code::Mov_r64_imm64, rdx, entry))
                .unwrap();
            runs_index_of(&mut code, rdx, Register::RAX).unwrap();
            code.save(TEMP, Register::RCX).unwrap();
            running.run(&code.list, segment);
            assert_eq!(running.get(TEMP) / 2, runs_entry(&running, segment, id));
        })
        .join()
        .unwrap();
    }

    /// The segment's stack pointer and the thread's after a call made
    /// `above` bytes below the caller's segment's stack pointer, with two
    /// words pushed for it, and its return, run: the caller's segment
    /// goes on, with its stack pointer of before the call.
    fn after_return(running: &Running, above: i64) -> (u64, u64, u64) {
        use super::super::area::SAVE_RBX;
        let (rax, rbx, rsp) = (Register::RAX, Register::RBX, Register::RSP);
        const RETURN: u64 = 0x5555_5555_1234;
        let callee = Callee {
            id: 7,
            cache: call_cache(7),
            target: None,
        };
        running.set(SEGMENT, 11);
        running.set(LIVE_CALLS, 0);
        let mut code = Emit::default();
        code.save(SAVE_RBX, rbx).unwrap();
        // Two words pushed for the call, below the segment's stack
        // pointer.
        code.lea(rax, rsp, above - 16).unwrap();
        code.save(SEGMENT_SP, rax).unwrap();
        for _ in 0..2 {
            code.push(Instruction::with1(Code::Push_r64, rax)).unwrap();
        }
        code.list.append(&mut call_entry(RETURN, callee).unwrap());
        code.push(Instruction::with2(Code::Mov_r64_imm64, rax, RETURN))
            .unwrap();
        code.save(TARGET, rax).unwrap();
        code.list.append(&mut return_check().unwrap());
        // The segment's stack pointer above the thread's, the call's
        // words popped.
        code.load(rax, SEGMENT_SP).unwrap();
        code.push(Instruction::with2(Code::Sub_r64_rm64, rax, rsp))
            .unwrap();
        code.save(TEMP, rax).unwrap();
        for _ in 0..2 {
            code.push(Instruction::with1(Code::Pop_r64, rax)).unwrap();
        }
        code.load(rbx, SAVE_RBX).unwrap();
        running.run(&code.list, 0);
        (running.get(SEGMENT), running.get(TEMP), running.get(RESUME))
    }

    /// The rule of a caller's segment after a return, run: it goes on with
    /// the stack pointer it had at the call, so that the caller popping
    /// what it pushed for the call stays in it; one more than 64 KiB above
    /// the thread's at the call is not kept (the thread's instead).
    #[test]
    fn a_return_gives_the_caller_s_segment_its_stack_pointer_of_before_the_call() {
        std::thread::spawn(|| {
            let running = Running::new();
            running.set(NEXT_SEGMENT, 100);
            let resume = RESUME_ENTRY;
            for above in [0x10, 0x40, 0xffff] {
                assert_eq!(after_return(&running, above), (11, above as u64, resume));
            }
            // Too far above: the thread's.
            for above in [0x1_0000, 0x20000, -0x10] {
                assert_eq!(after_return(&running, above), (11, 0, resume));
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_return_check_encodes() {
        let mut list = return_check().unwrap();
        list.push(Instruction::with(Code::Int3));
        assert!(encode(&list, 0x7f00_0000_0000).is_ok());
    }

    /// An entry of the table of records: its two words side by side in
    /// one aligned pair (one cache line), the index doubled in rcx.
    #[test]
    fn an_entry_of_the_table_of_records_is_two_words_together() {
        assert_eq!(Area::RUNS_BASE % 16, 0);
        let (segment, record) = (runs_word(RunsWord::Segment), runs_word(RunsWord::Record));
        for word in [segment, record] {
            assert_eq!((word.index, word.scale), (Register::RCX, 8));
        }
        assert_eq!(record.displacement, segment.displacement + 8);
        // rcx twice the 16-bit index: entry 0xffff at the table's end.
        let mut code = Emit::default();
        doubled_low_bits(&mut code).unwrap();
        let [low, twice] = &code.list[..] else {
            panic!("two instructions: {:?}", code.list);
        };
        assert_eq!(low.code(), Code::Movzx_r32_rm16);
        assert_eq!(twice.code(), Code::Lea_r64_m);
        assert_eq!(
            (twice.memory_base(), twice.memory_index()),
            (Register::RCX, Register::RCX)
        );
        let last = Area::RUNS_BASE + 8 * 2 * (RUNS_ENTRIES - 1) + 8;
        assert_eq!(last + 8, Area::FILTER_BASE);
    }

    #[test]
    fn translations_past_the_area_s_entries_have_no_call_cache() {
        assert_eq!(call_cache(0), Some(Area::QUIET_BASE));
        assert_eq!(call_cache(1), Some(Area::QUIET_BASE + CALL_CACHE_BYTES));
        assert_eq!(
            call_cache(CALL_CACHES as u32 - 1).map(|at| at + CALL_CACHE_BYTES),
            Some(Area::TRANSFERS_BASE)
        );
        assert_eq!(call_cache(CALL_CACHES as u32), None);
        assert_eq!(call_target(1), Some(Area::COUNTER_BASE + 8));
        assert_eq!(call_target(COUNTERS as u32), None);
        // Epochs are above every number a tracee counts to.
        assert!(new_epoch() >= 1 << 63);
    }
}
