//! Acceptance 4: bad input makes `cgx convert` fail cleanly, and the reader never
//! panics.
//!
//! - A malformed profile: exit code 1, exactly one line on stderr,
//!   `cgx: FILE:LINE: message`, with the line where the file goes wrong, nothing on
//!   stdout, and nothing written: no output file (nor a temporary one) appears, and
//!   an existing output file is left as it was.
//! - A missing input file: exit code 1 and a message naming the file.
//! - An unknown option: a non-zero exit and a message naming the option.
//! - Every truncation of valid files (cut at every 97th byte) reads as a profile
//!   or an error, never a panic; so do truncations of a gzip-compressed one.

use std::fs;
use std::io::Cursor;
use std::panic;
use std::path::Path;

use cgx_formats::{read, write_path, CallgrindOptions, Format};
use cgx_tests::cli::cgx;
use cgx_tests::fixture;
use cgx_tests::valgrind::{Case, CACHEGRIND_NO_SIM, CALLGRIND_COMBINED_DUMPS, CALLGRIND_DEFAULT};

/// A malformed profile, the line where it goes wrong and a word the message must
/// have.
struct Malformed {
    text: &'static str,
    line: u64,
    mentions: &'static str,
}

/// A count that is not a number.
#[test]
fn bad_count() {
    check_rejected(&Malformed {
        text: "# callgrind format\nevents: Ir\nfl=a.c\nfn=main\n16 12x\n",
        line: 5,
        mentions: "12x",
    });
}

/// A compressed name used before it is defined.
#[test]
fn undefined_compressed_id() {
    check_rejected(&Malformed {
        text: "# callgrind format\nevents: Ir\nfl=(1) a.c\nfn=(7)\n16 1\n",
        line: 4,
        mentions: "(7)",
    });
}

/// A cost line before the `events:` line.
#[test]
fn cost_line_before_events() {
    check_rejected(&Malformed {
        text: "# callgrind format\npositions: line\n16 20\nevents: Ir\n",
        line: 3,
        mentions: "events",
    });
}

/// A `calls=` line followed by another `fn=` instead of the call's position and
/// cost: the file goes wrong at the `fn=`.
#[test]
fn calls_without_position_line() {
    check_rejected(&Malformed {
        text: "# callgrind format\nevents: Ir\nfl=a.c\nfn=main\ncfn=f\ncalls=1 10\nfn=f\n10 5\n",
        line: 7,
        mentions: "calls=",
    });
}

/// A `calls=` line at the end of the file.
#[test]
fn calls_at_end_of_file() {
    check_rejected(&Malformed {
        text: "# callgrind format\nevents: Ir\nfl=a.c\nfn=main\n16 1\ncfn=f\ncalls=1 10\n",
        line: 7,
        mentions: "calls=",
    });
}

/// More counts than events.
#[test]
fn too_many_counts() {
    check_rejected(&Malformed {
        text: "# callgrind format\nevents: Ir Dr\nfl=a.c\nfn=main\n16 1 2 3\n",
        line: 5,
        mentions: "count",
    });
}

/// A Cachegrind `summary:` that is not the sum of the cost lines.
#[test]
fn cachegrind_summary_mismatch() {
    check_rejected(&Malformed {
        text: "desc: I1 cache: 32768 B, 64 B, 8-way associative\ncmd: ./prog\nevents: Ir\nfl=a.c\nfn=main\n16 20\n17 1\nsummary: 22\n",
        line: 8,
        mentions: "summary",
    });
}

/// Runs `cgx convert` on `malformed`, to a new output file and over an existing
/// one, and checks it fails as the module documentation says.
fn check_rejected(malformed: &Malformed) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = dir.path().join("malformed.out");
    fs::write(&input, malformed.text).expect("the input is written");
    let expected_start = format!("cgx: {}:{}: ", input.display(), malformed.line);
    let existing = dir.path().join("existing.out");
    fs::write(&existing, "precious\n").expect("the existing output is written");
    for output in [dir.path().join("new.out"), existing.clone()] {
        let stderr = expect_failure(&[
            "convert",
            path(&input),
            "-o",
            path(&output),
            "--to",
            "callgrind",
        ]);
        assert_eq!(
            stderr.lines().count(),
            1,
            "one line on stderr, not:\n{stderr}"
        );
        assert!(
            stderr.starts_with(&expected_start) && stderr.ends_with('\n'),
            "stderr is not '{expected_start}message':\n{stderr}"
        );
        let message = stderr[expected_start.len()..].trim();
        assert!(
            message.contains(malformed.mentions),
            "the message does not mention '{}': {message}",
            malformed.mentions
        );
    }
    assert_eq!(
        fs::read_to_string(&existing).expect("the existing output"),
        "precious\n",
        "the existing output was changed"
    );
    assert_eq!(
        file_names(dir.path()),
        ["existing.out", "malformed.out"],
        "cgx left files behind"
    );
}

/// A missing input: exit code 1, a message naming the file, nothing written.
#[test]
fn missing_input_file() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = dir.path().join("no-such-profile.out");
    let output = dir.path().join("converted.out");
    let stderr = expect_failure(&[
        "convert",
        path(&input),
        "-o",
        path(&output),
        "--to",
        "callgrind",
    ]);
    assert!(
        stderr.starts_with("cgx: ") && stderr.contains(path(&input)),
        "the message does not name {}:\n{stderr}",
        input.display()
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "one line on stderr, not:\n{stderr}"
    );
    assert!(file_names(dir.path()).is_empty(), "cgx wrote something");
}

/// An unknown option: a non-zero exit and a message naming the option.
#[test]
fn unknown_option() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = fixture("seed-1.6-subpositions.out");
    let output = dir.path().join("converted.out");
    let result = cgx([
        "convert",
        path(&input),
        "-o",
        path(&output),
        "--no-such-option",
    ]);
    assert!(!result.status.success(), "cgx accepted --no-such-option");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        stderr.contains("--no-such-option"),
        "the message does not name the option:\n{stderr}"
    );
    assert!(file_names(dir.path()).is_empty(), "cgx wrote something");
}

/// Runs cgx, checks it exits with 1 and prints nothing on stdout; returns stderr.
fn expect_failure(args: &[&str]) -> String {
    let result = cgx(args);
    let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
    assert_eq!(result.status.code(), Some(1), "cgx {args:?}:\n{stderr}");
    assert!(result.stdout.is_empty(), "cgx {args:?} printed on stdout");
    stderr
}

/// A path as a string (temporary folders have UTF-8 names).
fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The names of the files in `dir`, sorted.
fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("a readable folder")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Truncations of Callgrind's default profile.
#[test]
fn truncated_callgrind_profile() {
    check_truncations_of_case(&CALLGRIND_DEFAULT);
}

/// Truncations of a Callgrind profile of three parts.
#[test]
fn truncated_combined_dumps() {
    check_truncations_of_case(&CALLGRIND_COMBINED_DUMPS);
}

/// Truncations of a Cachegrind profile.
#[test]
fn truncated_cachegrind_profile() {
    check_truncations_of_case(&CACHEGRIND_NO_SIM);
}

/// Truncations of the specification's examples.
#[test]
fn truncated_seed_examples() {
    for name in [
        "seed-1.4-extended.out",
        "seed-1.5-compressed-upfront.out",
        "seed-1.6-subpositions-compressed.out",
    ] {
        let bytes = fs::read(fixture(name)).expect("a fixture");
        check_truncations(&bytes, 1, name);
    }
}

/// Truncations of a gzip-compressed profile (the decompressor sees a cut stream).
#[test]
fn truncated_gzip_profile() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CALLGRIND_DEFAULT.run(dir.path())[0];
    let profile = cgx_formats::read_path(file).expect("cgx reads Callgrind's profile");
    let compressed = dir.path().join("profile.out.gz");
    write_path(
        &profile,
        Format::Callgrind(CallgrindOptions::default()),
        &compressed,
    )
    .expect("the profile is written");
    let bytes = fs::read(&compressed).expect("the compressed profile");
    check_truncations(&bytes, 97, "a gzip-compressed profile");
}

fn check_truncations_of_case(case: &Case) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for file in case.run(dir.path()) {
        let bytes = fs::read(&file).expect("a profile");
        check_truncations(&bytes, 97, &file.display().to_string());
    }
}

/// Reads `bytes` cut at every `step`th byte (and whole); panics, naming the cut,
/// if the reader panics.
fn check_truncations(bytes: &[u8], step: usize, name: &str) {
    for cut in (0..bytes.len()).step_by(step).chain([bytes.len()]) {
        let truncated = bytes[..cut].to_vec();
        let result = panic::catch_unwind(|| read(Cursor::new(truncated), "truncated").is_ok());
        assert!(
            result.is_ok(),
            "the reader panics on {name} cut at byte {cut}"
        );
    }
}
