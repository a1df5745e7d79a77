//! Pending calls (with quiet runs, see `quiet`): a call that repeats an
//! earlier call of the same arc in the same run of the caller's context
//! is counted whole in the records of that earlier call, and writes no
//! record, when nothing in it needs one.
//!
//! A block ending in a direct call whose cache entry (`quiet::call_cache`)
//! says that the call's last run was made in the thread's segment, and
//! that its return then went on to a block whose record in the segment
//! it kept, counts its run in its record of the segment (found in the
//! table of records) and makes the call pending ([`calling`]: the
//! record and the stack pointer in `PENDING_CALL`). The call goes to the
//! callee's segment of that last run; there the callee's first block
//! counts its run in its record of that segment ([`resumed`]:
//! `PENDING_CALLEE`), the blocks of the callee that keep the context
//! count theirs as always, and a block ending in `ret` counts its run too
//! ([`returning`]: `PENDING_RETURN`). When the return matches the call
//! (`quiet::return_check`: `RETURNED`), the block it goes on to counts
//! its run in the record the cache entry kept ([`resumed`]) and the call
//! is over, counted: the calling block's record says its runs made the
//! call each time (`Repeat::Calls`), the sink counts them on the arc of
//! the first, whose callee's records hold the costs of all of them.
//!
//! Anything else that needs a record while a call is pending (a block
//! with no record in the segment, another call, a return to elsewhere, a
//! system call) first writes the pending call's records in order ([`write_routine`]:
//! the calling block's, the callee's first block's and the returning
//! block's, each with one run, taken off the records they were counted
//! in), so that the records read in order are those of the call run
//! plainly. So does the tracer at every drain or hand-off of a buffer
//! half ([`settle`]). One call at most is pending: a call made in a
//! pending call's callee writes the pending call's records first.
//!
//! A normal return keeps in the call's cache entry the segment and the
//! address of the record it goes on to write ([`resumed`],
//! `RETURN_CACHE`), for the next run of the call.

use iced_x86::{Code, Instruction, MemoryOperand, Register};

use crate::error::{Error, Result};
use crate::event::Repeat;

use super::area::{
    slot, Area, BACK, CURSOR, PENDING_CALL, PENDING_CALLEE, PENDING_CALLEE_SP, PENDING_CALL_SP,
    PENDING_RETURN, PENDING_RETURN_SP, PENDING_SLOTS, RECORD, RETURNED, RETURN_CACHE, SAVE_RAX,
    SAVE_RDX, SEGMENT, TEMP, WRITE_RDX,
};
use super::emit::Emit;
use super::memory::Memory;
use super::quiet::{
    add_run, count_run, jump_if_equal_to, subtract_rcx, to_fresh, CountLabels, Value,
};
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
    /// A block ending in a direct call, whose cache entry is at `cache`:
    /// the runs that make a call pending, and those a pending call
    /// returns to.
    Calls {
        /// The call's cache entry (`quiet::call_cache`).
        cache: u64,
    },
    /// A block ending in `ret`: the runs in a pending call's callee.
    Returns,
}

impl Counted {
    /// How the runs counted in a record of the translation are reported
    /// (`WholeBlock::repeat`); `None` for a record with no count.
    pub fn repeat(self) -> Option<Repeat> {
        match self {
            Counted::Never => None,
            Counted::Cached => Some(Repeat::Again),
            Counted::Calls { .. } => Some(Repeat::Calls),
            Counted::Callee | Counted::Returns => Some(Repeat::InContext),
        }
    }

    /// Whether a run a pending call returns to may be counted: a block
    /// whose successor needs no record right after its own.
    fn after_return(self) -> bool {
        matches!(
            self,
            Counted::Cached | Counted::Callee | Counted::Calls { .. }
        )
    }

    /// Whether the first run of a pending call's callee may be counted:
    /// not one that makes a call itself.
    fn as_callee(self) -> bool {
        matches!(self, Counted::Cached | Counted::Callee | Counted::Returns)
    }
}

/// Labels of the rules here (above `quiet`'s).
const CALLING_FREE: u64 = 0x910;
const CALLING_CALLER: u64 = 0x911;
const CALLING_RETURN: u64 = 0x912;
const RETURNING: u64 = 0x918;
const RETURNED_NOT: u64 = 0x920;
const RETURNED_SEGMENT: u64 = 0x921;
const RETURNED_NUMBER: u64 = 0x922;
const RETURNED_CALLER: u64 = 0x923;
const RETURNED_RETURN: u64 = 0x924;
const RETURNED_FAIL: u64 = 0x926;
const RETURN_NOT: u64 = 0x928;
const RETURN_KEEP: u64 = 0x929;
const RETURN_KEPT: u64 = 0x92a;
const CALLEE_PLAIN: u64 = 0x930;
const CALLEE_WANTED: u64 = 0x931;
/// The labels of the resume path's [`count_run`].
const RESUME_COUNT: CountLabels = CountLabels {
    test_record: 0x938,
    miss: 0x939,
    hit: 0x93a,
};

/// The word at `displacement` of the thread's area plus `base` (a
/// register holding an offset in the area).
fn area_word(base: Register, displacement: i64) -> MemoryOperand {
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

/// In the quiet path of a block ending in a direct call (`id`, its cache
/// entry at `cache`), rax and rcx in their slots: when no call is
/// pending and the call's last run was made in the thread's segment
/// (the cache entry's first word) with a record kept for its return
/// (third word), the run counted in the block's record of the segment
/// ([`count_run`]) makes the call pending; else a record.
pub(super) fn calling(
    code: &mut Emit,
    id: u32,
    cache: u64,
    labels: CountLabels,
    body: u64,
) -> Result<(), Refusal> {
    let (rax, rcx, rsp) = (Register::RAX, Register::RCX, Register::RSP);
    code.load(rcx, PENDING_CALL)?;
    code.jump(Code::Jrcxz_rel8_64, CALLING_FREE)?;
    to_fresh(code)?;
    code.label(CALLING_FREE);
    code.load(rax, SEGMENT)?;
    jump_if_equal_to(code, Value::Register(rax), slot(cache), CALLING_CALLER)?;
    to_fresh(code)?;
    code.label(CALLING_CALLER);
    jump_if_equal_to(code, Value::Register(rax), slot(cache + 16), CALLING_RETURN)?;
    to_fresh(code)?;
    code.label(CALLING_RETURN);
    count_run(code, id, labels, body, |code| {
        code.save(PENDING_CALL, rax)?;
        code.save(PENDING_CALL_SP, rsp)
    })
}

/// In the quiet path of a block ending in `ret` (`id`), rax and rcx in
/// their slots: in a pending call's callee, the run counted in the
/// block's record of the segment ([`count_run`], kept in
/// `PENDING_RETURN`); else a record.
pub(super) fn returning(
    code: &mut Emit,
    id: u32,
    labels: CountLabels,
    body: u64,
) -> Result<(), Refusal> {
    let (rax, rcx, rsp) = (Register::RAX, Register::RCX, Register::RSP);
    code.load(rcx, PENDING_CALLEE)?;
    code.jump(Code::Jrcxz_rel8_64, RETURNING)?;
    count_run(code, id, labels, body, |code| {
        code.save(PENDING_RETURN, rax)?;
        code.save(PENDING_RETURN_SP, rsp)
    })?;
    code.label(RETURNING);
    to_fresh(code)
}

/// The rest of the resume path of translation `id` (rax and rcx in their
/// slots, the region set), by what it arrives from:
///
/// - a pending call's return (`RETURNED`): when `counted` allows and the
///   call's cache entry kept a record of the translation in the thread's
///   segment, the run counted there, the call over (for a block ending
///   in a call, its own call pending when [`calling`]'s conditions
///   hold); else a record, the pending call's first;
/// - a normal return (`RETURN_CACHE`): a record, kept in the call's
///   cache entry (segment and address) when `counted` allows and no call
///   is pending;
/// - a pending call (`PENDING_CALL` set, `PENDING_CALLEE` not): when
///   `counted` allows, the run counted in the translation's record of the
///   segment ([`count_run`], kept in `PENDING_CALLEE`); else a record, the
///   pending call's first;
/// - else a record.
pub(super) fn resumed(
    code: &mut Emit,
    counted: Counted,
    id: u32,
    body: u64,
) -> Result<(), Refusal> {
    let (rax, rcx, rdx, rsp) = (Register::RAX, Register::RCX, Register::RDX, Register::RSP);
    code.load(rcx, RETURNED)?;
    code.jump(Code::Jrcxz_rel8_64, RETURNED_NOT)?;
    if counted.after_return() {
        code.save(SAVE_RDX, rdx)?;
        code.push(Instruction::with2(Code::Mov_r64_rm64, rdx, rcx))?;
        code.load(rax, SEGMENT)?;
        let kept_segment = area_word(rdx, 16);
        jump_if_equal_to(code, Value::Register(rax), kept_segment, RETURNED_SEGMENT)?;
        code.jump(Code::Jmp_rel32_64, RETURNED_FAIL)?;
        code.label(RETURNED_SEGMENT);
        code.push(Instruction::with2(
            Code::Mov_r64_rm64,
            rax,
            area_word(rdx, 24),
        ))?;
        let number = MemoryOperand::with_base(rax);
        code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, number))?;
        code.push(Instruction::with1(Code::Not_rm64, rcx))?;
        code.lea(rcx, rcx, i64::from(id) + 1)?;
        code.jump(Code::Jrcxz_rel8_64, RETURNED_NUMBER)?;
        code.jump(Code::Jmp_rel32_64, RETURNED_FAIL)?;
        code.label(RETURNED_NUMBER);
        if let Counted::Calls { cache } = counted {
            code.load(rdx, SEGMENT)?;
            jump_if_equal_to(code, Value::Register(rdx), slot(cache), RETURNED_CALLER)?;
            code.jump(Code::Jmp_rel32_64, RETURNED_FAIL)?;
            code.label(RETURNED_CALLER);
            jump_if_equal_to(
                code,
                Value::Register(rdx),
                slot(cache + 16),
                RETURNED_RETURN,
            )?;
            code.jump(Code::Jmp_rel32_64, RETURNED_FAIL)?;
            code.label(RETURNED_RETURN);
        }
        code.save(RECORD, rax)?;
        add_run(code, rax)?;
        for done in [RETURNED, PENDING_CALLEE, PENDING_RETURN] {
            clear(code, done)?;
        }
        match counted {
            Counted::Calls { .. } => {
                code.save(PENDING_CALL, rax)?;
                code.save(PENDING_CALL_SP, rsp)?;
            }
            _ => clear(code, PENDING_CALL)?,
        }
        code.load(rdx, SAVE_RDX)?;
        code.load(rcx, TEMP)?;
        code.load(rax, SAVE_RAX)?;
        code.jump(Code::Jmp_rel32_64, body)?;
        code.label(RETURNED_FAIL);
        code.load(rdx, SAVE_RDX)?;
    }
    to_fresh(code)?;

    code.label(RETURNED_NOT);
    code.load(rcx, RETURN_CACHE)?;
    code.jump(Code::Jrcxz_rel8_64, RETURN_NOT)?;
    clear(code, RETURN_CACHE)?;
    if counted.after_return() {
        code.save(SAVE_RDX, rdx)?;
        code.push(Instruction::with2(Code::Mov_r64_rm64, rdx, rcx))?;
        code.load(rcx, PENDING_CALL)?;
        code.jump(Code::Jrcxz_rel8_64, RETURN_KEEP)?;
        code.push(Instruction::with2(
            Code::Mov_rm64_imm32,
            area_word(rdx, 16),
            0,
        ))?;
        code.jump(Code::Jmp_rel32_64, RETURN_KEPT)?;
        code.label(RETURN_KEEP);
        code.load(rcx, SEGMENT)?;
        code.push(Instruction::with2(
            Code::Mov_rm64_r64,
            area_word(rdx, 16),
            rcx,
        ))?;
        code.load(rcx, CURSOR)?;
        code.push(Instruction::with2(
            Code::Mov_rm64_r64,
            area_word(rdx, 24),
            rcx,
        ))?;
        code.label(RETURN_KEPT);
        code.load(rdx, SAVE_RDX)?;
    }
    to_fresh(code)?;

    code.label(RETURN_NOT);
    if counted.as_callee() {
        code.load(rcx, PENDING_CALL)?;
        code.jump(Code::Jrcxz_rel8_64, CALLEE_PLAIN)?;
        code.load(rcx, PENDING_CALLEE)?;
        code.jump(Code::Jrcxz_rel8_64, CALLEE_WANTED)?;
        code.jump(Code::Jmp_rel32_64, CALLEE_PLAIN)?;
        code.label(CALLEE_WANTED);
        count_run(code, id, RESUME_COUNT, body, |code| {
            code.save(PENDING_CALLEE, rax)?;
            code.save(PENDING_CALLEE_SP, rsp)
        })?;
        code.label(CALLEE_PLAIN);
    }
    to_fresh(code)
}

/// Labels of the routine.
const WRITE_NO_CALLEE: u64 = 1;
const WRITE_ALL: u64 = 2;
const TAKE_CALLEE: u64 = 3;
const TAKE_RETURN: u64 = 4;

/// Appends at rdx a record of the translation whose record is at
/// `record`, with one run and the stack pointer in the slot at `sp`;
/// rdx moves past it; rcx is lost.
fn copy_record(code: &mut Emit, record: Register, sp: u64) -> Result<(), Refusal> {
    let (rcx, rdx) = (Register::RCX, Register::RDX);
    let word = |at: i64| MemoryOperand::with_base_displ(rdx, at);
    code.push(Instruction::with2(
        Code::Mov_r64_rm64,
        rcx,
        MemoryOperand::with_base(record),
    ))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(0), rcx))?;
    code.push(Instruction::with2(Code::Mov_rm64_imm32, word(8), 1))?;
    code.load(rcx, sp)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(16), rcx))?;
    code.lea(rdx, rdx, 24)
}

/// One run less in the record at `record` (its runs word, through rcx).
fn take_run(code: &mut Emit, record: Register) -> Result<(), Refusal> {
    let rcx = Register::RCX;
    let runs = MemoryOperand::with_base_displ(record, 8);
    code.push(Instruction::with2(Code::Mov_r64_rm64, rcx, runs))?;
    code.lea(rcx, rcx, -1)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, runs, rcx))
}

/// rcx = the returning block's record minus the callee's first block's
/// (0 when it is that block), rax the former; rcx jumps to `none` when
/// there is no returning block's record first.
fn returning_record(code: &mut Emit, none: u64) -> Result<(), Refusal> {
    let (rax, rcx) = (Register::RAX, Register::RCX);
    code.load(rcx, PENDING_RETURN)?;
    code.jump(Code::Jrcxz_rel8_64, none)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, rcx))?;
    code.load(rcx, PENDING_CALLEE)?;
    subtract_rcx(code, rax, rcx)
}

/// The routine, encoded at `at`, that writes the pending call's records
/// in order, entered by a jump from a translation's record writing (rax
/// and rcx in their slots, a call pending) and going back through the
/// `BACK` slot (the translation's fresh entry), flags untouched: at the
/// cursor, the calling block's record, the callee's first block's and
/// the returning block's (when they ran and are not the callee's first),
/// each with one run and the stack pointer of its run; only then (a store
/// that faults in a guard page has changed nothing: the tracer settles
/// the call, `stops`) the cursor moved, a run taken off each record they
/// were counted in, and no call pending.
pub(super) fn write_routine(at: u64) -> std::result::Result<Vec<u8>, Refusal> {
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    let mut code = Emit::default();
    code.save(WRITE_RDX, rdx)?;
    code.load(rdx, CURSOR)?;
    code.load(rax, PENDING_CALL)?;
    copy_record(&mut code, rax, PENDING_CALL_SP)?;
    code.load(rcx, PENDING_CALLEE)?;
    code.jump(Code::Jrcxz_rel8_64, WRITE_NO_CALLEE)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, rcx))?;
    copy_record(&mut code, rax, PENDING_CALLEE_SP)?;
    code.label(WRITE_NO_CALLEE);
    returning_record(&mut code, WRITE_ALL)?;
    code.jump(Code::Jrcxz_rel8_64, WRITE_ALL)?;
    copy_record(&mut code, rax, PENDING_RETURN_SP)?;
    code.label(WRITE_ALL);
    code.save(CURSOR, rdx)?;
    code.load(rax, PENDING_CALL)?;
    take_run(&mut code, rax)?;
    code.load(rcx, PENDING_CALLEE)?;
    code.jump(Code::Jrcxz_rel8_64, TAKE_CALLEE)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rax, rcx))?;
    take_run(&mut code, rax)?;
    code.label(TAKE_CALLEE);
    returning_record(&mut code, TAKE_RETURN)?;
    code.jump(Code::Jrcxz_rel8_64, TAKE_RETURN)?;
    take_run(&mut code, rax)?;
    code.label(TAKE_RETURN);
    for done in [PENDING_CALL, PENDING_CALLEE, PENDING_RETURN, RETURNED] {
        clear(&mut code, done)?;
    }
    code.load(rdx, WRITE_RDX)?;
    code.push(Instruction::with1(Code::Jmp_rm64, slot(BACK)))?;
    let (bytes, _) = super::encode::encode(&code.list, at)
        .map_err(|error| format!("the routine of pending calls: {error}"))?;
    Ok(bytes)
}

/// What [`write_routine`] does, by the tracer for a stopped thread
/// (`area`): the words of the pending call's records (none when no call
/// is pending), a run taken off each record they were counted in, and the
/// thread's pending slots zeroed. The caller appends the words to the
/// records read so far, in order.
pub(super) fn settle(memory: &Memory, area: &Area) -> Result<Vec<u64>> {
    let mut slots = [0u64; PENDING_SLOTS];
    memory.read(area.at(PENDING_CALL), bytemuck::cast_slice_mut(&mut slots))?;
    let [call, call_sp, callee, callee_sp, ret, ret_sp, ..] = slots;
    if call == 0 {
        return Ok(Vec::new());
    }
    let mut words = Vec::with_capacity(9);
    let returning = (ret != callee).then_some((ret, ret_sp));
    for (record, sp) in [Some((call, call_sp)), Some((callee, callee_sp)), returning]
        .into_iter()
        .flatten()
        .filter(|&(record, _)| record != 0)
    {
        let id = memory.read_u64(record)?;
        let runs = memory.read_u64(record + 8)?.checked_sub(1).ok_or_else(|| {
            Error::Unexpected("translate: a pending call's record counts no run".into())
        })?;
        memory.write_u64(record + 8, runs)?;
        words.extend([id, 1, sp]);
    }
    memory.write(area.at(PENDING_CALL), &[0u8; 8 * PENDING_SLOTS])?;
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::super::encode::encode;
    use super::*;

    /// Every piece encodes (its labels resolved against the others' fake
    /// addresses) and changes no flag of the program.
    fn flag_free(list: Vec<Instruction>) {
        let mut list = list;
        let mut body = Instruction::with(Code::Nopd);
        body.set_ip(3);
        list.push(body);
        let mut fresh = Instruction::with(Code::Int3);
        fresh.set_ip(super::super::quiet::FRESH);
        list.push(fresh);
        assert!(encode(&list, 0x7f00_0000_0000).is_ok());
        for instruction in &list {
            assert_eq!(instruction.rflags_modified(), 0, "{:?}", instruction.code());
        }
    }

    const COUNTS: CountLabels = CountLabels {
        test_record: 0x800,
        miss: 0x801,
        hit: 0x802,
    };

    #[test]
    fn the_rules_encode_and_leave_the_flags_alone() {
        let mut code = Emit::default();
        calling(&mut code, 7, 0x10_0000, COUNTS, 3).unwrap();
        flag_free(code.list);
        let mut code = Emit::default();
        returning(&mut code, 7, COUNTS, 3).unwrap();
        flag_free(code.list);
        let kinds = [
            Counted::Never,
            Counted::Cached,
            Counted::Callee,
            Counted::Calls { cache: 0x10_0000 },
            Counted::Returns,
        ];
        for counted in kinds {
            let mut code = Emit::default();
            resumed(&mut code, counted, 7, 3).unwrap();
            flag_free(code.list);
        }
    }

    #[test]
    fn the_routine_encodes() {
        assert!(write_routine(0x7f00_0000_0000).is_ok());
    }

    #[test]
    fn repeats_are_reported_as_the_runs_were_counted() {
        assert_eq!(Counted::Never.repeat(), None);
        assert_eq!(Counted::Cached.repeat(), Some(Repeat::Again));
        assert_eq!(Counted::Calls { cache: 0 }.repeat(), Some(Repeat::Calls));
        assert_eq!(Counted::Returns.repeat(), Some(Repeat::InContext));
        assert_eq!(Counted::Callee.repeat(), Some(Repeat::InContext));
        // A block that calls is never a pending call's callee; one that
        // returns never runs right after a pending call's return.
        assert!(!Counted::Calls { cache: 0 }.as_callee());
        assert!(!Counted::Returns.after_return());
        assert!(Counted::Cached.as_callee() && Counted::Cached.after_return());
    }
}
