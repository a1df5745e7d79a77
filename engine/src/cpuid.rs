//! The processor the program sees: Valgrind's, not the host's (with
//! `RunOptions::valgrind_machine`; the vDSO is hidden too, see `auxv`).
//!
//! Under Valgrind a program does not see the host's `cpuid`: VEX answers it
//! with a fixed description of one processor model, chosen by what the host
//! can do (on a host with AVX2, an Intel Haswell-class part). glibc picks
//! its string functions (`__memcpy_avx_unaligned_erms` or another variant),
//! its copy thresholds and its lazy-binding trampoline (`xsave` or
//! `xsavec`) from `cpuid`, so a program run natively takes other paths
//! through libc than under Valgrind, and its instruction counts differ.
//! cgx answers `cpuid` as Valgrind does, so the counts agree.
//!
//! The answers below were measured: a program executing `cpuid` for every
//! leaf and sub-leaf, run under valgrind 3.19 on an AVX2 host. They are
//! given only when the host itself has every instruction set they announce
//! (see [`ValgrindCpu::for_host`]); otherwise the program sees the host's
//! `cpuid` (and may take other paths than under Valgrind).

/// The registers `cpuid` sets: eax, ebx, ecx, edx.
pub type CpuidResult = [u32; 4];

/// Answers of basic and extended leaves, by (leaf, sub-leaf). Sub-leaves
/// not listed answer zeros for leaves 4, 7 and 0xd; leaf 0xb echoes the
/// sub-leaf in ecx; any other leaf ignores the sub-leaf.
const LEAVES: &[(u32, u32, CpuidResult)] = &[
    (0x0, 0, [0x0000000d, 0x756e6547, 0x6c65746e, 0x49656e69]),
    (0x1, 0, [0x000306c3, 0x02100800, 0x7ffafbff, 0xbfebfbff]),
    (0x2, 0, [0x76036301, 0x00f0b6ff, 0x00000000, 0x00c10000]),
    (0x3, 0, [0, 0, 0, 0]),
    (0x4, 0, [0x1c004121, 0x01c0003f, 0x0000003f, 0x00000000]),
    (0x4, 1, [0x1c004122, 0x01c0003f, 0x0000003f, 0x00000000]),
    (0x4, 2, [0x1c004143, 0x01c0003f, 0x000001ff, 0x00000000]),
    (0x4, 3, [0x1c03c163, 0x03c0003f, 0x00001fff, 0x00000006]),
    (0x5, 0, [0x00000040, 0x00000040, 0x00000003, 0x00042120]),
    (0x6, 0, [0x00000077, 0x00000002, 0x00000009, 0x00000000]),
    (0x7, 0, [0x00000000, 0x000427aa, 0x00000000, 0x00000000]),
    (0x8, 0, [0, 0, 0, 0]),
    (0x9, 0, [0, 0, 0, 0]),
    (0xa, 0, [0x07300803, 0x00000000, 0x00000000, 0x00000603]),
    (0xb, 0, [0x00000001, 0x00000002, 0x00000100, 0x00000002]),
    (0xb, 1, [0x00000004, 0x00000008, 0x00000201, 0x00000002]),
    (0xc, 0, [0, 0, 0, 0]),
    (0xd, 0, [0x00000007, 0x00000340, 0x00000340, 0x00000000]),
    (0xd, 1, [0, 0, 0, 0]),
    (0xd, 2, [0x00000100, 0x00000240, 0x00000000, 0x00000000]),
    (
        0x8000_0000,
        0,
        [0x80000008, 0x00000000, 0x00000000, 0x00000000],
    ),
    (
        0x8000_0001,
        0,
        [0x00000000, 0x00000000, 0x00000021, 0x2c100800],
    ),
    (
        0x8000_0002,
        0,
        [0x65746e49, 0x2952286c, 0x726f4320, 0x4d542865],
    ),
    (
        0x8000_0003,
        0,
        [0x37692029, 0x3139342d, 0x20514d30, 0x20555043],
    ),
    (
        0x8000_0004,
        0,
        [0x2e322040, 0x48473039, 0x0000007a, 0x00000000],
    ),
    (0x8000_0005, 0, [0, 0, 0, 0]),
    (
        0x8000_0006,
        0,
        [0x00000000, 0x00000000, 0x01006040, 0x00000000],
    ),
    (
        0x8000_0007,
        0,
        [0x00000000, 0x00000000, 0x00000000, 0x00000100],
    ),
    (
        0x8000_0008,
        0,
        [0x00003027, 0x00000000, 0x00000000, 0x00000000],
    ),
];

/// The answer to a leaf beyond the table (Valgrind answers with leaf 0xd's).
const BEYOND: CpuidResult = [0x00000007, 0x00000340, 0x00000340, 0x00000000];

/// Instruction sets the table announces that a program may use, as
/// (leaf, register index, bit mask): the host must have them all. System
/// features (VMX, monitoring, thermal, ...) and performance hints (ERMS)
/// are not checked: a program cannot fail for their absence.
const INSTRUCTION_SETS: &[(u32, usize, u32)] = &[
    // SSE3, PCLMULQDQ, SSSE3, FMA, CMPXCHG16B, SSE4.1, SSE4.2, MOVBE,
    // POPCNT, AES, XSAVE, AVX, F16C, RDRAND.
    (
        0x1,
        2,
        1 | 1 << 1
            | 1 << 9
            | 1 << 12
            | 1 << 13
            | 1 << 19
            | 1 << 20
            | 1 << 22
            | 1 << 23
            | 1 << 25
            | 1 << 26
            | 1 << 28
            | 1 << 29
            | 1 << 30,
    ),
    // FPU, TSC, CMPXCHG8B, CMOV, MMX, FXSR, SSE, SSE2.
    (
        0x1,
        3,
        1 | 1 << 4 | 1 << 8 | 1 << 15 | 1 << 23 | 1 << 24 | 1 << 25 | 1 << 26,
    ),
    // BMI1, AVX2, BMI2, RDSEED.
    (0x7, 1, 1 << 3 | 1 << 5 | 1 << 8 | 1 << 18),
    // LAHF in 64-bit mode, LZCNT.
    (0x8000_0001, 2, 1 | 1 << 5),
    // SYSCALL, RDTSCP, long mode.
    (0x8000_0001, 3, 1 << 11 | 1 << 27 | 1 << 29),
];

/// Valgrind's answers to `cpuid`, for a host that can run what they announce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValgrindCpu;

impl ValgrindCpu {
    /// Valgrind's processor if this host has every instruction set it
    /// announces, else `None` (the program then sees the host's `cpuid`).
    pub fn for_host() -> Option<ValgrindCpu> {
        Self::supported_by(host_cpuid).then_some(ValgrindCpu)
    }

    /// Whether a host answering `cpuid` with `host` has every instruction
    /// set the table announces.
    fn supported_by(host: impl Fn(u32, u32) -> CpuidResult) -> bool {
        INSTRUCTION_SETS.iter().all(|&(leaf, register, mask)| {
            let announced = answer(leaf, 0)[register] & mask;
            host(leaf, 0)[register] & announced == announced
        })
    }

    /// The answer to `cpuid` with `leaf` in eax and `subleaf` in ecx.
    pub fn cpuid(self, leaf: u32, subleaf: u32) -> CpuidResult {
        answer(leaf, subleaf)
    }
}

/// The table's answer for `leaf` and `subleaf`.
fn answer(leaf: u32, subleaf: u32) -> CpuidResult {
    let listed = |sub: u32| {
        LEAVES
            .iter()
            .find(|(l, s, _)| *l == leaf && *s == sub)
            .map(|(_, _, result)| *result)
    };
    match leaf {
        0x4 | 0x7 | 0xd => listed(subleaf).unwrap_or([0; 4]),
        0xb => listed(subleaf).unwrap_or([0, 0, subleaf, 2]),
        _ => listed(0).unwrap_or(BEYOND),
    }
}

/// The host's own `cpuid`.
fn host_cpuid(leaf: u32, subleaf: u32) -> CpuidResult {
    let result = std::arch::x86_64::__cpuid_count(leaf, subleaf);
    [result.eax, result.ebx, result.ecx, result.edx]
}

/// Sets the registers of a thread stopped at a `cpuid` of `len` bytes as
/// executing it under `cpu` would, and moves it past the instruction.
pub(crate) fn execute(cpu: ValgrindCpu, regs: &mut crate::ptrace::Regs, len: u8) {
    let [eax, ebx, ecx, edx] = cpu.cpuid(regs.rax as u32, regs.rcx as u32);
    // `cpuid` zero-extends its 32-bit results into the full registers.
    regs.rax = u64::from(eax);
    regs.rbx = u64::from(ebx);
    regs.rcx = u64::from(ecx);
    regs.rdx = u64::from(edx);
    regs.rip = regs.rip.wrapping_add(u64::from(len));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_processor_is_valgrinds_haswell() {
        let cpu = ValgrindCpu;
        let vendor: Vec<u8> = [1, 3, 2]
            .iter()
            .flat_map(|&register| cpu.cpuid(0, 0)[register].to_le_bytes())
            .collect();
        assert_eq!(vendor, b"GenuineIntel");
        // Family 6, model 0x3c.
        assert_eq!(cpu.cpuid(1, 0)[0], 0x000306c3);
        // ERMS and AVX2 announced; no XSAVEC (leaf 0xd, sub-leaf 1).
        assert_ne!(cpu.cpuid(7, 0)[1] & (1 << 9), 0);
        assert_ne!(cpu.cpuid(7, 0)[1] & (1 << 5), 0);
        assert_eq!(cpu.cpuid(0xd, 1), [0; 4]);
    }

    #[test]
    fn sub_leaves_and_leaves_beyond_the_table() {
        let cpu = ValgrindCpu;
        assert_eq!(cpu.cpuid(4, 3)[3], 6);
        assert_eq!(cpu.cpuid(4, 4), [0; 4]);
        assert_eq!(cpu.cpuid(7, 1), [0; 4]);
        assert_eq!(cpu.cpuid(0xb, 9), [0, 0, 9, 2]);
        assert_eq!(cpu.cpuid(1, 5), cpu.cpuid(1, 0));
        assert_eq!(cpu.cpuid(0xe, 0), BEYOND);
        assert_eq!(cpu.cpuid(0x4000_0000, 0), BEYOND);
        assert_eq!(cpu.cpuid(0x8000_0009, 0), BEYOND);
    }

    #[test]
    fn a_host_without_an_announced_instruction_set_keeps_its_own() {
        assert!(ValgrindCpu::supported_by(answer));
        let without_avx2 = |leaf, subleaf| {
            let mut result = answer(leaf, subleaf);
            if leaf == 7 {
                result[1] &= !(1 << 5);
            }
            result
        };
        assert!(!ValgrindCpu::supported_by(without_avx2));
        // Performance hints and system features need not be there.
        let without_erms = |leaf, subleaf| {
            let mut result = answer(leaf, subleaf);
            if leaf == 7 {
                result[1] &= !(1 << 9);
            }
            if leaf == 1 {
                result[2] &= !(1 << 5);
            }
            result
        };
        assert!(ValgrindCpu::supported_by(without_erms));
    }

    #[test]
    fn execute_sets_the_registers_and_moves_on() {
        // SAFETY: a plain-data struct of integers; all zeros is valid.
        let mut regs: crate::ptrace::Regs = unsafe { std::mem::zeroed() };
        regs.rax = 0xffff_ffff_0000_0007;
        regs.rcx = 0;
        regs.rbx = u64::MAX;
        regs.rip = 0x1000;
        execute(ValgrindCpu, &mut regs, 2);
        assert_eq!(regs.rax, 0);
        assert_eq!(regs.rbx, 0x427aa);
        assert_eq!(regs.rip, 0x1002);
    }
}
