//! Cache auto-detection with CPUID, as Valgrind 3.19 does it on x86-64
//! (`coregrind/m_cache.c` and `cachegrind/cg_arch.c`).
//!
//! - Intel: the one-byte descriptors of leaf 2; descriptor `0xff` sends the search to
//!   the deterministic cache parameters of leaf 4. (Leaf 4 is read only then.)
//! - AMD: leaves `0x80000005` (L1) and `0x80000006` (L2, L3).
//! - VIA (`CentaurHauls`): a fixed VIA Nehemiah configuration.
//!
//! LL is the unified cache of the highest level. The result must be "sensible" (one
//! cache of each kind per level, no gaps) or it is dropped, and then Valgrind's
//! defaults apply. An LL whose set count is not a power of two is adjusted by
//! [`tweak_ll`].

use std::fmt;

use crate::config::{CacheConfig, CacheLevel, CachesConfig, GeometryError};

/// Something that answers CPUID queries: the host ([`HostCpuid`]) or, in tests, a
/// table of recorded answers.
pub trait CpuidSource {
    /// `[eax, ebx, ecx, edx]` of CPUID for `leaf` and `subleaf` (ecx).
    fn cpuid(&mut self, leaf: u32, subleaf: u32) -> [u32; 4];
}

/// The CPUID instruction of the machine this runs on.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostCpuid;

impl CpuidSource for HostCpuid {
    #[cfg(target_arch = "x86_64")]
    fn cpuid(&mut self, leaf: u32, subleaf: u32) -> [u32; 4] {
        // SAFETY: CPUID exists on every x86-64 processor; it only reads
        // model-specific identification registers and has no side effects.
        // (The intrinsic is safe in newer Rust, unsafe in the 1.80 minimum.)
        #[allow(unused_unsafe)]
        let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, subleaf) };
        [r.eax, r.ebx, r.ecx, r.edx]
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn cpuid(&mut self, _leaf: u32, _subleaf: u32) -> [u32; 4] {
        [0; 4]
    }
}

/// The kind of a hardware cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheKind {
    /// Instructions only.
    Instruction,
    /// Data only.
    Data,
    /// Instructions and data.
    Unified,
}

/// One cache as CPUID describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HwCache {
    /// Instruction, data or unified.
    pub kind: CacheKind,
    /// 1 for L1, 2 for L2, …
    pub level: u32,
    /// Total size in bytes.
    pub size: u32,
    /// Ways per set.
    pub assoc: u32,
    /// Line size in bytes (0 for a Pentium 4 trace cache).
    pub line_size: u32,
    /// A Pentium 4 micro-op trace cache, whose size counts micro-ops, not bytes.
    pub trace_cache: bool,
}

/// Something Valgrind would tell the user while configuring the caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Warning {
    /// Caches were found but no unified cache at the last level.
    NoLastLevel,
    /// The LL simulation uses the cache of this level (greater than 2).
    LastLevelIs(u32),
    /// A Pentium 4 trace cache of `kib` KiB was turned into an I1 of `sim_kib` KiB
    /// with 32-byte lines.
    TraceCache {
        /// The trace cache's size as CPUID gives it (KiB of micro-ops).
        kib: u32,
        /// The simulated I1 size in KiB.
        sim_kib: u32,
    },
    /// The detected LL was adjusted so that its set count is a power of two.
    LlAdjusted {
        /// What CPUID said.
        specified: CacheConfig,
        /// What is simulated.
        simulated: CacheConfig,
    },
    /// Nothing usable was detected: Valgrind's defaults are used. (Valgrind does not
    /// print this when `--I1`, `--D1` and `--LL` are all given.)
    UsingDefaults,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::NoLastLevel => write!(f, "L2 cache not installed, ignore LL results."),
            Warning::LastLevelIs(l) => {
                write!(f, "L{l} cache found, using its data for the LL simulation.")
            }
            Warning::TraceCache { kib, sim_kib } => write!(
                f,
                "Pentium 4 with {kib} KB micro-op instruction trace cache; \
                 simulating a {sim_kib} KB I-cache with 32 B lines"
            ),
            Warning::LlAdjusted {
                specified,
                simulated,
            } => write!(
                f,
                "specified LL cache: line_size {}  assoc {}  total_size {}; \
                 simulated LL cache: line_size {}  assoc {}  total_size {}",
                specified.line_size,
                specified.assoc,
                specified.size,
                simulated.line_size,
                simulated.assoc,
                simulated.size
            ),
            Warning::UsingDefaults => {
                write!(f, "cannot auto-detect cache config, using defaults")
            }
        }
    }
}

/// The outcome of auto-detection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detection {
    /// The caches found by CPUID, after the sensibility check (empty when detection
    /// failed or was not sensible).
    pub hw: Vec<HwCache>,
    /// The configuration to simulate: detected (LL adjusted) or Valgrind's defaults.
    pub config: CachesConfig,
    /// True when `config` comes from CPUID rather than the defaults.
    pub detected: bool,
    /// What Valgrind would print about it.
    pub warnings: Vec<Warning>,
}

impl Detection {
    /// Applies `--I1/--D1/--LL` values (already checked when parsed) over the
    /// detected configuration. A detected cache the simulator cannot handle is an
    /// error unless an option replaces it (Valgrind aborts in that case).
    pub fn with_overrides(
        &self,
        i1: Option<CacheConfig>,
        d1: Option<CacheConfig>,
        ll: Option<CacheConfig>,
    ) -> Result<CachesConfig, (CacheLevel, GeometryError)> {
        let mut config = self.config;
        for (level, given) in [
            (CacheLevel::I1, i1),
            (CacheLevel::D1, d1),
            (CacheLevel::LL, ll),
        ] {
            match given {
                Some(c) => config.set(level, c),
                None => config.get(level).check().map_err(|e| (level, e))?,
            }
        }
        Ok(config)
    }
}

/// Detects the caches of this machine.
pub fn detect() -> Detection {
    detect_with(&mut HostCpuid)
}

/// Detects the caches described by `source`.
pub fn detect_with(source: &mut impl CpuidSource) -> Detection {
    let hw = hw_caches(source)
        .filter(|caches| is_sensible(caches))
        .unwrap_or_default();
    let mut warnings = Vec::new();
    let (config, detected) = match choose(&hw, &mut warnings) {
        Some(config) => (config, true),
        None => {
            warnings.push(Warning::UsingDefaults);
            (CachesConfig::DEFAULT, false)
        }
    };
    let mut config = config;
    let tweaked = tweak_ll(config.ll);
    if tweaked != config.ll {
        warnings.push(Warning::LlAdjusted {
            specified: config.ll,
            simulated: tweaked,
        });
        config.ll = tweaked;
    }
    Detection {
        hw,
        config,
        detected,
        warnings,
    }
}

/// Picks I1, D1 and LL from the detected caches, as `configure_caches` does.
fn choose(hw: &[HwCache], warnings: &mut Vec<Warning>) -> Option<CachesConfig> {
    let levels = hw.iter().map(|c| c.level).max().unwrap_or(0);
    let find = |kind, level| hw.iter().find(|c| c.kind == kind && c.level == level);
    let i1 = find(CacheKind::Instruction, 1);
    let d1 = find(CacheKind::Data, 1);
    let ll = find(CacheKind::Unified, levels);
    if !hw.is_empty() && ll.is_none() {
        warnings.push(Warning::NoLastLevel);
    }
    if ll.is_some() && levels > 2 {
        warnings.push(Warning::LastLevelIs(levels));
    }
    let (i1, d1, ll) = (i1?, d1?, ll?);
    let i1 = if i1.trace_cache {
        let sim = if i1.size == 12 * 1024 || i1.size == 16 * 1024 {
            16 * 1024
        } else {
            32 * 1024
        };
        warnings.push(Warning::TraceCache {
            kib: i1.size / 1024,
            sim_kib: sim / 1024,
        });
        CacheConfig::new(sim, i1.assoc, 32)
    } else {
        CacheConfig::new(i1.size, i1.assoc, i1.line_size)
    };
    Some(CachesConfig {
        i1,
        d1: CacheConfig::new(d1.size, d1.assoc, d1.line_size),
        ll: CacheConfig::new(ll.size, ll.assoc, ll.line_size),
    })
}

/// Makes an LL's set count a power of two as Valgrind's `maybe_tweak_LLc` does: the
/// set count is rounded down to a power of two, the associativity scaled up by the
/// same factor (rounded to nearest), and the size recomputed from the three. A
/// configuration with a zero field, or with no whole set, is returned unchanged.
pub fn tweak_ll(ll: CacheConfig) -> CacheConfig {
    if ll.size == 0 || ll.assoc == 0 || ll.line_size == 0 {
        return ll;
    }
    let sets = ll.size / ll.assoc.wrapping_mul(ll.line_size);
    if sets == 0 {
        return ll;
    }
    let (assoc, new_sets) = if sets.is_power_of_two() {
        (ll.assoc, sets)
    } else {
        let new_sets = 1u32 << (31 - sets.leading_zeros());
        let factor = f64::from(sets) / f64::from(new_sets);
        ((0.5 + factor * f64::from(ll.assoc)) as u32, new_sets)
    };
    let size = ll.line_size.wrapping_mul(assoc).wrapping_mul(new_sets);
    CacheConfig::new(size, assoc, ll.line_size)
}

/// Reads the caches from CPUID (`get_caches_from_CPUID`); `None` when the vendor is
/// not handled or the processor does not say.
pub fn hw_caches(source: &mut impl CpuidSource) -> Option<Vec<HwCache>> {
    let [max_leaf, ebx, ecx, edx] = source.cpuid(0, 0);
    if max_leaf == 0 {
        return None;
    }
    let mut vendor = [0u8; 12];
    vendor[0..4].copy_from_slice(&ebx.to_le_bytes());
    vendor[4..8].copy_from_slice(&edx.to_le_bytes());
    vendor[8..12].copy_from_slice(&ecx.to_le_bytes());
    let mut caches = match &vendor {
        b"GenuineIntel" => intel(source, max_leaf)?,
        b"AuthenticAMD" => amd(source)?,
        b"CentaurHauls" => vec![
            hw(CacheKind::Data, 1, 64, 16, 16),
            hw(CacheKind::Instruction, 1, 64, 4, 16),
            hw(CacheKind::Unified, 2, 64, 16, 16),
        ],
        _ => return None,
    };
    for c in &mut caches {
        c.size = c.size.wrapping_mul(1024);
    }
    Some(caches)
}

/// A cache with its size still in KiB (converted to bytes at the end, like Valgrind).
fn hw(kind: CacheKind, level: u32, kib: u32, assoc: u32, line_size: u32) -> HwCache {
    HwCache {
        kind,
        level,
        size: kib,
        assoc,
        line_size,
        trace_cache: false,
    }
}

/// A Pentium 4 trace cache of `kuops` K micro-ops, 8-way.
fn trace_cache(kuops: u32) -> HwCache {
    HwCache {
        trace_cache: true,
        ..hw(CacheKind::Instruction, 1, kuops, 8, 0)
    }
}

/// Intel: leaf 2 descriptors, and leaf 4 when a descriptor says so.
fn intel(source: &mut impl CpuidSource, max_leaf: u32) -> Option<Vec<HwCache>> {
    use CacheKind::{Data as D, Instruction as I, Unified as U};
    if max_leaf < 2 {
        return None;
    }
    let eax1 = source.cpuid(1, 0)[0];
    let family = (((eax1 >> 20) & 0xff) << 4) + ((eax1 >> 8) & 0xf);
    let model = (((eax1 >> 16) & 0xf) << 4) + ((eax1 >> 4) & 0xf);
    let mut bytes = [0u8; 16];
    for (chunk, reg) in bytes.chunks_exact_mut(4).zip(source.cpuid(2, 0)) {
        chunk.copy_from_slice(&reg.to_le_bytes());
    }
    // AL holds how many times leaf 2 must be queried; only 1 is handled.
    if bytes[0] != 1 {
        return None;
    }
    bytes[0] = 0;
    let mut out = Vec::new();
    for &descriptor in &bytes {
        let cache = match descriptor {
            0x06 => hw(I, 1, 8, 4, 32),
            0x08 => hw(I, 1, 16, 4, 32),
            0x09 => hw(I, 1, 32, 4, 64),
            0x30 => hw(I, 1, 32, 8, 64),
            0x0a => hw(D, 1, 8, 2, 32),
            0x0c => hw(D, 1, 16, 4, 32),
            0x0d => hw(D, 1, 16, 4, 64),
            0x0e => hw(D, 1, 24, 6, 64),
            0x2c => hw(D, 1, 32, 8, 64),
            // IA-64 descriptors: Valgrind panics; treat as a failed detection.
            0x10 | 0x15 | 0x1a | 0x88 | 0x89 | 0x8a | 0x8d | 0x90 | 0x96 | 0x9b => return None,
            0x22 => hw(U, 3, 512, 4, 64),
            0x23 => hw(U, 3, 1024, 8, 64),
            0x25 => hw(U, 3, 2048, 8, 64),
            0x29 => hw(U, 3, 4096, 8, 64),
            0x46 => hw(U, 3, 4096, 4, 64),
            0x47 => hw(U, 3, 8192, 8, 64),
            0x4a => hw(U, 3, 6144, 12, 64),
            0x4b => hw(U, 3, 8192, 16, 64),
            0x4c => hw(U, 3, 12288, 12, 64),
            0x4d => hw(U, 3, 16384, 16, 64),
            0xd0 => hw(U, 3, 512, 4, 64),
            0xd1 => hw(U, 3, 1024, 4, 64),
            0xd2 => hw(U, 3, 2048, 4, 64),
            0xd6 => hw(U, 3, 1024, 8, 64),
            0xd7 => hw(U, 3, 2048, 8, 64),
            0xd8 => hw(U, 3, 4096, 8, 64),
            0xdc => hw(U, 3, 1536, 12, 64),
            0xdd => hw(U, 3, 3072, 12, 64),
            0xde => hw(U, 3, 6144, 12, 64),
            0xe2 => hw(U, 3, 2048, 16, 64),
            0xe3 => hw(U, 3, 4096, 16, 64),
            0xe4 => hw(U, 3, 8192, 16, 64),
            0xea => hw(U, 3, 12288, 24, 64),
            0xeb => hw(U, 3, 18432, 24, 64),
            0xec => hw(U, 3, 24576, 24, 64),
            0x21 => hw(U, 2, 256, 8, 64),
            0x39 => hw(U, 2, 128, 4, 64),
            0x3c => hw(U, 2, 256, 4, 64),
            0x41 => hw(U, 2, 128, 4, 32),
            0x42 => hw(U, 2, 256, 4, 32),
            0x43 => hw(U, 2, 512, 4, 32),
            0x44 => hw(U, 2, 1024, 4, 32),
            0x45 => hw(U, 2, 2048, 4, 32),
            0x48 => hw(U, 2, 3072, 12, 64),
            0x4e => hw(U, 2, 6144, 24, 64),
            0x49 if family == 15 && model == 6 => hw(U, 3, 4096, 16, 64),
            0x49 => hw(U, 2, 4096, 16, 64),
            0x60 => hw(D, 1, 16, 8, 64),
            0x66 => hw(D, 1, 8, 4, 64),
            0x67 => hw(D, 1, 16, 4, 64),
            0x68 => hw(D, 1, 32, 4, 64),
            0x70 => trace_cache(12),
            0x71 => trace_cache(16),
            0x72 => trace_cache(32),
            0x78 => hw(U, 2, 1024, 4, 64),
            0x79 => hw(U, 2, 128, 8, 64),
            0x7a => hw(U, 2, 256, 8, 64),
            0x7b => hw(U, 2, 512, 8, 64),
            0x7c => hw(U, 2, 1024, 8, 64),
            0x7d => hw(U, 2, 2048, 8, 64),
            0x7e => hw(U, 2, 256, 8, 128),
            0x7f => hw(U, 2, 512, 2, 64),
            0x80 => hw(U, 2, 512, 8, 64),
            0x81 => hw(U, 2, 128, 8, 32),
            0x82 => hw(U, 2, 256, 8, 32),
            0x83 => hw(U, 2, 512, 8, 32),
            0x84 => hw(U, 2, 1024, 8, 32),
            0x85 => hw(U, 2, 2048, 8, 32),
            0x86 => hw(U, 2, 512, 4, 64),
            0x87 => hw(U, 2, 1024, 8, 64),
            0xff => {
                out.extend(intel_leaf4(source));
                continue;
            }
            // Zeros, TLB and prefetch descriptors, "no L2/L3", and unknown values.
            _ => continue,
        };
        out.push(cache);
    }
    Some(out)
}

/// Intel leaf 4: one subleaf per cache until the type field is 0.
fn intel_leaf4(source: &mut impl CpuidSource) -> Vec<HwCache> {
    let mut out = Vec::new();
    // Real processors end the list after a handful; the bound guards against a
    // (virtual) CPU that never does.
    for subleaf in 0..64 {
        let [eax, ebx, ecx, _] = source.cpuid(4, subleaf);
        let kind = match eax & 0x1f {
            0 => break,
            1 => CacheKind::Data,
            2 => CacheKind::Instruction,
            3 => CacheKind::Unified,
            _ => continue,
        };
        let level = (eax & 0xe0) >> 5;
        if !(1..=3).contains(&level) {
            continue;
        }
        let assoc = ((ebx >> 22) & 0x3ff) + 1;
        let parts = ((ebx >> 12) & 0x3ff) + 1;
        let line_size = (ebx & 0x7ff) + 1;
        let sets = ecx.wrapping_add(1);
        let kib = assoc
            .wrapping_mul(parts)
            .wrapping_mul(line_size)
            .wrapping_mul(sets)
            / 1024;
        out.push(hw(kind, level, kib, assoc, line_size));
    }
    out
}

/// Decodes the L2/L3 associativity field of AMD's leaf 0x80000006.
fn amd_l2_l3_assoc(bits: u32) -> u32 {
    match bits & 0xf {
        2 => 2,
        4 => 4,
        6 => 8,
        8 => 16,
        0xa => 32,
        0xb => 48,
        0xc => 64,
        0xd => 96,
        0xe => 128,
        // 1 = direct-mapped; 0 (disabled), 0xf (fully associative) and unknown
        // encodings are all simulated direct-mapped, as in Valgrind.
        _ => 1,
    }
}

/// AMD: leaves 0x80000005 and 0x80000006.
fn amd(source: &mut impl CpuidSource) -> Option<Vec<HwCache>> {
    let ext_level = source.cpuid(0x8000_0000, 0)[0];
    if ext_level & 0x8000_0000 == 0 || ext_level < 0x8000_0006 {
        return None;
    }
    let [_, _, d1, i1] = source.cpuid(0x8000_0005, 0);
    let [_, _, mut l2, l3] = source.cpuid(0x8000_0006, 0);
    if source.cpuid(1, 0)[0] == 0x630 {
        // Duron stepping A0 misreports its 64 KiB L2 as 1 KiB.
        l2 = (64 << 16) | (l2 & 0xffff);
    }
    let l1 = |kind, r: u32| hw(kind, 1, (r >> 24) & 0xff, (r >> 16) & 0xff, r & 0xff);
    let mut out = vec![
        l1(CacheKind::Data, d1),
        l1(CacheKind::Instruction, i1),
        hw(
            CacheKind::Unified,
            2,
            (l2 >> 16) & 0xffff,
            amd_l2_l3_assoc(l2 >> 12),
            l2 & 0xff,
        ),
    ];
    let l3_units = (l3 >> 18) & 0x3fff;
    if l3_units > 0 {
        out.push(hw(
            CacheKind::Unified,
            3,
            l3_units * 512,
            amd_l2_l3_assoc(l3 >> 12),
            l3 & 0xff,
        ));
    }
    Some(out)
}

/// Valgrind's `cache_info_is_sensible`: at most one cache of each kind per level, no
/// unified cache beside split ones, and no level without caches below the last.
pub fn is_sensible(caches: &[HwCache]) -> bool {
    let levels = caches.iter().map(|c| c.level).max().unwrap_or(0);
    for level in 1..=levels {
        let count = |kind| {
            caches
                .iter()
                .filter(|c| c.level == level && c.kind == kind)
                .count()
        };
        let (i, d, u) = (
            count(CacheKind::Instruction),
            count(CacheKind::Data),
            count(CacheKind::Unified),
        );
        if i + d + u == 0 || i > 1 || d > 1 || u > 1 || (u > 0 && i + d > 0) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Recorded CPUID answers; anything not recorded reads as zeros.
    struct Fake(HashMap<(u32, u32), [u32; 4]>);

    impl CpuidSource for Fake {
        fn cpuid(&mut self, leaf: u32, subleaf: u32) -> [u32; 4] {
            self.0.get(&(leaf, subleaf)).copied().unwrap_or([0; 4])
        }
    }

    fn fake(entries: &[((u32, u32), [u32; 4])]) -> Fake {
        Fake(entries.iter().copied().collect())
    }

    const AMD: [u32; 4] = [0x10, 0x6874_7541, 0x444d_4163, 0x6974_6e65];
    const INTEL: [u32; 4] = [0x16, 0x756e_6547, 0x6c65_746e, 0x4965_6e69];

    /// The AMD EPYC VM this project runs on; Valgrind 3.19 reports I1 = D1 =
    /// 32768 B 8-way 64 B and an LL of 201326592 B, 1-way, simulated as
    /// 268435456 B, 2-way.
    fn epyc() -> Fake {
        fake(&[
            ((0, 0), AMD),
            ((1, 0), [0x00a0_0f11, 0x0102_0800, 0xfffa_3203, 0x178b_fbff]),
            ((0x8000_0000, 0), [0x8000_0022, 0, 0, 0]),
            (
                (0x8000_0005, 0),
                [0xff40_ff40, 0xff40_ff40, 0x2008_0140, 0x2008_0140],
            ),
            (
                (0x8000_0006, 0),
                [0x4800_2200, 0x6800_4200, 0x0200_6140, 0x0600_9140],
            ),
        ])
    }

    #[test]
    fn amd_epyc_like_valgrind() {
        let d = detect_with(&mut epyc());
        assert!(d.detected);
        assert_eq!(d.hw.len(), 4);
        assert_eq!(
            d.hw[3],
            HwCache {
                kind: CacheKind::Unified,
                level: 3,
                size: 201_326_592,
                assoc: 1,
                line_size: 64,
                trace_cache: false
            }
        );
        assert_eq!(d.config.i1, CacheConfig::new(32768, 8, 64));
        assert_eq!(d.config.d1, CacheConfig::new(32768, 8, 64));
        assert_eq!(d.config.ll, CacheConfig::new(268_435_456, 2, 64));
        assert_eq!(
            d.warnings,
            [
                Warning::LastLevelIs(3),
                Warning::LlAdjusted {
                    specified: CacheConfig::new(201_326_592, 1, 64),
                    simulated: CacheConfig::new(268_435_456, 2, 64),
                }
            ]
        );
        assert_eq!(
            d.warnings[0].to_string(),
            "L3 cache found, using its data for the LL simulation."
        );
    }

    #[test]
    fn intel_leaf_4() {
        // Leaf 2 of a Skylake: 0xff sends to leaf 4; 0xfe (TLB leaf) and 0xf0
        // (prefetch) are ignored.
        let mut f = fake(&[
            ((0, 0), INTEL),
            ((1, 0), [0x0005_06e3, 0, 0, 0]),
            ((2, 0), [0x00fe_ff01, 0x0000_00f0, 0, 0]),
            ((4, 0), [0x21, (7 << 22) | 63, 63, 0]),
            ((4, 1), [0x22, (7 << 22) | 63, 63, 0]),
            ((4, 2), [0x43, (3 << 22) | 63, 1023, 0]),
            ((4, 3), [0x63, (15 << 22) | 63, 12287, 0]),
        ]);
        let d = detect_with(&mut f);
        assert_eq!(d.config.i1, CacheConfig::new(32768, 8, 64));
        assert_eq!(d.config.d1, CacheConfig::new(32768, 8, 64));
        // 12 MiB, 16-way: 12288 sets → 8192 sets, 24-way, same size.
        assert_eq!(d.config.ll, CacheConfig::new(12_582_912, 24, 64));
    }

    #[test]
    fn intel_descriptors() {
        // 0x30 I1 32K/8/64, 0x2c D1 32K/8/64, 0x7d L2 2M/8/64.
        let mut f = fake(&[((0, 0), INTEL), ((2, 0), [0x7d2c_3001, 0, 0, 0])]);
        let d = detect_with(&mut f);
        assert_eq!(d.config.ll, CacheConfig::new(2_097_152, 8, 64));
        assert_eq!(d.warnings, []);
        // A second D1 descriptor makes the result not sensible: defaults.
        let mut f = fake(&[((0, 0), INTEL), ((2, 0), [0x7d2c_3001, 0x0d, 0, 0])]);
        let d = detect_with(&mut f);
        assert!(!d.detected);
        assert_eq!(d.config, CachesConfig::DEFAULT);
        assert_eq!(d.warnings, [Warning::UsingDefaults]);
        // More than one leaf-2 round: not handled.
        let mut f = fake(&[((0, 0), INTEL), ((2, 0), [0x7d2c_3002, 0, 0, 0])]);
        assert_eq!(hw_caches(&mut f), None);
    }

    #[test]
    fn intel_trace_cache() {
        // 0x71: 16K-uop trace cache; 0x66 D1 8K/4/64; 0x7b L2 512K/8/64.
        let mut f = fake(&[((0, 0), INTEL), ((2, 0), [0x7b66_7101, 0, 0, 0])]);
        let d = detect_with(&mut f);
        assert_eq!(d.config.i1, CacheConfig::new(16384, 8, 32));
        assert_eq!(
            d.warnings,
            [Warning::TraceCache {
                kib: 16,
                sim_kib: 16
            }]
        );
    }

    #[test]
    fn unknown_vendor_and_missing_ll_use_defaults() {
        let mut f = fake(&[((0, 0), [0x10, 0x6f67_7948, 0x656e_6975, 0x6e65_476e])]);
        let d = detect_with(&mut f);
        assert_eq!(d.config, CachesConfig::DEFAULT);
        assert!(d.hw.is_empty());
        // Intel with only L1 caches: no LL.
        let mut f = fake(&[((0, 0), INTEL), ((2, 0), [0x002c_3001, 0, 0, 0])]);
        let d = detect_with(&mut f);
        assert_eq!(d.config, CachesConfig::DEFAULT);
        assert_eq!(d.warnings, [Warning::NoLastLevel, Warning::UsingDefaults]);
    }

    #[test]
    fn tweak_rules() {
        // Already a power of two: unchanged.
        let c = CacheConfig::new(8 << 20, 16, 64);
        assert_eq!(tweak_ll(c), c);
        // 5 MiB, 48-way (AMD): 1706 sets → 1024, factor 1.666…, assoc 80.
        assert_eq!(
            tweak_ll(CacheConfig::new(5 << 20, 48, 64)),
            CacheConfig::new(64 * 80 * 1024, 80, 64)
        );
        // A size not a multiple of a set is trimmed to whole sets.
        assert_eq!(
            tweak_ll(CacheConfig::new(65536 + 64, 8, 64)),
            CacheConfig::new(65536, 8, 64)
        );
        assert_eq!(
            tweak_ll(CacheConfig::new(64, 8, 64)),
            CacheConfig::new(64, 8, 64)
        );
    }

    #[test]
    fn overrides() {
        let d = detect_with(&mut epyc());
        let c = d
            .with_overrides(None, Some(CacheConfig::new(65536, 2, 64)), None)
            .unwrap();
        assert_eq!(c.d1, CacheConfig::new(65536, 2, 64));
        assert_eq!(c.i1, CacheConfig::new(32768, 8, 64));
        let mut bad = d.clone();
        bad.config.i1 = CacheConfig::new(49152, 8, 64); // 96 sets
        assert_eq!(
            bad.with_overrides(None, None, None),
            Err((CacheLevel::I1, GeometryError::SetsNotPowerOfTwo))
        );
        assert!(bad
            .with_overrides(Some(CacheConfig::DEFAULT_L1), None, None)
            .is_ok());
    }

    #[test]
    fn host_detection_runs() {
        let d = detect();
        assert!(d.config.check().is_ok());
    }
}
