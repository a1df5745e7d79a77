//! The simulated caches of a run: Valgrind's CPUID auto-detection with the
//! `--I1`, `--D1` and `--LL` options over it, and what Valgrind 3.19 prints
//! about them when it starts:
//!
//! ```text
//! --17527-- warning: L3 cache found, using its data for the LL simulation.
//! --17527-- warning: specified LL cache: line_size 64  assoc 1  total_size 201,326,592
//! --17527-- warning: simulated LL cache: line_size 64  assoc 2  total_size 268,435,456
//! ```
//!
//! These `--PID--` lines come even with `-q` (Valgrind prints them with any
//! verbosity); with `-v` the configuration follows (`==PID== Cache
//! configuration used:` …). Cachegrind configures its caches in every run,
//! Callgrind only with the cache simulation.

use std::fmt;

use cgx_sim::cpuid::{Detection, Warning};
use cgx_sim::{CacheConfig, CacheLevel, CachesConfig, GeometryError};

use super::options::Options;
use super::summary::thousands;

/// A line printed at the start of a run, Valgrind style.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A debug message, `--PID-- text` (Valgrind's `VG_(dmsg)`).
    Debug(String),
    /// A user message, `==PID== text` (Valgrind's `VG_(umsg)`).
    User(String),
}

impl Message {
    /// The line for process `pid`, with its newline.
    pub fn render(&self, pid: i32) -> String {
        match self {
            Message::Debug(text) => format!("--{pid}-- {text}\n"),
            Message::User(text) => format!("=={pid}== {text}\n"),
        }
    }
}

/// The caches to simulate and what to print about them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSetup {
    /// I1, D1 and LL: detected (LL adjusted as Valgrind does), then the
    /// options over them.
    pub config: CachesConfig,
    /// Valgrind's warnings about the detection and, with `-v`, the
    /// configuration used.
    pub messages: Vec<Message>,
}

/// An auto-detected cache the simulator cannot handle and no option replaces
/// (Valgrind stops with an assertion there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedCache {
    level: CacheLevel,
    config: CacheConfig,
    reason: GeometryError,
}

impl fmt::Display for UnsupportedCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "auto-detected {level} cache configuration not supported: {reason} \
             ({size} B, {assoc}-way, {line} B lines); give one with --{level}=size,assoc,line_size",
            level = self.level,
            reason = self.reason,
            size = thousands(u64::from(self.config.size)),
            assoc = self.config.assoc,
            line = self.config.line_size,
        )
    }
}

impl std::error::Error for UnsupportedCache {}

/// Detects this machine's caches for a run with `options` (see
/// [`configure`]).
pub fn detect(options: &Options) -> Result<CacheSetup, UnsupportedCache> {
    configure(&cgx_sim::cpuid::detect(), options)
}

/// The caches for a run with `options` given what `detection` found, as
/// Valgrind's `VG_(post_clo_init_configure_caches)` makes them: the detection's
/// warnings (the one about using the defaults only when not all three caches
/// are given), the options over the detected caches, and the configuration
/// with `-v`.
pub fn configure(detection: &Detection, options: &Options) -> Result<CacheSetup, UnsupportedCache> {
    let all_given = options.i1.is_some() && options.d1.is_some() && options.ll.is_some();
    let mut messages = Vec::new();
    for warning in &detection.warnings {
        if *warning == Warning::UsingDefaults && all_given {
            continue;
        }
        messages.extend(warning_lines(warning).into_iter().map(Message::Debug));
    }
    let config = detection
        .with_overrides(options.i1, options.d1, options.ll)
        .map_err(|(level, reason)| UnsupportedCache {
            level,
            config: detection.config.get(level),
            reason,
        })?;
    if options.verbosity >= 2 {
        messages.push(Message::User("Cache configuration used:".to_string()));
        for level in [CacheLevel::I1, CacheLevel::D1, CacheLevel::LL] {
            let cache = config.get(level);
            messages.push(Message::User(format!(
                "  {level}: {} B, {}-way, {} B lines",
                thousands(u64::from(cache.size)),
                cache.assoc,
                cache.line_size
            )));
        }
    }
    // Callgrind then turns these off, saying so at any verbosity.
    if options.cacheuse && options.simulate_hwpref {
        messages.push(Message::Debug(
            "warning: prefetch simulation can not be used with cache usage".to_string(),
        ));
    }
    if options.cacheuse && options.simulate_wb {
        messages.push(Message::Debug(
            "warning: write-back simulation can not be used with cache usage".to_string(),
        ));
    }
    Ok(CacheSetup { config, messages })
}

/// Valgrind 3.19's words for a detection warning (`cg_arch.c`), without the
/// `--PID-- ` prefix; some take two lines.
pub fn warning_lines(warning: &Warning) -> Vec<String> {
    match warning {
        Warning::NoLastLevel => vec!["warning: L2 cache not installed, ignore LL results.".into()],
        Warning::LastLevelIs(level) => vec![format!(
            "warning: L{level} cache found, using its data for the LL simulation."
        )],
        Warning::TraceCache { kib, sim_kib } => vec![
            format!("warning: Pentium 4 with {kib} KB micro-op instruction trace cache"),
            format!("         Simulating a {sim_kib} KB I-cache with 32 B lines"),
        ],
        Warning::LlAdjusted {
            specified,
            simulated,
        } => [("specified", specified), ("simulated", simulated)]
            .into_iter()
            .map(|(which, cache)| {
                format!(
                    "warning: {which} LL cache: line_size {}  assoc {}  total_size {}",
                    cache.line_size,
                    cache.assoc,
                    thousands(u64::from(cache.size))
                )
            })
            .collect(),
        Warning::UsingDefaults => vec![
            "Warning: Cannot auto-detect cache config, using defaults.".into(),
            "         Run with -v to see.".into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    /// What this project's VMs detect (an L3 of 192 MiB, direct-mapped).
    fn vm_detection() -> Detection {
        let specified = CacheConfig::new(201_326_592, 1, 64);
        let simulated = CacheConfig::new(268_435_456, 2, 64);
        Detection {
            hw: Vec::new(),
            config: CachesConfig {
                i1: CacheConfig::new(32768, 8, 64),
                d1: CacheConfig::new(32768, 8, 64),
                ll: simulated,
            },
            detected: true,
            warnings: vec![
                Warning::LastLevelIs(3),
                Warning::LlAdjusted {
                    specified,
                    simulated,
                },
            ],
        }
    }

    fn options(text: &str) -> Options {
        let args: Vec<OsString> = text.split_whitespace().map(OsString::from).collect();
        super::super::options::parse(&args).unwrap()
    }

    fn rendered(setup: &CacheSetup, pid: i32) -> String {
        setup.messages.iter().map(|m| m.render(pid)).collect()
    }

    #[test]
    fn the_warnings_valgrind_prints_here() {
        // `valgrind --tool=cachegrind /bin/true` on this project's VMs.
        let setup = configure(&vm_detection(), &options("--tool=cachegrind p")).unwrap();
        assert_eq!(
            rendered(&setup, 17657),
            "--17657-- warning: L3 cache found, using its data for the LL simulation.\n\
             --17657-- warning: specified LL cache: line_size 64  assoc 1  total_size 201,326,592\n\
             --17657-- warning: simulated LL cache: line_size 64  assoc 2  total_size 268,435,456\n"
        );
        assert_eq!(setup.config, vm_detection().config);
        // -q does not silence them, as in Valgrind.
        let quiet = configure(&vm_detection(), &options("-q --tool=cachegrind p")).unwrap();
        assert_eq!(quiet.messages, setup.messages);
    }

    #[test]
    fn verbose_shows_the_configuration() {
        // `valgrind -v --tool=callgrind --cache-sim=yes ./exact`.
        let setup = configure(&vm_detection(), &options("-v --cache-sim=yes p")).unwrap();
        let text = rendered(&setup, 18480);
        assert!(
            text.ends_with(
                "==18480== Cache configuration used:\n\
                 ==18480==   I1: 32,768 B, 8-way, 64 B lines\n\
                 ==18480==   D1: 32,768 B, 8-way, 64 B lines\n\
                 ==18480==   LL: 268,435,456 B, 2-way, 64 B lines\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn cache_use_turns_write_back_and_prefetch_off_with_a_warning() {
        // `valgrind -v --tool=callgrind --cacheuse=yes --simulate-wb=yes
        // --simulate-hwpref=yes ./alias`: after the configuration.
        let both = "-v --cacheuse=yes --simulate-wb=yes --simulate-hwpref=yes p";
        let setup = configure(&vm_detection(), &options(both)).unwrap();
        let text = rendered(&setup, 30324);
        assert!(
            text.ends_with(
                "==30324==   LL: 268,435,456 B, 2-way, 64 B lines\n\
                 --30324-- warning: prefetch simulation can not be used with cache usage\n\
                 --30324-- warning: write-back simulation can not be used with cache usage\n"
            ),
            "{text}"
        );
        let quiet = "-q --cacheuse=yes --simulate-wb=yes p";
        let text = rendered(&configure(&vm_detection(), &options(quiet)).unwrap(), 1);
        assert!(text
            .ends_with("--1-- warning: write-back simulation can not be used with cache usage\n"));
        assert!(!text.contains("prefetch"));
        // Without cache use, nothing is said.
        let alone = "--simulate-wb=yes --simulate-hwpref=yes p";
        let text = rendered(&configure(&vm_detection(), &options(alone)).unwrap(), 1);
        assert!(!text.contains("cache usage"), "{text}");
    }

    #[test]
    fn options_replace_detected_caches() {
        let setup = configure(
            &vm_detection(),
            &options("--tool=cachegrind --D1=65536,2,64 --LL=1048576,16,64 p"),
        )
        .unwrap();
        assert_eq!(setup.config.i1, CacheConfig::new(32768, 8, 64));
        assert_eq!(setup.config.d1, CacheConfig::new(65536, 2, 64));
        assert_eq!(setup.config.ll, CacheConfig::new(1_048_576, 16, 64));
        // The detection's warnings stay (Valgrind adjusts the detected LL
        // before the options replace it).
        assert_eq!(setup.messages.len(), 3);
    }

    #[test]
    fn defaults_warning_unless_all_caches_are_given() {
        let failed = Detection {
            hw: Vec::new(),
            config: CachesConfig::DEFAULT,
            detected: false,
            warnings: vec![Warning::UsingDefaults],
        };
        let setup = configure(&failed, &options("--tool=cachegrind p")).unwrap();
        assert_eq!(
            rendered(&setup, 4591),
            "--4591-- Warning: Cannot auto-detect cache config, using defaults.\n\
             --4591--          Run with -v to see.\n"
        );
        assert_eq!(setup.config, CachesConfig::DEFAULT);
        let all = configure(
            &failed,
            &options("--tool=cachegrind --I1=32768,8,64 --D1=32768,8,64 --LL=262144,8,64 p"),
        )
        .unwrap();
        assert_eq!(all.messages, []);
    }

    #[test]
    fn other_warnings_in_valgrinds_words() {
        assert_eq!(
            warning_lines(&Warning::NoLastLevel),
            ["warning: L2 cache not installed, ignore LL results."]
        );
        assert_eq!(
            warning_lines(&Warning::TraceCache {
                kib: 12,
                sim_kib: 16
            }),
            [
                "warning: Pentium 4 with 12 KB micro-op instruction trace cache",
                "         Simulating a 16 KB I-cache with 32 B lines"
            ]
        );
    }

    #[test]
    fn an_unsupported_detected_cache_needs_an_option() {
        let mut odd = vm_detection();
        odd.config.d1 = CacheConfig::new(98304, 1, 96);
        let error = configure(&odd, &options("--cache-sim=yes p")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "auto-detected D1 cache configuration not supported: the line size is not a \
             power of two (98,304 B, 1-way, 96 B lines); give one with \
             --D1=size,assoc,line_size"
        );
        let setup = configure(&odd, &options("--D1=32768,8,64 p")).unwrap();
        assert_eq!(setup.config.d1, CacheConfig::new(32768, 8, 64));
    }
}
