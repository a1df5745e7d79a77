//! Whether the program's status flags are dead where a block starts: the
//! block's own instructions give every status flag a new value before any
//! of them reads one, so code run at the block's entry (`quiet`) may
//! change them.
//!
//! A flag an instruction leaves undefined counts as given (a program
//! cannot rely on it, and Valgrind's model gives its own value too); an
//! instruction that leaves the flags unchanged for some operands gives
//! none: a shift or rotate (a count of 0), and a string instruction with a
//! `rep` prefix (a count of 0).

use iced_x86::{Instruction, Mnemonic, RflagsBits};

/// The six status flags.
const STATUS: u32 = RflagsBits::OF
    | RflagsBits::SF
    | RflagsBits::ZF
    | RflagsBits::AF
    | RflagsBits::CF
    | RflagsBits::PF;

/// Whether `instruction` leaves the flags unchanged for some operands.
fn may_keep_flags(instruction: &Instruction) -> bool {
    instruction.has_rep_prefix()
        || instruction.has_repne_prefix()
        || matches!(
            instruction.mnemonic(),
            Mnemonic::Shl
                | Mnemonic::Sal
                | Mnemonic::Shr
                | Mnemonic::Sar
                | Mnemonic::Rol
                | Mnemonic::Ror
                | Mnemonic::Rcl
                | Mnemonic::Rcr
                | Mnemonic::Shld
                | Mnemonic::Shrd
        )
}

/// Whether the status flags are dead at the start of the block of
/// `instructions` (in order): each is given a value by one of them before
/// any of them reads it.
pub(super) fn status_flags_dead<'a>(
    instructions: impl IntoIterator<Item = &'a Instruction>,
) -> bool {
    let mut given = 0;
    for instruction in instructions {
        if instruction.rflags_read() & STATUS & !given != 0 {
            return false;
        }
        if !may_keep_flags(instruction) {
            given |= instruction.rflags_modified() & STATUS;
        }
        if given == STATUS {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    /// The instructions of `bytes`.
    fn decode(bytes: &[u8]) -> Vec<Instruction> {
        Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    #[test]
    fn flags_are_dead_only_when_the_block_gives_all_before_reading_any() {
        let cases: &[(&str, &[u8], bool)] = &[
            // cmp rax, rbx; jne
            ("cmp then jcc", &[0x48, 0x39, 0xd8, 0x75, 0x00], true),
            // mov rax, rbx; add rax, 1; je
            (
                "mov, add then jcc",
                &[0x48, 0x89, 0xd8, 0x48, 0x83, 0xc0, 0x01, 0x74, 0x00],
                true,
            ),
            // test eax, eax (AF undefined); jne
            ("test then jcc", &[0x85, 0xc0, 0x75, 0x00], true),
            // jne: reads what the block before left
            ("a lone jcc", &[0x75, 0x00], false),
            // adc rax, rbx: reads CF first
            ("adc", &[0x48, 0x11, 0xd8, 0x75, 0x00], false),
            // inc rax (CF kept); je: CF never given
            ("inc then jcc", &[0x48, 0xff, 0xc0, 0x74, 0x00], false),
            // shl rax, cl (a count of 0 keeps them); je
            ("shl by cl then jcc", &[0x48, 0xd3, 0xe0, 0x74, 0x00], false),
            // shl rax, cl; cmp rax, rbx; je
            (
                "shl by cl, then cmp",
                &[0x48, 0xd3, 0xe0, 0x48, 0x39, 0xd8, 0x74, 0x00],
                true,
            ),
            // rep cmpsb (a count of 0 keeps them); je
            ("rep cmpsb then jcc", &[0xf3, 0xa6, 0x74, 0x00], false),
            // mov eax, 1; ret: no flag given, the caller may read them
            ("mov then ret", &[0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3], false),
            // pushfq; cmp: reads all first
            ("pushf first", &[0x9c, 0x48, 0x39, 0xd8], false),
            // cmp; setne al; jmp: reads after they are given
            (
                "cmp, setcc, jmp",
                &[0x48, 0x39, 0xd8, 0x0f, 0x95, 0xc0, 0xeb, 0x00],
                true,
            ),
        ];
        for &(name, bytes, dead) in cases {
            let instructions = decode(bytes);
            assert_eq!(status_flags_dead(&instructions), dead, "{name}");
        }
    }
}
