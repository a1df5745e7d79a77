//! The record routine of a region (with quiet runs, `quiet`): the part of
//! a translation's entry that the region's translations share. A
//! translation's entry keeps only what is its own (rax and rcx saved, the
//! segment's region, its entry's address in rax, see `quiet::entry`) and
//! jumps to an entry of the routine:
//!
//! - `bump`: a new segment (number, stack pointer), then `fresh`;
//! - `fresh`: the runs kept in order for pending calls first, when there
//!   are any (the region's routine of pending calls,
//!   `pending::write_routine`, which goes back to the translation's fresh
//!   entry), else straight on at the fresh entry;
//!
//! and the translation's fresh entry (entered with rax its entry's
//! address) leads to the writing of its record, for the two layouts
//! nearly every translation has an entry of the routine:
//!
//! - `counted`: [number, 1, stack pointer], the record entered in the
//!   thread's table of records (a block whose later runs in the segment
//!   may be counted in it) and its address in the `RECORD` slot;
//! - `plain`: [number, stack pointer], its address in the `RECORD` slot
//!   too (which a filter's records name, `filter`);
//!
//! both then on at the translation's first instruction (its body entry),
//! every register back. A translation whose record holds other words
//! writes it itself. The translation's number, and with it its part of
//! the table's index, comes from its data word (`pending::data_word`).
//! Flags untouched (`mov`, `lea`, `movzx`, `jrcxz`, `jmp`). A record
//! store that faults in a guard page has changed nothing the thread
//! needs: the tracer restarts the translation at its entry (in the
//! `WRITING` slot), rcx and rdx back from their slots (`stops`).

use iced_x86::{Code, Instruction, MemoryOperand, Register};

use super::area::{
    slot, BACK, CHAIN_END, CURSOR, JUMP, RECORD, SAVE_RAX, SAVE_RDX, SEGMENT, SEGMENT_SP, TEMP,
    WRITING,
};
use super::emit::Emit;
use super::quiet::{enter_record, new_segment, runs_index_of, BODY_ENTRY, DATA, FRESH_ENTRY};
use super::translator::{RecordLayout, Refusal};

/// Labels of the routine.
const BUMP: u64 = 1;
const FRESH: u64 = 2;
const NONE_PENDING: u64 = 3;
const COUNTED: u64 = 4;
const PLAIN: u64 = 5;
const WRITTEN: u64 = 6;

/// The routine's bytes and the addresses of its entries.
#[derive(Clone, Debug)]
pub(super) struct RecordRoutine {
    /// The bytes, from `bump`.
    pub bytes: Vec<u8>,
    /// The entries.
    pub entries: RecordEntries,
}

/// Where the entries of a region's record routine are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RecordEntries {
    /// A new segment, then `fresh`.
    pub bump: u64,
    /// The runs kept in order for pending calls, then the translation's
    /// fresh entry.
    pub fresh: u64,
    /// The writing of a record [number, 1, stack pointer] entered in the
    /// table of records.
    pub counted: u64,
    /// The writing of a record [number, stack pointer].
    pub plain: u64,
}

impl RecordEntries {
    /// The entry that writes a record of `layout`, when there is one:
    /// `counted` for a record that counts its runs in the table of
    /// records (`in_table`), `plain` for one of the number and the stack
    /// pointer alone.
    pub fn writing(&self, layout: RecordLayout, in_table: bool) -> Option<u64> {
        let counts = layout.bytes == 24 && layout.runs && layout.record_slot;
        let plain = layout.bytes == 16 && !layout.runs;
        match (counts, plain) {
            (true, false) if in_table => Some(self.counted),
            (false, true) if !in_table => Some(self.plain),
            _ => None,
        }
    }
}

/// The word at `displacement` from the address in `base`.
fn word(base: Register, displacement: i64) -> MemoryOperand {
    MemoryOperand::with_base_displ(base, displacement)
}

/// The start of a record's writing (rax the translation's entry): the
/// entry kept in `WRITING`, rdx saved and the entry, rax the cursor, rcx
/// the translation's number (from its data word).
fn start_record(code: &mut Emit) -> Result<(), Refusal> {
    let (rax, rdx) = (Register::RAX, Register::RDX);
    code.save(WRITING, rax)?;
    code.save(SAVE_RDX, rdx)?;
    code.push(Instruction::with2(Code::Mov_r64_rm64, rdx, rax))?;
    code.load(rax, CURSOR)?;
    code.push(Instruction::with2(
        Code::Mov_r32_rm32,
        Register::ECX,
        word(rdx, -(DATA as i64)),
    ))
}

/// rdx, rcx and rax back from their slots, then on at the address in the
/// `JUMP` slot (flags untouched).
pub(super) fn back_through_jump(code: &mut Emit) -> Result<(), Refusal> {
    code.load(Register::RDX, SAVE_RDX)?;
    code.load(Register::RCX, TEMP)?;
    code.load(Register::RAX, SAVE_RAX)?;
    code.push(Instruction::with1(Code::Jmp_rm64, slot(JUMP)))
}

/// The record routine, encoded at `at`, whose `fresh` entry has a
/// pending call's records written by the routine at `write_pending`.
pub(super) fn record_routine(at: u64, write_pending: u64) -> Result<RecordRoutine, Refusal> {
    let (rax, rcx, rdx, rsp) = (Register::RAX, Register::RCX, Register::RDX, Register::RSP);
    let mut code = Emit::default();

    code.label(BUMP);
    new_segment(&mut code, rcx)?;
    code.save(SEGMENT, rcx)?;
    code.save(SEGMENT_SP, rsp)?;

    code.label(FRESH);
    code.load(rcx, CHAIN_END)?;
    code.jump(Code::Jrcxz_rel8_64, NONE_PENDING)?;
    code.lea(rcx, rax, -(FRESH_ENTRY as i64))?;
    code.save(BACK, rcx)?;
    code.jump(Code::Jmp_rel32_64, write_pending)?;
    code.label(NONE_PENDING);
    code.lea(rcx, rax, -(FRESH_ENTRY as i64))?;
    code.push(Instruction::with1(Code::Jmp_rm64, rcx))?;

    code.label(COUNTED);
    start_record(&mut code)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(rax, 0), rcx))?;
    code.push(Instruction::with2(Code::Mov_rm64_imm32, word(rax, 8), 1))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(rax, 16), rsp))?;
    code.save(RECORD, rax)?;
    code.load(rdx, SEGMENT)?;
    code.load(rcx, WRITING)?;
    runs_index_of(&mut code, rcx, rdx)?;
    enter_record(&mut code, rdx, rax)?;
    code.lea(rax, rax, 24)?;
    code.jump(Code::Jmp_rel32_64, WRITTEN)?;

    code.label(PLAIN);
    start_record(&mut code)?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(rax, 0), rcx))?;
    code.push(Instruction::with2(Code::Mov_rm64_r64, word(rax, 8), rsp))?;
    code.save(RECORD, rax)?;
    code.lea(rax, rax, 16)?;

    code.label(WRITTEN);
    code.save(CURSOR, rax)?;
    code.load(rax, WRITING)?;
    code.lea(rax, rax, -(BODY_ENTRY as i64))?;
    code.save(JUMP, rax)?;
    back_through_jump(&mut code)?;

    let (bytes, offsets) = super::encode::encode(&code.list, at)
        .map_err(|error| format!("the record routine: {error}"))?;
    let entry =
        |label| super::encode::labelled(&code.list, &offsets, at, label, "the record routine");
    Ok(RecordRoutine {
        entries: RecordEntries {
            bump: entry(BUMP)?,
            fresh: entry(FRESH)?,
            counted: entry(COUNTED)?,
            plain: entry(PLAIN)?,
        },
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(bytes: u64, runs: bool, record_slot: bool) -> RecordLayout {
        RecordLayout {
            id: 7,
            bytes,
            runs,
            record_slot,
        }
    }

    #[test]
    fn the_routine_writes_the_two_usual_layouts_and_no_other() {
        let entries = RecordEntries {
            bump: 1,
            fresh: 2,
            counted: 3,
            plain: 4,
        };
        assert_eq!(entries.writing(layout(24, true, true), true), Some(3));
        assert_eq!(entries.writing(layout(16, false, false), false), Some(4));
        // Its address goes to the slot either way.
        assert_eq!(entries.writing(layout(16, false, true), false), Some(4));
        // A record with a recorded word, or that counts runs outside the
        // table (a block looping on itself), or a plain one in the table.
        assert_eq!(entries.writing(layout(32, true, true), true), None);
        assert_eq!(entries.writing(layout(24, true, true), false), None);
        assert_eq!(entries.writing(layout(24, false, true), false), None);
        assert_eq!(entries.writing(layout(16, false, false), true), None);
    }

    #[test]
    fn the_routine_encodes_with_its_entries_in_order_and_leaves_the_flags_alone() {
        let at = 0x7f00_0000_0000;
        let routine = record_routine(at, 0x7f00_0010_0000).unwrap();
        let entries = routine.entries;
        assert_eq!(entries.bump, at);
        assert!(entries.bump < entries.fresh);
        assert!(entries.fresh < entries.counted);
        assert!(entries.counted < entries.plain);
        assert!(entries.plain < at + routine.bytes.len() as u64);
        let mut decoder =
            iced_x86::Decoder::with_ip(64, &routine.bytes, at, iced_x86::DecoderOptions::NONE);
        for instruction in &mut decoder {
            assert!(!instruction.is_invalid());
            assert_eq!(instruction.rflags_modified(), 0, "{:?}", instruction.code());
        }
    }
}
