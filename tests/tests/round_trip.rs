//! Acceptance 2: what cgx writes, cgx reads back as the same profile.
//!
//! For every profile Valgrind writes (and the specification's examples):
//! - read(write(p)) == p with the Callgrind writer in all four combinations of
//!   name and position compression;
//! - the same with the Cachegrind writer, for what that format holds: profiles
//!   read from Cachegrind files, and `to_cachegrind` of Callgrind profiles (which
//!   the Cachegrind writer refuses as they are);
//! - writing the profile read back gives the same bytes (the writers are
//!   deterministic);
//! - a `.gz` path gets gzip-compressed content that reads back the same.

use std::fs;
use std::io::Cursor;
use std::path::Path;
use std::process::Command;

use cgx_converters::to_cachegrind;
use cgx_formats::{read, read_path, write, write_path, CallgrindOptions, Error, Format, Profile};
use cgx_tests::compare::assert_same_profile;
use cgx_tests::valgrind::{Case, Tool};
use cgx_tests::{fixture, successful_output_of};

cgx_tests::test_each_valgrind_case!(check);

fn check(case: &Case) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for file in case.run(dir.path()) {
        let profile =
            read_path(&file).unwrap_or_else(|error| panic!("cgx cannot read it: {error}"));
        let cachegrind = match case.tool {
            Tool::Cachegrind => profile.clone(),
            Tool::Callgrind => {
                assert!(
                    write(&profile, Format::Cachegrind, &mut Vec::new()).is_err(),
                    "the Cachegrind writer must refuse a call graph"
                );
                to_cachegrind(&profile).expect("to_cachegrind")
            }
        };
        check_round_trips(
            &profile,
            &cachegrind,
            dir.path(),
            &file.display().to_string(),
        );
    }
}

/// The examples of the specification (sections 1.4 and 1.5).
#[test]
fn seed_examples_with_calls() {
    for name in [
        "seed-1.4-extended.out",
        "seed-1.5-compressed.out",
        "seed-1.5-compressed-upfront.out",
    ] {
        check_fixture(name);
    }
}

/// The examples of the specification (section 1.6: instruction addresses).
#[test]
fn seed_examples_with_subpositions() {
    for name in [
        "seed-1.6-subpositions.out",
        "seed-1.6-subpositions-compressed.out",
    ] {
        check_fixture(name);
    }
}

fn check_fixture(name: &str) {
    let profile =
        read_path(&fixture(name)).unwrap_or_else(|error| panic!("cgx cannot read {name}: {error}"));
    let cachegrind = to_cachegrind(&profile).expect("to_cachegrind");
    let dir = tempfile::tempdir().expect("a temporary folder");
    check_round_trips(&profile, &cachegrind, dir.path(), name);
}

/// All four combinations of Callgrind's compression options.
fn callgrind_formats() -> [Format; 4] {
    [(true, true), (true, false), (false, true), (false, false)].map(
        |(compress_strings, compress_positions)| {
            Format::Callgrind(CallgrindOptions {
                compress_strings,
                compress_positions,
            })
        },
    )
}

/// Round-trips `profile` through every Callgrind format and `cachegrind` (its
/// Cachegrind form) through the Cachegrind format, in memory and gzip-compressed
/// through files in `dir`.
fn check_round_trips(profile: &Profile, cachegrind: &Profile, dir: &Path, name: &str) {
    for format in callgrind_formats() {
        assert_round_trip(profile, format, name);
    }
    assert_round_trip(cachegrind, Format::Cachegrind, name);
    assert_gzip_round_trip(
        profile,
        Format::Callgrind(CallgrindOptions::default()),
        dir,
        name,
    );
    assert_gzip_round_trip(cachegrind, Format::Cachegrind, dir, name);
}

/// Writes `profile` to memory in `format`.
fn write_bytes(profile: &Profile, format: Format) -> Vec<u8> {
    let mut bytes = Vec::new();
    write(profile, format, &mut bytes).unwrap_or_else(|error| panic!("{format:?}: {error}"));
    bytes
}

/// Reads a profile written by cgx; on a syntax error shows the offending line.
fn read_bytes(bytes: &[u8], context: &str) -> Profile {
    read(Cursor::new(bytes.to_vec()), "written").unwrap_or_else(|error| {
        let line = match &error {
            Error::Syntax { line, .. } => String::from_utf8_lossy(bytes)
                .lines()
                .nth(*line as usize - 1)
                .unwrap_or("")
                .to_string(),
            _ => String::new(),
        };
        panic!("{context}: cgx cannot read what it wrote: {error}\n  {line}")
    })
}

/// Checks read(write(p)) == p, and that writing what was read gives the same bytes.
fn assert_round_trip(profile: &Profile, format: Format, name: &str) {
    let context = format!("{name} as {format:?}");
    let bytes = write_bytes(profile, format);
    let reread = read_bytes(&bytes, &context);
    assert_same_profile(profile, &reread, &context);
    assert!(
        write_bytes(&reread, format) == bytes,
        "{context}: writing the profile read back gives other bytes"
    );
}

/// Checks that `write_path` to a `.gz` path writes gzip data that decompresses to
/// what `write` writes and reads back as the same profile.
fn assert_gzip_round_trip(profile: &Profile, format: Format, dir: &Path, name: &str) {
    let context = format!("{name} as {format:?}, gzip-compressed");
    let path = dir.join("round-trip.out.gz");
    write_path(profile, format, &path).unwrap_or_else(|error| panic!("{context}: {error}"));
    let compressed = fs::read(&path).expect("the file written");
    assert!(compressed.starts_with(&[0x1f, 0x8b]), "{context}: not gzip");
    let decompressed = successful_output_of(Command::new("gzip").arg("-dc").arg(&path)).stdout;
    assert!(
        decompressed == write_bytes(profile, format),
        "{context}: the content differs from the uncompressed writer's"
    );
    let reread = read_path(&path).unwrap_or_else(|error| panic!("{context}: {error}"));
    assert_same_profile(profile, &reread, &context);
}
