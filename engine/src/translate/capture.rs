//! Recording what an execution of a translated block did, for runs that
//! feed simulations (`RunOptions::simulations`): the block's record grows
//! by one word per dynamic fact, written by flag-free code (`mov`, `lea`,
//! `setcc`, `rdfsbase`/`rdgsbase`) through the region's scratch slots,
//! never touching the program's stack:
//!
//! - before an instruction, the address of each memory operand that is
//!   not a constant (`lea` of the same operand; pushes, calls and returns
//!   have their implicit stack operand, string instructions `rsi`/`rdi`),
//!   plus the `fs` base for that segment (`gs` is the backend's, see `area`);
//!   an operand of the same form as one recorded earlier in the block,
//!   whose registers no instruction has written since, shares its word;
//! - before a `jcc`, whether its condition holds (`setcc`);
//! - the target of an indirect jump or call, once loaded for the lookup;
//! - for a REP pass, `rcx` before it (an iteration runs when it is not
//!   zero) and, for REPE/REPNE, ZF after the iteration.
//!
//! Which word holds what ([`Sources`]) is kept per instruction of the
//! translation; the replay reads the words back through
//! [`crate::semantics::Dynamic`] ([`Recorded`]), so the events follow the
//! step backend's rules. Operands whose address cannot be computed this
//! way (vector indexes, 32-bit addressing, `fs` without FSGSBASE)
//! make the translator refuse the block (it is stepped).

use iced_x86::{Code, ConditionCode, Instruction, MemoryOperand, Register, UsedMemory};

use crate::semantics::{register_bit, Accesses, Branch, Decoded, Dynamic};
use crate::system_time::SystemCallClocks;

use super::area::{slot, CAPTURE_RAX, CAPTURE_RBX, RECORD};
use super::filter::L1Filter;
use super::layout::{BUFFER_SIZE, MAX_RECORD, RECORD_HEADER};
use super::timing::SystemCallWords;
use super::translator::Refusal;

/// `AT_HWCAP2` bit: the kernel lets user code use `rdfsbase` and friends.
const HWCAP2_FSGSBASE: u64 = 1 << 1;

/// Where the replay finds an operand's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Source {
    /// A constant, known when translating (an absolute or RIP-relative
    /// operand).
    Static(u64),
    /// The recorded word with this number.
    Word(usize),
    /// Not recorded: checked in the tracee (`filter`).
    Filtered,
}

/// Where the replay finds what one execution of an instruction did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Sources {
    /// The address of each of its memory operands (`Accesses::operands`).
    pub operands: Vec<Source>,
    /// The word holding whether its `jcc` condition held (low byte).
    pub guard: Option<usize>,
    /// The word holding its indirect target.
    pub target: Option<usize>,
    /// The word holding `rcx` before a REP pass.
    pub counter: Option<usize>,
    /// The word holding ZF after a REPE/REPNE iteration (low byte).
    pub zero_flag: Option<usize>,
}

/// Whether translations record words, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Capture {
    /// Record the words (the run feeds simulations).
    pub enabled: bool,
    /// Count runs instead of recording them where possible (the run needs
    /// only counts, see `area`).
    pub counting: bool,
    /// Count the runs through quiet exits in the segment's record
    /// (`RunOptions::quiet_runs`, see `quiet`).
    pub quiet: bool,
    /// `rdfsbase` may be used (else `fs` operands are
    /// refused).
    pub fsgsbase: bool,
    /// How a block's `syscall` is timed (`timing`).
    pub system_calls: SystemCallClocks,
    /// Check fetches and data accesses against the thread's tables,
    /// recording the others (`filter`); runs are counted.
    pub filter: Option<L1Filter>,
}

impl Capture {
    /// Recording as `filter`, `enabled`, `counting` and `quiet` say (the
    /// first that applies: a filter counts runs, in the tracee's counters
    /// or with `quiet` in segments), timing system calls
    /// with `system_calls`, with what this machine allows (the tracee runs
    /// on the tracer's kernel and CPU).
    pub fn new(
        enabled: bool,
        counting: bool,
        quiet: bool,
        system_calls: SystemCallClocks,
        filter: Option<L1Filter>,
    ) -> Capture {
        // SAFETY: getauxval only reads the process's auxiliary vector.
        let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
        // A filter counts runs, in segments of quiet runs when asked
        // (its records then name the record of their run).
        let (enabled, counting) = match filter {
            Some(_) => (false, !quiet),
            None => (enabled, counting && !enabled),
        };
        let quiet = quiet && !counting && !enabled;
        Capture {
            enabled,
            counting,
            quiet,
            fsgsbase: hwcap2 & HWCAP2_FSGSBASE != 0,
            system_calls,
            filter: filter.map(|filter| filter.attributed(quiet)),
        }
    }

    /// Bytes of each half of a thread's record buffer when its area is
    /// mapped. When the records feed simulations (or hold a filter's
    /// records), all of [`BUFFER_SIZE`]: another thread simulates a half
    /// while the program fills the other, and large halves keep both busy.
    /// Otherwise an eighth (512 KiB), which a long run grows
    /// (`Area::handed_off`): a short run's last half, which the tracer
    /// replays after the program's end, stays small.
    pub fn buffer_half(&self) -> u64 {
        if self.enabled || (self.filter.is_some() && !self.quiet) {
            BUFFER_SIZE
        } else {
            BUFFER_SIZE / 8
        }
    }

    /// Whether the filter's records name their run and go to a buffer of
    /// their own (`area`): with quiet runs.
    pub fn filter_records(&self) -> bool {
        self.filter.is_some_and(|filter| filter.attributed)
    }
}

/// The recording code of one translation being emitted, and where its
/// words go.
pub(super) struct Recorder {
    capture: Capture,
    words: usize,
    /// Per instruction emitted so far (empty when not enabled).
    pub sources: Vec<Sources>,
    /// Operands recorded earlier in the block whose registers no
    /// instruction has written since: another operand of the same form
    /// has the same address, in the same word.
    unchanged: Vec<RecordedOperand>,
}

/// An operand whose address a word holds ([`Recorder::unchanged`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RecordedOperand {
    /// Base, index, scale and displacement.
    form: (Register, Register, u32, u64),
    /// The registers it reads (`semantics::register_bit`).
    registers: u16,
    /// The word holding its address.
    word: usize,
}

/// iced's errors as refusals.
fn built(instruction: Result<Instruction, iced_x86::IcedError>) -> Result<Instruction, Refusal> {
    instruction.map_err(|error| format!("iced: {error}"))
}

/// Where a memory operand's address is, for the code that records or
/// checks it ([`operand_address`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OperandAddress {
    /// A constant, known when translating (an absolute or RIP-relative
    /// operand).
    Known(u64),
    /// Computed by [`lea_operand`].
    Computed,
}

/// Where `memory`'s address is; refuses operands whose address the
/// instrumentation cannot compute (vector indexes, 32-bit addressing,
/// `gs`, `fs` without FSGSBASE unless `fsgsbase`, a 64-bit displacement
/// with registers).
pub(super) fn operand_address(
    memory: &UsedMemory,
    fsgsbase: bool,
) -> Result<OperandAddress, Refusal> {
    let has_segment = match memory.segment() {
        Register::FS => true,
        // The GS base is the backend's (`area`).
        Register::GS => return Err("a gs operand".into()),
        _ => false,
    };
    let (base, index) = (memory.base(), memory.index());
    if base == Register::None && index == Register::None && !has_segment {
        return Ok(OperandAddress::Known(memory.displacement()));
    }
    if memory.vsib_size() != 0
        || memory.address_size() != iced_x86::CodeSize::Code64
        || !(base == Register::None || base.is_gpr64())
        || !(index == Register::None || index.is_gpr64())
    {
        return Err(format!(
            "an operand whose address is not recorded: {memory:?}"
        ));
    }
    if has_segment && !fsgsbase {
        return Err("an fs operand without FSGSBASE".into());
    }
    if i32::try_from(memory.displacement() as i64).is_err() {
        return Err("a 64-bit displacement with registers".into());
    }
    Ok(OperandAddress::Computed)
}

/// `lea dest, [memory]`, plus the `fs` base for an `fs` operand (read
/// into `scratch`, whose value is lost then); flags untouched. For an
/// operand [`operand_address`] says is computed.
pub(super) fn lea_operand(
    code: &mut Vec<Instruction>,
    memory: &UsedMemory,
    dest: Register,
    scratch: Register,
) -> Result<(), Refusal> {
    let displacement = memory.displacement() as i64;
    let operand = MemoryOperand::new(
        memory.base(),
        memory.index(),
        memory.scale(),
        displacement,
        if displacement == 0 { 0 } else { 1 },
        false,
        Register::None,
    );
    code.push(built(Instruction::with2(Code::Lea_r64_m, dest, operand))?);
    if memory.segment() == Register::FS {
        code.push(built(Instruction::with1(Code::Rdfsbase_r64, scratch))?);
        code.push(built(Instruction::with2(
            Code::Lea_r64_m,
            dest,
            MemoryOperand::with_base_index(dest, scratch),
        ))?);
    }
    Ok(())
}

impl Recorder {
    /// Recording as `capture` says.
    pub fn new(capture: Capture) -> Recorder {
        Recorder {
            capture,
            words: 0,
            sources: Vec::new(),
            unchanged: Vec::new(),
        }
    }

    /// The instruction whose operands were recorded last has been emitted
    /// (`decoded`): the operands whose registers it writes may change.
    pub fn ran(&mut self, decoded: &Decoded) {
        let writes = decoded.effect.writes();
        self.unchanged
            .retain(|operand| operand.registers & writes == 0);
    }

    /// Whether words are recorded.
    pub fn enabled(&self) -> bool {
        self.capture.enabled
    }

    /// Words recorded per execution.
    pub fn words(&self) -> usize {
        self.words
    }

    /// The record's bytes.
    pub fn record_bytes(&self) -> u64 {
        RECORD_HEADER + 8 * self.words as u64
    }

    /// Whether sources are kept per instruction: words are recorded, or
    /// the accesses are filtered (their plan needs the operands).
    fn sourced(&self) -> bool {
        self.capture.enabled || self.capture.filter.is_some()
    }

    /// Starts the next instruction of the block.
    pub fn next_instruction(&mut self) {
        if self.sourced() {
            self.sources.push(Sources::default());
        }
    }

    /// The current instruction's sources.
    fn current(&mut self) -> Result<&mut Sources, Refusal> {
        self.sources
            .last_mut()
            .ok_or_else(|| "recording before an instruction".to_string())
    }

    /// A new word; refuses when the record would be too large.
    fn word(&mut self) -> Result<usize, Refusal> {
        let word = self.words;
        self.words += 1;
        if self.record_bytes() > MAX_RECORD {
            return Err("too many recorded words".into());
        }
        Ok(word)
    }

    /// `mov [capture_rbx], rbx; mov rbx, [record]; STORE; mov rbx,
    /// [capture_rbx]`: `store` writes through `[rbx + offset of word]`.
    fn through_record(
        &self,
        code: &mut Vec<Instruction>,
        word: usize,
        store: impl FnOnce(MemoryOperand) -> Result<Instruction, iced_x86::IcedError>,
    ) -> Result<(), Refusal> {
        code.push(built(Instruction::with2(
            Code::Mov_rm64_r64,
            slot(CAPTURE_RBX),
            Register::RBX,
        ))?);
        code.push(built(Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RBX,
            slot(RECORD),
        ))?);
        let offset = 8 * (1 + word as i64);
        code.push(built(store(MemoryOperand::with_base_displ(
            Register::RBX,
            offset,
        )))?);
        code.push(built(Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RBX,
            slot(CAPTURE_RBX),
        ))?);
        Ok(())
    }

    /// Records the addresses of `accesses`' operands before the
    /// instruction (emitted into `code`).
    pub fn addresses(
        &mut self,
        code: &mut Vec<Instruction>,
        accesses: &Accesses,
    ) -> Result<(), Refusal> {
        if self.capture.filter.is_some() {
            let operands = accesses.operands().count();
            let current = self.current()?;
            current
                .operands
                .extend(std::iter::repeat_n(Source::Filtered, operands));
            return Ok(());
        }
        if !self.enabled() {
            return Ok(());
        }
        for memory in accesses.operands() {
            let source = self.address(code, memory)?;
            self.current()?.operands.push(source);
        }
        Ok(())
    }

    /// The source of `memory`'s address, recording it if needed.
    fn address(
        &mut self,
        code: &mut Vec<Instruction>,
        memory: &UsedMemory,
    ) -> Result<Source, Refusal> {
        if let OperandAddress::Known(addr) = operand_address(memory, self.capture.fsgsbase)? {
            return Ok(Source::Static(addr));
        }
        let has_segment = memory.segment() == Register::FS;
        let (base, index) = (memory.base(), memory.index());
        let form = (base, index, memory.scale(), memory.displacement());
        if !has_segment {
            if let Some(same) = self.unchanged.iter().find(|operand| operand.form == form) {
                return Ok(Source::Word(same.word));
            }
        }
        let word = self.word()?;
        if !has_segment {
            let registers = [base, index]
                .into_iter()
                .filter_map(register_bit)
                .fold(0, |bits, bit| bits | bit);
            self.unchanged.push(RecordedOperand {
                form,
                registers,
                word,
            });
        }
        code.push(built(Instruction::with2(
            Code::Mov_rm64_r64,
            slot(CAPTURE_RAX),
            Register::RAX,
        ))?);
        if has_segment {
            code.push(built(Instruction::with2(
                Code::Mov_rm64_r64,
                slot(CAPTURE_RBX),
                Register::RBX,
            ))?);
        }
        lea_operand(code, memory, Register::RAX, Register::RBX)?;
        if has_segment {
            code.push(built(Instruction::with2(
                Code::Mov_r64_rm64,
                Register::RBX,
                slot(CAPTURE_RBX),
            ))?);
        }
        self.through_record(code, word, |slot| {
            Instruction::with2(Code::Mov_rm64_r64, slot, Register::RAX)
        })?;
        code.push(built(Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RAX,
            slot(CAPTURE_RAX),
        ))?);
        Ok(Source::Word(word))
    }

    /// Records whether `condition` holds (before a `jcc`).
    pub fn guard(
        &mut self,
        code: &mut Vec<Instruction>,
        condition: ConditionCode,
    ) -> Result<(), Refusal> {
        if !self.enabled() {
            return Ok(());
        }
        let set = set_code(condition).ok_or_else(|| format!("condition {condition:?}"))?;
        let word = self.word()?;
        self.through_record(code, word, |slot| Instruction::with1(set, slot))?;
        self.current()?.guard = Some(word);
        Ok(())
    }

    /// Records ZF (after a REPE/REPNE iteration).
    pub fn zero_flag(&mut self, code: &mut Vec<Instruction>) -> Result<(), Refusal> {
        if !self.enabled() {
            return Ok(());
        }
        let word = self.word()?;
        self.through_record(code, word, |slot| Instruction::with1(Code::Sete_rm8, slot))?;
        self.current()?.zero_flag = Some(word);
        Ok(())
    }

    /// Records `rcx` (before a REP pass; also with a filter, which needs
    /// to know a last pass).
    pub fn counter(&mut self, code: &mut Vec<Instruction>) -> Result<(), Refusal> {
        if !self.sourced() {
            return Ok(());
        }
        let word = self.word()?;
        self.through_record(code, word, |slot| {
            Instruction::with2(Code::Mov_rm64_r64, slot, Register::RCX)
        })?;
        self.current()?.counter = Some(word);
        Ok(())
    }

    /// Records `rax`, an indirect jump's or call's target loaded for the
    /// lookup.
    pub fn target(&mut self, code: &mut Vec<Instruction>) -> Result<(), Refusal> {
        if !self.enabled() {
            return Ok(());
        }
        let word = self.word()?;
        self.through_record(code, word, |slot| {
            Instruction::with2(Code::Mov_rm64_r64, slot, Register::RAX)
        })?;
        self.current()?.target = Some(word);
        Ok(())
    }
}

impl Recorder {
    /// The words of the block's `syscall` when the run times system calls
    /// (`timing`), recorded whether or not the run records other words.
    pub fn system_call(&mut self) -> Result<Option<SystemCallWords>, Refusal> {
        let clocks = self.capture.system_calls;
        if !clocks.on() {
            return Ok(None);
        }
        let cpu = clocks.cpu();
        let first = u16::try_from(self.words).map_err(|_| "too many recorded words")?;
        for _ in 0..SystemCallWords::len(cpu) {
            self.word()?;
        }
        Ok(Some(SystemCallWords { first, cpu }))
    }
}

/// The `setcc r/m8` of `condition`.
fn set_code(condition: ConditionCode) -> Option<Code> {
    Some(match condition {
        ConditionCode::o => Code::Seto_rm8,
        ConditionCode::no => Code::Setno_rm8,
        ConditionCode::b => Code::Setb_rm8,
        ConditionCode::ae => Code::Setae_rm8,
        ConditionCode::e => Code::Sete_rm8,
        ConditionCode::ne => Code::Setne_rm8,
        ConditionCode::be => Code::Setbe_rm8,
        ConditionCode::a => Code::Seta_rm8,
        ConditionCode::s => Code::Sets_rm8,
        ConditionCode::ns => Code::Setns_rm8,
        ConditionCode::p => Code::Setp_rm8,
        ConditionCode::np => Code::Setnp_rm8,
        ConditionCode::l => Code::Setl_rm8,
        ConditionCode::ge => Code::Setge_rm8,
        ConditionCode::le => Code::Setle_rm8,
        ConditionCode::g => Code::Setg_rm8,
        ConditionCode::None => return None,
    })
}

/// What one execution of an instruction did, read from its block's
/// recorded `words` as `sources` says.
pub(super) struct Recorded<'a> {
    /// The record's words.
    pub words: &'a [u64],
    /// Where the instruction's facts are.
    pub sources: &'a Sources,
}

impl Recorded<'_> {
    /// Word `index`'s value, 0 when missing.
    fn word(&self, index: Option<usize>) -> u64 {
        index
            .and_then(|index| self.words.get(index))
            .copied()
            .unwrap_or(0)
    }

    /// For a REP pass: whether an iteration ran.
    pub fn iteration(&self) -> bool {
        self.word(self.sources.counter) != 0
    }

    /// For a REPE/REPNE iteration: ZF after it.
    pub fn zero_flag(&self) -> bool {
        self.word(self.sources.zero_flag) & 0xff != 0
    }
}

impl Dynamic for Recorded<'_> {
    fn address(&self, index: usize, _memory: &UsedMemory) -> Option<u64> {
        match self.sources.operands.get(index)? {
            Source::Static(addr) => Some(*addr),
            Source::Word(word) => self.words.get(*word).copied(),
            // Its fetches and accesses reach the simulation apart.
            Source::Filtered => Some(0),
        }
    }

    fn guard(&self, _branch: &Branch) -> bool {
        self.word(self.sources.guard) & 0xff != 0
    }

    fn target(&self) -> u64 {
        self.word(self.sources.target)
    }
}

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions};

    use super::super::layout::PAGE;
    use super::*;

    #[test]
    fn records_for_simulations_get_whole_halves_and_counting_runs_an_eighth() {
        let clocks = SystemCallClocks::default();
        let simulating = Capture::new(true, false, false, clocks, None);
        let counting = Capture::new(false, true, false, clocks, None);
        let i1 = super::super::filter::FilterGeometry {
            line_size: 64,
            sets: 64,
            ways: 8,
        };
        let filter = L1Filter::new(i1, i1, 64, true);
        let filtering = Capture::new(true, false, false, clocks, filter);
        assert_eq!(simulating.buffer_half(), BUFFER_SIZE);
        assert_eq!(counting.buffer_half(), BUFFER_SIZE / 8);
        // A filter counts runs and records the rest in whole halves.
        assert!(filtering.counting && !filtering.enabled);
        assert!(filtering.filter.is_some_and(|filter| !filter.attributed));
        assert_eq!(filtering.buffer_half(), BUFFER_SIZE);
        // With quiet runs it counts them in segments, and its records name
        // the record of their run.
        let attributing = Capture::new(true, false, true, clocks, filter);
        assert!(attributing.quiet && !attributing.counting && !attributing.enabled);
        assert!(attributing.filter.is_some_and(|filter| filter.attributed));
        assert!(attributing.filter_records() && !filtering.filter_records());
        assert_eq!(attributing.buffer_half(), BUFFER_SIZE / 8);
        for capture in [simulating, counting, filtering] {
            let half = capture.buffer_half();
            // Whole pages, each with room for the longest record.
            assert!(half.is_multiple_of(PAGE) && half > MAX_RECORD, "{half}");
        }
    }

    /// The sources `Recorder` gives the instructions of `bytes`, one
    /// block, and the words it records.
    fn sources(bytes: &[u8]) -> (Vec<Vec<Source>>, usize) {
        let capture = Capture {
            enabled: true,
            counting: false,
            quiet: false,
            fsgsbase: false,
            system_calls: SystemCallClocks::Off,
            filter: None,
        };
        let mut recorder = Recorder::new(capture);
        let mut code = Vec::new();
        for instruction in Decoder::new(64, bytes, DecoderOptions::NONE) {
            let decoded = Decoded::of(&instruction);
            recorder.next_instruction();
            recorder
                .addresses(&mut code, &decoded.accesses)
                .expect("recordable");
            recorder.ran(&decoded);
        }
        let operands = recorder
            .sources
            .iter()
            .map(|s| s.operands.clone())
            .collect();
        (operands, recorder.words())
    }

    #[test]
    fn an_operand_whose_registers_did_not_change_reuses_its_word() {
        // addsd xmm0, [rax-8]; movsd [rax-8], xmm0
        let (operands, words) =
            sources(&[0xf2, 0x0f, 0x58, 0x40, 0xf8, 0xf2, 0x0f, 0x11, 0x40, 0xf8]);
        assert_eq!(operands, [vec![Source::Word(0)], vec![Source::Word(0)]]);
        assert_eq!(words, 1);
    }

    #[test]
    fn an_operand_whose_register_was_written_is_recorded_again() {
        // mov rcx, [rax]; add rax, 8; mov rdx, [rax]; mov rax, [rax]; mov rbx, [rax]
        let (operands, words) = sources(&[
            0x48, 0x8b, 0x08, 0x48, 0x83, 0xc0, 0x08, 0x48, 0x8b, 0x10, 0x48, 0x8b, 0x00, 0x48,
            0x8b, 0x18,
        ]);
        assert_eq!(
            operands,
            [
                vec![Source::Word(0)],
                vec![],
                vec![Source::Word(1)],
                vec![Source::Word(1)],
                vec![Source::Word(2)],
            ]
        );
        assert_eq!(words, 3);
    }
}
