//! KCachegrind loads what cgx writes without a single loader complaint.
//!
//! Valgrind's Callgrind files of several kinds are converted by `cgx convert`, with
//! each combination of name and position compression, and loaded together in one
//! headless KCachegrind (one start takes 30 s, since it never exits by itself).
//! A malformed file goes last as a control: its complaints
//! show that KCachegrind did load and report (so silence about the others means
//! something). Without KCachegrind (`apt-get install kcachegrind dbus`) the test is
//! skipped with a message, unless the environment variable CI is set: then it fails.

use std::env;
use std::fs;

use cgx_tests::cli::convert;
use cgx_tests::clients::kcachegrind_complaints;
use cgx_tests::valgrind;

#[test]
fn kcachegrind_loads_cgx_output_without_complaints() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let cases = [
        &valgrind::CALLGRIND_DEFAULT,
        &valgrind::CALLGRIND_INSTR_JUMPS,
        &valgrind::CALLGRIND_SIMULATORS,
        &valgrind::CALLGRIND_COMBINED_DUMPS,
        &valgrind::CACHEGRIND_SIMULATORS,
    ];
    let mut written = Vec::new();
    for (index, case) in cases.into_iter().enumerate() {
        let case_dir = dir.path().join(format!("case{index}"));
        fs::create_dir(&case_dir).expect("a folder in the temporary folder");
        for file in case.run(&case_dir) {
            for strings in ["yes", "no"] {
                for positions in ["yes", "no"] {
                    let name = format!(
                        "case{index}-{}-{strings}-{positions}.callgrind",
                        file.file_name().unwrap_or_default().to_string_lossy()
                    );
                    let output = dir.path().join(name);
                    convert(
                        &file,
                        &output,
                        &[
                            "--to",
                            "callgrind",
                            &format!("--compress-strings={strings}"),
                            &format!("--compress-pos={positions}"),
                        ],
                    );
                    written.push(output);
                }
            }
        }
    }
    let control = dir.path().join("control.callgrind");
    fs::write(&control, "# callgrind format\nevents: Ir\nfn=(3)\n1 2\n")
        .expect("the control file is written");
    written.push(control);

    let Some(complaints) = kcachegrind_complaints(&written, 30) else {
        assert!(
            env::var_os("CI").is_none(),
            "KCachegrind is not installed (apt-get install kcachegrind dbus), and CI is set"
        );
        eprintln!("skipped: KCachegrind is not installed (apt-get install kcachegrind dbus)");
        return;
    };
    // KCachegrind loads several files into one profile, and says "Redefined
    // command" when their cmd: lines differ (they name different test folders).
    let (control_complaints, others): (Vec<_>, Vec<_>) = complaints
        .iter()
        .filter(|line| !line.contains("Redefined command"))
        .partition(|line| line.contains("control.callgrind"));
    assert!(
        !control_complaints.is_empty(),
        "KCachegrind said nothing about the malformed control file; did it load anything?"
    );
    assert!(
        others.is_empty(),
        "KCachegrind complains about cgx's output:\n{}",
        others
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
