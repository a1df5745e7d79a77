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
//! given only when the host itself can run what they announce (see
//! [`ValgrindCpu::from_host`]); otherwise the program sees the host's
//! `cpuid` (and may take other paths than under Valgrind).
//!
//! What the processor does itself, the answers must tell as it is. cgx
//! runs the program's instructions on the host processor, `xsave`,
//! `xsaveopt`, `xrstor` and `xgetbv` included, and those act on the state
//! components the kernel enabled in the host's XCR0 (on an AVX-512 host
//! 0xe7: opmask and ZMM state too), not on Valgrind's 7. glibc's
//! lazy-binding trampoline reserves the size leaf 0xd announces and then
//! `xsave`s every enabled component into it: Valgrind's 0x340 bytes on a
//! host that writes 0xa80 corrupt the stack. So leaf 0xd is the host's,
//! but for sub-leaf 1, which stays Valgrind's (no `xsaveopt`, `xsavec` or
//! `xsaves` announced: glibc keeps Valgrind's `xsave` trampoline, and its
//! instruction counts). The table's other announcements are only used by a
//! program if the host has them (see `INSTRUCTION_SETS`), and AVX-512 is
//! not among them.
//!
//! `xgetbv` is not emulated: it reports the host's XCR0, which is what
//! `xsave` acts on. Valgrind answers 7 because it emulates `xsave` as well;
//! cgx answering 7 while the processor saves 0xe7 would be the same
//! disagreement again. A program that enables AVX-512 code paths needs
//! AVX512F in leaf 7 as well as the ZMM state in XCR0, and the table does
//! not announce it, so the host's XCR0 changes no path a program takes.

/// The registers `cpuid` sets: eax, ebx, ecx, edx.
pub type CpuidResult = [u32; 4];

/// Valgrind's answers of basic and extended leaves but 0xd, by (leaf,
/// sub-leaf). Sub-leaves not listed answer zeros for leaves 4 and 7; leaf
/// 0xb echoes the sub-leaf in ecx; any other leaf ignores the sub-leaf.
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

/// Valgrind's leaf 0xd, sub-leaf 1: none of `xsaveopt`, `xsavec`,
/// `xgetbv` with ecx = 1, `xsaves` announced.
const XSAVE_EXTENSIONS: CpuidResult = [0; 4];

/// Leaf 0xd's sub-leaves that are kept: sub-leaf `i` (from 2) describes
/// the state component of XCR0's bit `i`.
const XSAVE_SUBLEAVES: usize = 64;

/// XCR0's bits for the x87, SSE and AVX register state.
const AVX_STATE: u64 = 0b111;

/// Instruction sets the table announces that a program may use, as
/// (leaf, register index, bit mask): the host must have them all. System
/// features (VMX, monitoring, thermal, ...) and performance hints (ERMS)
/// are not checked: a program cannot fail for their absence.
const INSTRUCTION_SETS: &[(u32, usize, u32)] = &[
    // SSE3, PCLMULQDQ, SSSE3, FMA, CMPXCHG16B, SSE4.1, SSE4.2, MOVBE,
    // POPCNT, AES, XSAVE, OSXSAVE (`xgetbv` works), AVX, F16C, RDRAND.
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
            | 1 << 27
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

/// Valgrind's answers to `cpuid`, with leaf 0xd the host's (see the module
/// doc), for a host that can run what they announce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValgrindCpu {
    /// Leaf 0xd by sub-leaf.
    xsave: [CpuidResult; XSAVE_SUBLEAVES],
}

impl ValgrindCpu {
    /// Valgrind's processor as this host can run it, or `None` (the program
    /// then sees the host's `cpuid`); see [`ValgrindCpu::from_host`].
    pub fn for_host() -> Option<ValgrindCpu> {
        Self::from_host(host_cpuid, host_xcr0)
    }

    /// Valgrind's processor for a host that answers `cpuid` with `host` and
    /// whose XCR0 `xcr0` reads (asked only when `host` announces OSXSAVE),
    /// or `None` when the host lacks what the table announces: an
    /// instruction set, or the AVX register state in XCR0.
    pub fn from_host(
        host: impl Fn(u32, u32) -> CpuidResult,
        xcr0: impl FnOnce() -> u64,
    ) -> Option<ValgrindCpu> {
        let has_leaves = host(0, 0)[0] >= 0xd && host(0x8000_0000, 0)[0] >= 0x8000_0001;
        if !has_leaves || !supported_by(&host) || xcr0() & AVX_STATE != AVX_STATE {
            return None;
        }
        let mut xsave = [[0; 4]; XSAVE_SUBLEAVES];
        for (subleaf, answer) in (0u32..).zip(xsave.iter_mut()) {
            *answer = match subleaf {
                1 => XSAVE_EXTENSIONS,
                _ => host(0xd, subleaf),
            };
        }
        Some(ValgrindCpu { xsave })
    }

    /// The answer to `cpuid` with `leaf` in eax and `subleaf` in ecx.
    pub fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
        if leaf == 0xd {
            let index = usize::try_from(subleaf).unwrap_or(usize::MAX);
            return self.xsave.get(index).copied().unwrap_or([0; 4]);
        }
        // Beyond the table Valgrind answers leaf 0xd's sub-leaf 0.
        valgrind_answer(leaf, subleaf).unwrap_or(self.xsave[0])
    }
}

/// Whether a host answering `cpuid` with `host` has every instruction set
/// the table announces.
fn supported_by(host: impl Fn(u32, u32) -> CpuidResult) -> bool {
    INSTRUCTION_SETS.iter().all(|&(leaf, register, mask)| {
        let announced = valgrind_answer(leaf, 0).map_or(0, |answer| answer[register]) & mask;
        host(leaf, 0)[register] & announced == announced
    })
}

/// Valgrind's answer for `leaf` and `subleaf` from the table, `None` for a
/// leaf beyond it or leaf 0xd.
fn valgrind_answer(leaf: u32, subleaf: u32) -> Option<CpuidResult> {
    let listed = |sub: u32| {
        LEAVES
            .iter()
            .find(|(l, s, _)| *l == leaf && *s == sub)
            .map(|(_, _, result)| *result)
    };
    match leaf {
        0x4 | 0x7 => Some(listed(subleaf).unwrap_or([0; 4])),
        0xb => Some(listed(subleaf).unwrap_or([0, 0, subleaf, 2])),
        _ => listed(0),
    }
}

/// The host's own `cpuid`.
fn host_cpuid(leaf: u32, subleaf: u32) -> CpuidResult {
    let result = std::arch::x86_64::__cpuid_count(leaf, subleaf);
    [result.eax, result.ebx, result.ecx, result.edx]
}

/// The host's XCR0: the state components `xsave` acts on. Called only when
/// the host announces OSXSAVE (see [`ValgrindCpu::from_host`]).
fn host_xcr0() -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: `xgetbv` with ecx = 0 reads XCR0 into edx:eax and touches
    // nothing else; with OSXSAVE announced it cannot fault.
    unsafe {
        std::arch::asm!(
            "xgetbv",
            in("ecx") 0,
            out("eax") low,
            out("edx") high,
            options(nomem, nostack, preserves_flags),
        );
    }
    u64::from(high) << 32 | u64::from(low)
}

/// Sets the registers of a thread stopped at a `cpuid` of `len` bytes as
/// executing it under `cpu` would, and moves it past the instruction.
pub(crate) fn execute(cpu: &ValgrindCpu, regs: &mut crate::ptrace::Regs, len: u8) {
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

    /// AVX512F, in leaf 7's ebx.
    const AVX512F: u32 = 1 << 16;

    /// A made-up host: its answers by (leaf, sub-leaf), sub-leaves not
    /// listed as sub-leaf 0 (leaf 0xd's as zeros), and its XCR0.
    struct Host {
        leaves: Vec<(u32, u32, CpuidResult)>,
        xcr0: u64,
    }

    impl Host {
        fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidResult {
            let find = |sub: u32| {
                self.leaves
                    .iter()
                    .find(|(l, s, _)| *l == leaf && *s == sub)
                    .map(|(_, _, answer)| *answer)
            };
            match leaf {
                0xd => find(subleaf).unwrap_or([0; 4]),
                _ => find(subleaf).or_else(|| find(0)).unwrap_or([0; 4]),
            }
        }

        fn valgrind_cpu(&self) -> Option<ValgrindCpu> {
            ValgrindCpu::from_host(|leaf, subleaf| self.cpuid(leaf, subleaf), || self.xcr0)
        }

        /// Valgrind's table as a host's answers, with `leaf 0xd` as given.
        fn haswell_with(xsave: &[(u32, CpuidResult)], xcr0: u64) -> Host {
            let mut leaves: Vec<_> = LEAVES.to_vec();
            leaves.extend(xsave.iter().map(|&(sub, answer)| (0xd, sub, answer)));
            Host { leaves, xcr0 }
        }

        /// Replaces the answer of (`leaf`, `subleaf`).
        fn with(mut self, leaf: u32, subleaf: u32, answer: CpuidResult) -> Host {
            self.leaves.retain(|(l, s, _)| (*l, *s) != (leaf, subleaf));
            self.leaves.push((leaf, subleaf, answer));
            self
        }
    }

    /// Leaf 0xd of a Haswell with AVX enabled, as Valgrind answers it.
    const HASWELL_XSAVE: &[(u32, CpuidResult)] = &[
        (0, [0x7, 0x340, 0x340, 0]),
        (1, [0x1, 0, 0, 0]),
        (2, [0x100, 0x240, 0, 0]),
    ];

    /// An Intel Xeon (Skylake-SP) with AVX-512 and PKRU enabled.
    fn intel_avx512_server() -> Host {
        Host::haswell_with(
            &[
                (0, [0x2ff, 0xa88, 0xa88, 0]),
                (1, [0xf, 0xa88, 0x100, 0]),
                (2, [0x100, 0x240, 0, 0]),
                (3, [0x40, 0x3c0, 0, 0]),
                (4, [0x40, 0x400, 0, 0]),
                (5, [0x40, 0x440, 0, 0]),
                (6, [0x200, 0x480, 0, 0]),
                (7, [0x400, 0x680, 0, 0]),
                (8, [0x80, 0, 1, 0]),
                (9, [0x8, 0xa80, 0, 0]),
            ],
            0x2e7,
        )
        .with(0x1, 0, [0x50654, 0x400800, 0x7ffefbff, 0xbfebfbff])
        .with(0x7, 0, [0, 0xd19ffffb, 0x0000000c, 0x9c000000])
    }

    /// An AMD EPYC (Zen 4) with AVX-512 enabled, as measured on one.
    fn amd_zen4() -> Host {
        Host {
            leaves: vec![
                (0x0, 0, [0x1c, 0x68747541, 0x444d4163, 0x69746e65]),
                (0x1, 0, [0xa10f11, 0x20800, 0xfffa3203, 0x178bfbff]),
                (0x7, 0, [0x1, 0xf1bf07ab, 0x405fc6, 0x10]),
                (0xd, 0, [0xe7, 0x980, 0x980, 0]),
                (0xd, 1, [0xf, 0x9a8, 0x1800, 0]),
                (0xd, 2, [0x100, 0x240, 0, 0]),
                (0xd, 5, [0x40, 0x340, 0, 0]),
                (0xd, 6, [0x200, 0x380, 0, 0]),
                (0xd, 7, [0x400, 0x580, 0, 0]),
                (0xd, 11, [0x10, 0, 1, 0]),
                (0xd, 12, [0x18, 0, 1, 0]),
                (
                    0x8000_0000,
                    0,
                    [0x80000021, 0x68747541, 0x444d4163, 0x69746e65],
                ),
                (0x8000_0001, 0, [0xa10f11, 0x40000000, 0x4003f3, 0x2fd3fbff]),
            ],
            xcr0: 0xe7,
        }
    }

    /// Checks that a program shown `cpu` on `host` sees Valgrind's
    /// processor, and the xsave layout the host's processor uses.
    fn assert_runs_on(host: &Host, cpu: &ValgrindCpu) {
        for leaf in [0, 1, 2, 4, 7, 0xb, 0x8000_0001, 0x8000_0004] {
            assert_eq!(
                Some(cpu.cpuid(leaf, 0)),
                valgrind_answer(leaf, 0),
                "{leaf:#x}"
            );
        }
        assert_eq!(cpu.cpuid(7, 0)[1] & AVX512F, 0);
        // The xsave area: the size of what XCR0 enables, each component
        // where the processor puts it, no compacted or optimized forms.
        let [_, size, _, _] = cpu.cpuid(0xd, 0);
        assert_eq!(cpu.cpuid(0xd, 0), host.cpuid(0xd, 0));
        assert_eq!(cpu.cpuid(0xd, 1), [0; 4]);
        for component in (2..64u32).filter(|bit| host.xcr0 & 1 << bit != 0) {
            let [length, offset, _, _] = cpu.cpuid(0xd, component);
            assert_eq!(cpu.cpuid(0xd, component), host.cpuid(0xd, component));
            assert!(
                length > 0 && offset + length <= size,
                "component {component}"
            );
        }
        // Beyond the table: leaf 0xd's sub-leaf 0, as Valgrind answers.
        assert_eq!(cpu.cpuid(0xe, 0), cpu.cpuid(0xd, 0));
        assert_eq!(cpu.cpuid(0x8000_0009, 3), cpu.cpuid(0xd, 0));
    }

    #[test]
    fn the_processor_is_valgrinds_haswell() {
        let host = Host::haswell_with(HASWELL_XSAVE, 0x7);
        let cpu = host
            .valgrind_cpu()
            .expect("a Haswell runs Valgrind's table");
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
        // On a host with AVX and no AVX-512 every answer is Valgrind's,
        // as measured under valgrind 3.19.
        assert_eq!(cpu.cpuid(0xd, 0), [0x7, 0x340, 0x340, 0]);
        assert_eq!(cpu.cpuid(0xd, 2), [0x100, 0x240, 0, 0]);
        assert_eq!(cpu.cpuid(0xe, 0), [0x7, 0x340, 0x340, 0]);
        assert_runs_on(&host, &cpu);
    }

    #[test]
    fn an_intel_avx512_server_sees_its_own_xsave_area() {
        let host = intel_avx512_server();
        let cpu = host
            .valgrind_cpu()
            .expect("the server runs Valgrind's table");
        assert_eq!(cpu.cpuid(0xd, 0)[1], 0xa88);
        assert_eq!(cpu.cpuid(0xd, 7), [0x400, 0x680, 0, 0]);
        assert_runs_on(&host, &cpu);
    }

    #[test]
    fn an_amd_zen4_sees_its_own_xsave_area() {
        let host = amd_zen4();
        let cpu = host.valgrind_cpu().expect("a Zen 4 runs Valgrind's table");
        // GenuineIntel's Haswell, with AMD's layout of the AVX-512 state.
        assert_eq!(cpu.cpuid(0, 0)[1], 0x756e6547);
        assert_eq!(cpu.cpuid(0xd, 0), [0xe7, 0x980, 0x980, 0]);
        assert_eq!(cpu.cpuid(0xd, 7), [0x400, 0x580, 0, 0]);
        // Supervisor components answer as the host (they are not in XCR0).
        assert_eq!(cpu.cpuid(0xd, 11), [0x10, 0, 1, 0]);
        assert_runs_on(&host, &cpu);
    }

    #[test]
    fn a_host_without_avx2_keeps_its_own() {
        let host = Host::haswell_with(HASWELL_XSAVE, 0x7);
        let [eax, ebx, ecx, edx] = host.cpuid(7, 0);
        let sandy_bridge = host.with(7, 0, [eax, ebx & !(1 << 5), ecx, edx]);
        assert!(sandy_bridge.valgrind_cpu().is_none());
    }

    #[test]
    fn a_host_without_avx_state_or_osxsave_keeps_its_own() {
        let mut without_ymm = Host::haswell_with(HASWELL_XSAVE, 0x7);
        without_ymm.xcr0 = 0x3;
        assert!(without_ymm.valgrind_cpu().is_none());
        // Without OSXSAVE, XCR0 is not read (`xgetbv` would fault).
        let host = Host::haswell_with(HASWELL_XSAVE, 0x7);
        let [eax, ebx, ecx, edx] = host.cpuid(1, 0);
        let without_osxsave = host.with(1, 0, [eax, ebx, ecx & !(1 << 27), edx]);
        let cpu = ValgrindCpu::from_host(
            |leaf, subleaf| without_osxsave.cpuid(leaf, subleaf),
            || panic!("XCR0 read without OSXSAVE"),
        );
        assert!(cpu.is_none());
        // A host whose basic leaves end before 0xd.
        let old = Host::haswell_with(HASWELL_XSAVE, 0x7).with(0, 0, [0xb, 0, 0, 0]);
        assert!(old.valgrind_cpu().is_none());
    }

    #[test]
    fn performance_hints_and_system_features_need_not_be_there() {
        let host = Host::haswell_with(HASWELL_XSAVE, 0x7);
        let [a7, b7, c7, d7] = host.cpuid(7, 0);
        let [a1, b1, c1, d1] = host.cpuid(1, 0);
        // Without ERMS and VMX.
        let plain =
            host.with(7, 0, [a7, b7 & !(1 << 9), c7, d7])
                .with(1, 0, [a1, b1, c1 & !(1 << 5), d1]);
        assert!(plain.valgrind_cpu().is_some());
    }

    #[test]
    fn sub_leaves_and_leaves_beyond_the_table() {
        let cpu = Host::haswell_with(HASWELL_XSAVE, 0x7)
            .valgrind_cpu()
            .expect("a Haswell runs Valgrind's table");
        assert_eq!(cpu.cpuid(4, 3)[3], 6);
        assert_eq!(cpu.cpuid(4, 4), [0; 4]);
        assert_eq!(cpu.cpuid(7, 1), [0; 4]);
        assert_eq!(cpu.cpuid(0xb, 9), [0, 0, 9, 2]);
        assert_eq!(cpu.cpuid(1, 5), cpu.cpuid(1, 0));
        assert_eq!(cpu.cpuid(0xd, 3), [0; 4]);
        assert_eq!(cpu.cpuid(0xd, 64), [0; 4]);
        assert_eq!(cpu.cpuid(0xd, u32::MAX), [0; 4]);
        assert_eq!(cpu.cpuid(0x4000_0000, 0), cpu.cpuid(0xd, 0));
    }

    #[test]
    fn execute_sets_the_registers_and_moves_on() {
        let cpu = Host::haswell_with(HASWELL_XSAVE, 0x7)
            .valgrind_cpu()
            .expect("a Haswell runs Valgrind's table");
        // SAFETY: a plain-data struct of integers; all zeros is valid.
        let mut regs: crate::ptrace::Regs = unsafe { std::mem::zeroed() };
        regs.rax = 0xffff_ffff_0000_0007;
        regs.rcx = 0;
        regs.rbx = u64::MAX;
        regs.rip = 0x1000;
        execute(&cpu, &mut regs, 2);
        assert_eq!(regs.rax, 0);
        assert_eq!(regs.rbx, 0x427aa);
        assert_eq!(regs.rip, 0x1002);
    }
}
