//! Encoding the instruction list of a translation at its address.
//!
//! The lists hold no branch whose size depends on where it lands but
//! `jrcxz` (rel8); labels are instructions given a small fake address
//! (the translator's `REPEAT`, `BODY`, the system call label, the lookup
//! routine's miss path), which branches and RIP-relative operands (a
//! `lea` of a label's address, `filter`) target. Most lists are encoded
//! here with one pass of iced's `Encoder` (branches to labels patched
//! after it), several times faster than its `BlockEncoder`; a list that
//! does not fit that (a `jrcxz` out of reach, a branch or RIP-relative
//! operand out of rel32 reach) goes to the `BlockEncoder`, which fixes
//! what it can.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Encoder, Instruction, InstructionBlock, OpKind, Register,
};

/// Room an encoding of a list takes per instruction at first.
const BYTES_PER_INSTRUCTION: usize = 10;

/// Below this, a branch target is a label (an instruction's fake address):
/// no code is mapped there (Linux keeps the first pages unmapped,
/// `vm.mmap_min_addr`).
const LABELS: u64 = 0x1000;

/// The bytes of `list` encoded at `at`, and the offset of each instruction
/// in them.
pub(super) fn encode(list: &[Instruction], at: u64) -> Result<(Vec<u8>, Vec<u32>), String> {
    if let Some(encoded) = encode_in_one_pass(list, at) {
        return Ok(encoded);
    }
    if let Some(label) = branch_to_no_label(list) {
        return Err(format!(
            "encoding: a branch to label {label:#x}, which no instruction has"
        ));
    }
    let encoded = BlockEncoder::encode(
        64,
        InstructionBlock::new(list, at),
        BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS,
    )
    .map_err(|error| format!("encoding: {error}"))?;
    Ok((encoded.code_buffer, encoded.new_instruction_offsets))
}

/// The address of the instruction labelled `label` in `list`, encoded at
/// `at` with `offsets` (as [`encode`] returns them); an error naming
/// `what` when no instruction has the label.
pub(super) fn labelled(
    list: &[Instruction],
    offsets: &[u32],
    at: u64,
    label: u64,
    what: &str,
) -> Result<u64, String> {
    list.iter()
        .position(|instruction| instruction.ip() == label)
        .and_then(|index| offsets.get(index))
        .map(|&offset| at + u64::from(offset))
        .ok_or_else(|| format!("{what}: an entry missing"))
}

/// [`encode`] with one encoding of each instruction; `None` for a list
/// that needs the `BlockEncoder`.
pub(super) fn encode_in_one_pass(list: &[Instruction], at: u64) -> Option<(Vec<u8>, Vec<u32>)> {
    // A label twice: the `BlockEncoder` names the error.
    let labels = Labels::of(list)?;
    let label = |target: u64| labels.index(target);
    // Most instrumentation instructions have a segment prefix and a
    // 32-bit displacement: room for all without growing.
    let mut encoder = Encoder::try_with_capacity(64, list.len() * BYTES_PER_INSTRUCTION).ok()?;
    let mut offsets = Vec::with_capacity(list.len());
    // Branches to labels: (instruction index, label index).
    let mut to_labels = Vec::with_capacity(2 * labels.len());
    let mut ip = at;
    for (index, instruction) in list.iter().enumerate() {
        offsets.push(u32::try_from(ip - at).ok()?);
        let mut instruction = *instruction;
        if instruction.op0_kind() == OpKind::NearBranch64 {
            instruction.as_near_branch();
            let target = instruction.near_branch64();
            if let Some(to) = label(target) {
                // A branch to itself has the size of the real one.
                instruction.set_near_branch64(ip);
                to_labels.push((index, to));
            } else if target < LABELS {
                // A label no instruction has: `encode` names the error.
                return None;
            }
        } else if instruction.memory_base() == Register::RIP {
            if let Some(to) = label(instruction.memory_displacement64()) {
                // An operand at itself has the size of the real one.
                instruction.set_memory_displacement64(ip);
                to_labels.push((index, to));
            }
        }
        ip += encoder.encode(&instruction, ip).ok()? as u64;
    }
    let mut bytes = encoder.take_buffer();
    // One encoder for every patch, its buffer emptied after each.
    let mut patch = encoder;
    for (index, to) in to_labels {
        let mut instruction = list[index];
        let target = at + u64::from(offsets[to]);
        match instruction.op0_kind() == OpKind::NearBranch64 {
            true => {
                instruction.as_near_branch();
                instruction.set_near_branch64(target);
            }
            false => instruction.set_memory_displacement64(target),
        }
        let start = offsets[index] as usize;
        let end = offsets
            .get(index + 1)
            .map_or(bytes.len(), |&offset| offset as usize);
        if patch.encode(&instruction, at + start as u64).ok()? != end - start {
            return None;
        }
        let mut patched = patch.take_buffer();
        bytes[start..end].copy_from_slice(&patched);
        patched.clear();
        patch.set_buffer(patched);
    }
    Some((bytes, offsets))
}

/// A label a branch of `list` goes to and no instruction has (it would
/// go to that small address).
fn branch_to_no_label(list: &[Instruction]) -> Option<u64> {
    list.iter()
        .filter(|instruction| instruction.op0_kind() == OpKind::NearBranch64)
        .map(Instruction::near_branch64)
        .filter(|&target| target < LABELS)
        .find(|&target| !list.iter().any(|instruction| instruction.ip() == target))
}

/// The labelled instructions of a list (a label is a fake address from 1
/// to [`LABELS`]), sorted by label, for branches to find theirs.
struct Labels(Vec<(u64, usize)>);

impl Labels {
    /// The labels of `list`; `None` when two instructions have the same
    /// one (a branch to it would have two places to go).
    fn of(list: &[Instruction]) -> Option<Labels> {
        let mut labels: Vec<(u64, usize)> = list
            .iter()
            .enumerate()
            .map(|(index, instruction)| (instruction.ip(), index))
            .filter(|(ip, _)| (1..LABELS).contains(ip))
            .collect();
        labels.sort_unstable();
        let twice = labels.windows(2).any(|pair| pair[0].0 == pair[1].0);
        (!twice).then_some(Labels(labels))
    }

    /// How many labels.
    fn len(&self) -> usize {
        self.0.len()
    }

    /// The index of the instruction labelled `target`.
    fn index(&self, target: u64) -> Option<usize> {
        let at = self
            .0
            .binary_search_by_key(&target, |&(label, _)| label)
            .ok()?;
        self.0.get(at).map(|&(_, index)| index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Code, Decoder, DecoderOptions, MemoryOperand, Register};

    const AT: u64 = 0x7fff_0000_1000;

    /// The instructions of `bytes` decoded at `at`.
    fn decode(bytes: &[u8], at: u64) -> Vec<Instruction> {
        Decoder::with_ip(64, bytes, at, DecoderOptions::NONE)
            .into_iter()
            .collect()
    }

    fn labelled(mut instruction: Instruction, label: u64) -> Instruction {
        instruction.set_ip(label);
        instruction
    }

    #[test]
    fn a_lea_of_a_label_gives_the_labelled_instructions_address() {
        const LABEL: u64 = 0x123;
        let lea = Instruction::with2(
            Code::Lea_r64_m,
            Register::RAX,
            MemoryOperand::with_base_displ(Register::RIP, LABEL as i64),
        )
        .expect("an instruction");
        let list = vec![
            lea,
            Instruction::with(Code::Nopd),
            labelled(Instruction::with(Code::Int3), LABEL),
        ];
        let (bytes, offsets) = encode_in_one_pass(&list, AT).expect("one pass");
        let decoded = decode(&bytes, AT);
        assert_eq!(decoded[0].code(), Code::Lea_r64_m);
        assert_eq!(
            decoded[0].memory_displacement64(),
            AT + u64::from(offsets[2])
        );
        assert_eq!(decoded[2].code(), Code::Int3);
    }

    #[test]
    fn labels_branches_and_rip_relative_operands_land_where_the_list_says() {
        let data = AT + 0x10_0000;
        let far = AT - 0x20_0000;
        let list = vec![
            Instruction::with2(
                Code::Mov_r64_rm64,
                Register::RAX,
                MemoryOperand::new(
                    Register::RIP,
                    Register::None,
                    1,
                    data as i64,
                    8,
                    false,
                    Register::None,
                ),
            )
            .unwrap(),
            Instruction::with_branch(Code::Jrcxz_rel8_64, 1).unwrap(),
            Instruction::with_branch(Code::Je_rel8_64, far).unwrap(),
            Instruction::with_branch(Code::Jmp_rel32_64, 2).unwrap(),
            labelled(Instruction::with(Code::Nopd), 1),
            labelled(Instruction::with(Code::Int3), 2),
        ];
        let (bytes, offsets) = encode_in_one_pass(&list, AT).expect("one pass");
        let decoded = decode(&bytes, AT);
        assert_eq!(decoded.len(), list.len());
        let addr = |index: usize| AT + u64::from(offsets[index]);
        for (instruction, index) in decoded.iter().zip(0..) {
            assert_eq!(instruction.ip(), addr(index), "{instruction:?}");
        }
        assert_eq!(decoded[0].memory_displacement64(), data);
        assert_eq!(decoded[1].near_branch64(), addr(4));
        assert_eq!(decoded[2].code(), Code::Je_rel32_64);
        assert_eq!(decoded[2].near_branch64(), far);
        assert_eq!(decoded[3].near_branch64(), addr(5));
        assert_eq!(encode(&list, AT).unwrap(), (bytes, offsets));
    }

    #[test]
    fn a_short_branch_out_of_reach_goes_to_the_block_encoder() {
        let far = AT + 0x1000;
        let list = vec![
            Instruction::with_branch(Code::Jrcxz_rel8_64, far).unwrap(),
            Instruction::with(Code::Int3),
        ];
        assert!(encode_in_one_pass(&list, AT).is_none());
        let (bytes, _) = encode(&list, AT).unwrap();
        // jrcxz to a jmp to the target.
        let decoded = decode(&bytes, AT);
        let jump = decoded
            .iter()
            .find(|instruction| instruction.near_branch64() == far)
            .expect("a jump to the target");
        assert!(decoded[0].near_branch64() == far || decoded[0].near_branch64() == jump.ip());
    }

    #[test]
    fn a_branch_to_a_label_no_instruction_has_is_an_error() {
        let to_label = Instruction::with_branch(Code::Jmp_rel32_64, 7).unwrap();
        let list = vec![to_label, labelled(Instruction::with(Code::Nopd), 8)];
        let error = encode(&list, AT).unwrap_err();
        assert!(error.contains("label 0x7"), "{error}");
    }

    #[test]
    fn labels_find_their_instructions_and_refuse_a_label_twice() {
        let nop = || Instruction::with(Code::Nopd);
        let list = [nop(), labelled(nop(), 7), nop(), labelled(nop(), 3)];
        let labels = Labels::of(&list).expect("each label once");
        assert_eq!(labels.index(7), Some(1));
        assert_eq!(labels.index(3), Some(3));
        // An unlabelled instruction's address (0) and a missing label.
        assert_eq!(labels.index(0), None);
        assert_eq!(labels.index(5), None);
        assert!(Labels::of(&[labelled(nop(), 7), labelled(nop(), 7)]).is_none());
    }

    #[test]
    fn a_label_given_twice_is_an_error_not_a_guess() {
        let to_label = Instruction::with_branch(Code::Jmp_rel32_64, 7).unwrap();
        let nop = || Instruction::with(Code::Nopd);
        let once = vec![to_label, labelled(nop(), 7), nop()];
        assert!(encode_in_one_pass(&once, AT).is_some());
        let twice = vec![to_label, labelled(nop(), 7), labelled(nop(), 7)];
        assert!(encode_in_one_pass(&twice, AT).is_none());
        let error = encode(&twice, AT).unwrap_err();
        assert!(error.contains("same IP"), "{error}");
    }
}
