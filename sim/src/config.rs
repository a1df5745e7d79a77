//! Cache geometry: [`CacheConfig`], the `--I1/--D1/--LL=size,assoc,line` options and
//! the `desc:` header lines.
//!
//! The validity rules are those of Valgrind's `cg_arch.c` (`check_cache`), checked in
//! the same order so that the same option values are accepted and rejected.

use std::fmt;

/// The smallest line size the simulators accept (Valgrind's `MIN_LINE_SIZE`): any
/// smaller and one instruction could straddle three lines.
pub const MIN_LINE_SIZE: u32 = 16;

/// The geometry of one cache: total size, associativity and line size, all in bytes
/// except `assoc` (ways per set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheConfig {
    /// Total size in bytes.
    pub size: u32,
    /// Number of ways per set (1 = direct-mapped).
    pub assoc: u32,
    /// Line (block) size in bytes.
    pub line_size: u32,
}

/// Which cache an option or configuration is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheLevel {
    /// The first-level instruction cache.
    I1,
    /// The first-level data cache.
    D1,
    /// The last-level (unified) cache.
    LL,
}

impl CacheLevel {
    /// The name Valgrind uses: `I1`, `D1` or `LL`.
    pub fn name(self) -> &'static str {
        match self {
            CacheLevel::I1 => "I1",
            CacheLevel::D1 => "D1",
            CacheLevel::LL => "LL",
        }
    }
}

impl fmt::Display for CacheLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a cache geometry cannot be simulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// The line size is 0.
    #[error("the line size is zero")]
    ZeroLineSize,
    /// The associativity is 0.
    #[error("the associativity is zero")]
    ZeroAssoc,
    /// `size / (line_size * assoc)` is not a whole power of two.
    #[error("the number of sets, size / (line size × associativity), is not a whole power of two")]
    SetsNotPowerOfTwo,
    /// The line size is not a power of two.
    #[error("the line size is not a power of two")]
    LineNotPowerOfTwo,
    /// The line size is below [`MIN_LINE_SIZE`].
    #[error("the line size is smaller than {MIN_LINE_SIZE} bytes")]
    LineTooSmall,
    /// The total size is not larger than one line.
    #[error("the cache size is not larger than the line size")]
    SizeNotAboveLine,
    /// More ways than lines.
    #[error("the associativity is larger than the number of lines (size / line size)")]
    AssocAboveLines,
}

/// A `--I1`, `--D1` or `--LL` option value that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The value is not three comma-separated integers.
    #[error("--{level}={value}: expected <size>,<assoc>,<line_size>, three whole numbers separated by commas")]
    Syntax {
        /// The cache the option is for.
        level: CacheLevel,
        /// The option's value as given.
        value: String,
    },
    /// A number is negative or does not fit in 32 bits.
    #[error("--{level}={value}: {field} must be a positive number below 2^31")]
    OutOfRange {
        /// The cache the option is for.
        level: CacheLevel,
        /// The option's value as given.
        value: String,
        /// `size`, `assoc` or `line_size`.
        field: &'static str,
    },
    /// The three numbers parse but describe a cache the simulator cannot handle.
    #[error("--{level}={value}: {reason}")]
    Geometry {
        /// The cache the option is for.
        level: CacheLevel,
        /// The option's value as given.
        value: String,
        /// What is wrong with the geometry.
        reason: GeometryError,
    },
}

impl CacheConfig {
    /// Valgrind's x86-64 default I1 (and D1) when CPUID gives nothing: 65536 B, 2-way, 64 B.
    pub const DEFAULT_L1: CacheConfig = CacheConfig::new(65536, 2, 64);
    /// Valgrind's x86-64 default LL when CPUID gives nothing: 262144 B, 8-way, 64 B.
    pub const DEFAULT_LL: CacheConfig = CacheConfig::new(262144, 8, 64);

    /// A configuration, not yet checked (see [`CacheConfig::check`]).
    pub const fn new(size: u32, assoc: u32, line_size: u32) -> CacheConfig {
        CacheConfig {
            size,
            assoc,
            line_size,
        }
    }

    /// The number of sets, `size / line_size / assoc` (0 when a field is 0).
    pub fn sets(&self) -> u32 {
        if self.line_size == 0 || self.assoc == 0 {
            return 0;
        }
        self.size / self.line_size / self.assoc
    }

    /// For an LRU I1 of this geometry: whether fetching the bytes
    /// `first..=last` again, in order, right after they were all fetched in
    /// order, hits and changes nothing: each of their lines is then still
    /// the most recently used of its set, as they span no more lines than
    /// the cache has sets.
    pub fn refetch_hits(&self, first: u64, last: u64) -> bool {
        let bits = self.line_size.trailing_zeros();
        let lines = (last >> bits).wrapping_sub(first >> bits);
        first <= last && lines < u64::from(self.sets())
    }

    /// Checks that the simulator can handle this geometry, with Valgrind's rules in
    /// Valgrind's order.
    pub fn check(&self) -> Result<(), GeometryError> {
        let (size, assoc, line) = (
            u64::from(self.size),
            u64::from(self.assoc),
            u64::from(self.line_size),
        );
        if line == 0 {
            return Err(GeometryError::ZeroLineSize);
        }
        if assoc == 0 {
            return Err(GeometryError::ZeroAssoc);
        }
        if size % (line * assoc) != 0 || !(size / line / assoc).is_power_of_two() {
            return Err(GeometryError::SetsNotPowerOfTwo);
        }
        if !line.is_power_of_two() {
            return Err(GeometryError::LineNotPowerOfTwo);
        }
        if line < u64::from(MIN_LINE_SIZE) {
            return Err(GeometryError::LineTooSmall);
        }
        if size <= line {
            return Err(GeometryError::SizeNotAboveLine);
        }
        if assoc > size / line {
            return Err(GeometryError::AssocAboveLines);
        }
        Ok(())
    }

    /// Parses the value of `--I1=`, `--D1=` or `--LL=` (e.g. `32768,8,64`) and checks
    /// it. Like Valgrind, leading blanks and a `+` sign before each number are allowed.
    pub fn parse_option(level: CacheLevel, value: &str) -> Result<CacheConfig, ConfigError> {
        let syntax = || ConfigError::Syntax {
            level,
            value: value.to_string(),
        };
        let mut fields = value.split(',');
        let mut numbers = [0u32; 3];
        for (slot, name) in numbers.iter_mut().zip(["size", "assoc", "line_size"]) {
            let text = fields.next().ok_or_else(syntax)?;
            let number = parse_number(text).ok_or_else(syntax)?;
            *slot = u32::try_from(number)
                .ok()
                .filter(|&n| n <= i32::MAX as u32)
                .ok_or_else(|| ConfigError::OutOfRange {
                    level,
                    value: value.to_string(),
                    field: name,
                })?;
        }
        if fields.next().is_some() {
            return Err(syntax());
        }
        let config = CacheConfig::new(numbers[0], numbers[1], numbers[2]);
        config.check().map_err(|reason| ConfigError::Geometry {
            level,
            value: value.to_string(),
            reason,
        })?;
        Ok(config)
    }

    /// The description Valgrind puts after `desc: I1 cache: ` in its output files,
    /// e.g. `32768 B, 64 B, 8-way associative` or `65536 B, 64 B, direct-mapped`.
    pub fn desc(&self) -> String {
        if self.assoc == 1 {
            format!("{} B, {} B, direct-mapped", self.size, self.line_size)
        } else {
            format!(
                "{} B, {} B, {}-way associative",
                self.size, self.line_size, self.assoc
            )
        }
    }
}

/// Parses one decimal number as Valgrind's `strtoll10` does (leading blanks, an
/// optional sign), except that an empty field or an overflow is an error.
fn parse_number(text: &str) -> Option<i64> {
    let text = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i64 = digits.parse().ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// The three caches of a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CachesConfig {
    /// First-level instruction cache.
    pub i1: CacheConfig,
    /// First-level data cache.
    pub d1: CacheConfig,
    /// Last-level cache, shared by instruction and data misses.
    pub ll: CacheConfig,
}

/// Which header style [`CachesConfig::desc_lines`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DescStyle {
    /// Callgrind: `desc: I1 cache: 32768 B, 64 B, 8-way associative`.
    Callgrind,
    /// Cachegrind: `desc: I1 cache:         32768 B, …` (nine spaces, to align with
    /// cg_annotate's output).
    Cachegrind,
}

impl Default for CachesConfig {
    fn default() -> Self {
        CachesConfig::DEFAULT
    }
}

impl CachesConfig {
    /// Valgrind's x86-64 defaults when detection gives nothing.
    pub const DEFAULT: CachesConfig = CachesConfig {
        i1: CacheConfig::DEFAULT_L1,
        d1: CacheConfig::DEFAULT_L1,
        ll: CacheConfig::DEFAULT_LL,
    };

    /// The configuration of one cache.
    pub fn get(&self, level: CacheLevel) -> CacheConfig {
        match level {
            CacheLevel::I1 => self.i1,
            CacheLevel::D1 => self.d1,
            CacheLevel::LL => self.ll,
        }
    }

    /// Replaces the configuration of one cache (e.g. with a command-line option).
    pub fn set(&mut self, level: CacheLevel, config: CacheConfig) {
        match level {
            CacheLevel::I1 => self.i1 = config,
            CacheLevel::D1 => self.d1 = config,
            CacheLevel::LL => self.ll = config,
        }
    }

    /// Checks all three caches; the error names the first bad one.
    pub fn check(&self) -> Result<(), (CacheLevel, GeometryError)> {
        for level in [CacheLevel::I1, CacheLevel::D1, CacheLevel::LL] {
            self.get(level).check().map_err(|e| (level, e))?;
        }
        Ok(())
    }

    /// The smallest of the three line sizes: data accesses larger than this are
    /// clamped to it, as Valgrind does for `fxsave` and the like.
    pub fn min_line_size(&self) -> u32 {
        self.i1
            .line_size
            .min(self.d1.line_size)
            .min(self.ll.line_size)
    }

    /// The three `desc:` lines, without trailing newlines, in the given style.
    pub fn desc_lines(&self, style: DescStyle) -> [String; 3] {
        let pad = match style {
            DescStyle::Callgrind => " ",
            DescStyle::Cachegrind => "         ",
        };
        [
            format!("desc: I1 cache:{pad}{}", self.i1.desc()),
            format!("desc: D1 cache:{pad}{}", self.d1.desc()),
            format!("desc: LL cache:{pad}{}", self.ll.desc()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &str) -> Result<CacheConfig, ConfigError> {
        CacheConfig::parse_option(CacheLevel::D1, v)
    }

    fn geometry(v: &str) -> GeometryError {
        match parse(v) {
            Err(ConfigError::Geometry { reason, .. }) => reason,
            other => panic!("{v}: {other:?}"),
        }
    }

    #[test]
    fn parses_good_values() {
        assert_eq!(parse("32768,8,64"), Ok(CacheConfig::new(32768, 8, 64)));
        assert_eq!(parse(" 32768,+8, 64"), Ok(CacheConfig::new(32768, 8, 64)));
        assert_eq!(parse("4096,1,16"), Ok(CacheConfig::new(4096, 1, 16)));
        // Fully associative: one set.
        assert_eq!(parse("4096,64,64"), Ok(CacheConfig::new(4096, 64, 64)));
    }

    #[test]
    fn rejects_bad_syntax() {
        for v in [
            "",
            "32768,8",
            "32768,8,64,1",
            "32768,8,64 ",
            "a,8,64",
            "32768,,64",
            "0x100,1,16",
        ] {
            assert!(matches!(parse(v), Err(ConfigError::Syntax { .. })), "{v}");
        }
        assert!(matches!(
            parse("99999999999,8,64"),
            Err(ConfigError::OutOfRange { field: "size", .. })
        ));
        assert!(matches!(
            parse("32768,-8,64"),
            Err(ConfigError::OutOfRange { field: "assoc", .. })
        ));
    }

    #[test]
    fn geometry_rules_in_valgrind_order() {
        assert_eq!(geometry("32768,8,0"), GeometryError::ZeroLineSize);
        assert_eq!(geometry("32768,0,64"), GeometryError::ZeroAssoc);
        assert_eq!(geometry("32768,3,64"), GeometryError::SetsNotPowerOfTwo);
        assert_eq!(geometry("12582912,16,64"), GeometryError::SetsNotPowerOfTwo);
        assert_eq!(geometry("1000,1,8"), GeometryError::SetsNotPowerOfTwo);
        // 96-byte lines: 98304 / 96 = 1024 sets, but the line is not a power of two.
        assert_eq!(geometry("98304,1,96"), GeometryError::LineNotPowerOfTwo);
        assert_eq!(geometry("1024,1,8"), GeometryError::LineTooSmall);
        assert_eq!(geometry("64,1,64"), GeometryError::SizeNotAboveLine);
        // assoc > lines cannot pass the set rule, so AssocAboveLines is unreachable
        // from parsing, as in Valgrind; check it directly.
        assert_eq!(
            CacheConfig::new(128, 4, 64).check(),
            Err(GeometryError::SetsNotPowerOfTwo)
        );
    }

    #[test]
    fn error_message_names_option_and_reason() {
        let e = CacheConfig::parse_option(CacheLevel::LL, "32768,3,64").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--LL=32768,3,64: the number of sets, size / (line size × associativity), is not a whole power of two"
        );
    }

    #[test]
    fn desc_lines_match_valgrind() {
        let c = CachesConfig {
            i1: CacheConfig::new(32768, 8, 64),
            d1: CacheConfig::new(32768, 1, 64),
            ll: CacheConfig::new(268435456, 2, 64),
        };
        assert_eq!(
            c.desc_lines(DescStyle::Callgrind),
            [
                "desc: I1 cache: 32768 B, 64 B, 8-way associative",
                "desc: D1 cache: 32768 B, 64 B, direct-mapped",
                "desc: LL cache: 268435456 B, 64 B, 2-way associative",
            ]
        );
        assert_eq!(
            c.desc_lines(DescStyle::Cachegrind)[0],
            "desc: I1 cache:         32768 B, 64 B, 8-way associative"
        );
        assert_eq!(c.min_line_size(), 64);
        assert_eq!(
            CachesConfig::default().ll.desc(),
            "262144 B, 64 B, 8-way associative"
        );
    }
}
