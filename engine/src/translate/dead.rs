//! Which of the checks' scratch registers (`rax`, `rcx`, `rdx`, see
//! `filter`) the program no longer needs before an instruction of a
//! block: the instruction and those after it in the block write the
//! register whole before any of them reads it. A check placed before the
//! instruction may then leave its own value there instead of saving and
//! restoring the program's.
//!
//! A write of a 64-bit register or of its 32-bit half (which zeroes the
//! rest) gives it whole; a write of 8 or 16 bits keeps the rest, and a
//! conditional write (`cmov`) may keep it all. Any read, of any part,
//! keeps it needed. The block's last instruction ends the look (a call,
//! jump or return leaves to code that may read them: they stay needed
//! unless written before).

use iced_x86::{Instruction, InstructionInfoFactory, OpAccess, Register};

/// Scratch registers, as a set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Scratch(u8);

impl Scratch {
    /// No register.
    pub const NONE: Scratch = Scratch(0);

    /// Whether `register` (`rax`, `rcx` or `rdx`) is in the set.
    pub fn has(self, register: Register) -> bool {
        bit(register).is_some_and(|bit| self.0 & bit != 0)
    }
}

/// The bit of a scratch register, by its full register.
fn bit(register: Register) -> Option<u8> {
    match register.full_register() {
        Register::RAX => Some(1),
        Register::RCX => Some(2),
        Register::RDX => Some(4),
        _ => None,
    }
}

/// All three.
const ALL: u8 = 7;

/// For each of a block's instructions, the scratch registers dead right
/// before it (the last one's: none).
pub(super) fn dead_before(instructions: &[Option<Instruction>]) -> Vec<Scratch> {
    let mut factory = InstructionInfoFactory::new();
    let mut dead = vec![Scratch::NONE; instructions.len()];
    // Walking back from the last instruction (before which none is
    // known dead): what each gives and reads.
    let mut known = Scratch::NONE;
    for (index, instruction) in instructions.iter().enumerate().rev().skip(1) {
        let Some(instruction) = instruction else {
            known = Scratch::NONE;
            dead[index] = known;
            continue;
        };
        let (mut given, mut read) = (0u8, 0u8);
        for used in factory.info(instruction).used_registers() {
            let Some(bit) = bit(used.register()) else {
                continue;
            };
            let whole = matches!(used.register().size(), 8 | 4);
            match used.access() {
                OpAccess::Write if whole => given |= bit,
                OpAccess::Write | OpAccess::CondWrite => {}
                _ => read |= bit,
            }
        }
        // Dead before it: given by it and not read by it, or dead after
        // it and not read by it.
        known = Scratch((given | known.0) & !read & ALL);
        dead[index] = known;
    }
    dead
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    /// The instructions of `bytes`.
    fn decode(bytes: &[u8]) -> Vec<Option<Instruction>> {
        Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE)
            .into_iter()
            .map(Some)
            .collect()
    }

    fn names(scratch: Scratch) -> String {
        [
            (Register::RAX, "a"),
            (Register::RCX, "c"),
            (Register::RDX, "d"),
        ]
        .iter()
        .filter(|(register, _)| scratch.has(*register))
        .map(|(_, name)| *name)
        .collect()
    }

    #[test]
    fn a_register_is_dead_where_the_block_writes_it_whole_before_reading_it() {
        let cases: &[(&str, &[u8], &[&str])] = &[
            // mov eax, [rbx]; mov rcx, rax; ret
            (
                "32-bit write, then read",
                &[0x8b, 0x03, 0x48, 0x89, 0xc1, 0xc3],
                &["ac", "c", ""],
            ),
            // mov al, [rbx]; xor edx, edx (a zeroing idiom: no read); ret
            (
                "8-bit write keeps the rest",
                &[0x8a, 0x03, 0x31, 0xd2, 0xc3],
                &["d", "d", ""],
            ),
            // mov [rax+rcx*8], rbx; mov eax, 1; jmp
            (
                "an address reads its registers",
                &[0x48, 0x89, 0x1c, 0xc8, 0xb8, 0x01, 0, 0, 0, 0xeb, 0x00],
                &["", "a", ""],
            ),
            // cmovz rax, rbx; mov rdx, rbx; ret
            (
                "a conditional write keeps it",
                &[0x48, 0x0f, 0x44, 0xc3, 0x48, 0x89, 0xda, 0xc3],
                &["d", "d", ""],
            ),
            // mov rax, rbx; call [rip]: the call ends the look
            (
                "nothing is known after the block",
                &[0x48, 0x89, 0xd8, 0xff, 0x15, 0, 0, 0, 0],
                &["a", ""],
            ),
        ];
        for (what, bytes, expected) in cases {
            let dead: Vec<String> = dead_before(&decode(bytes)).into_iter().map(names).collect();
            assert_eq!(dead, *expected, "{what}");
        }
    }
}
