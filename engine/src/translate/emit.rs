//! Building a list of instrumentation instructions: iced's errors as
//! refusals, the thread's slots (`area`) saved and loaded, labels (fake
//! addresses `encode` resolves) given and jumped to.

use iced_x86::{Code, Instruction, MemoryOperand, Register};

use super::area::slot;
use super::translator::Refusal;

/// Instructions being built.
#[derive(Debug)]
pub(super) struct Emit {
    /// The instructions so far.
    pub list: Vec<Instruction>,
    /// The label of the next instruction pushed.
    label: Option<u64>,
}

/// Instructions an [`Emit`] has room for at first (most lists a
/// translation builds hold fewer).
const ROOM: usize = 32;

impl Default for Emit {
    fn default() -> Emit {
        Emit {
            list: Vec::with_capacity(ROOM),
            label: None,
        }
    }
}

impl Emit {
    /// Pushes `built`, iced's error as a refusal.
    pub fn push(&mut self, built: Result<Instruction, iced_x86::IcedError>) -> Result<(), Refusal> {
        let mut instruction = built.map_err(|error| format!("iced: {error}"))?;
        if let Some(label) = self.label.take() {
            instruction.set_ip(label);
        }
        self.list.push(instruction);
        Ok(())
    }

    /// `mov gs:[at], register`.
    pub fn save(&mut self, at: u64, register: Register) -> Result<(), Refusal> {
        self.push(Instruction::with2(Code::Mov_rm64_r64, slot(at), register))
    }

    /// `mov register, gs:[at]`.
    pub fn load(&mut self, register: Register, at: u64) -> Result<(), Refusal> {
        self.push(Instruction::with2(Code::Mov_r64_rm64, register, slot(at)))
    }

    /// `lea register, [base + displacement]` (flags untouched).
    pub fn lea(
        &mut self,
        register: Register,
        base: Register,
        displacement: i64,
    ) -> Result<(), Refusal> {
        let address = MemoryOperand::with_base_displ(base, displacement);
        self.push(Instruction::with2(Code::Lea_r64_m, register, address))
    }

    /// A branch `code` to `target` (an address or a label).
    pub fn jump(&mut self, code: Code, target: u64) -> Result<(), Refusal> {
        self.push(Instruction::with_branch(code, target))
    }

    /// Gives the next instruction pushed the fake address `label`.
    pub fn label(&mut self, label: u64) {
        debug_assert!(self.label.is_none(), "two labels on one instruction");
        self.label = Some(label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_goes_to_the_next_instruction_pushed() {
        let mut code = Emit::default();
        code.save(8, Register::RAX).unwrap();
        code.label(5);
        code.load(Register::RCX, 16).unwrap();
        code.lea(Register::RCX, Register::RCX, 1).unwrap();
        let ips: Vec<u64> = code.list.iter().map(Instruction::ip).collect();
        assert_eq!(ips, [0, 5, 0]);
    }
}
