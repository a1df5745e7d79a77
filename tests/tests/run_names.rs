//! `cgx run` names a function's source file as Valgrind 3.19 does: the
//! unit's directory, the directory the line table gives the file and the
//! file's name. The case where they differed: a DWARF 5 unit built with a
//! relative compilation directory (`-fdebug-prefix-map`, as Debian builds
//! glibc) whose main file is in directory 0 of its line table, which then
//! also holds that relative directory: Valgrind joins the two
//! (`./sub/./sub/m.c`, glibc's `./elf/./elf/dl-lookup.c`). The same program
//! built with DWARF 4, and with an absolute directory, for the other rule.
//!
//! Debug information in a separate file is read where Valgrind finds
//! it: named by `.gnu_debuglink` in `.debug/` beside the program, under
//! the program's "usrmerge" folder and under `--extra-debuginfo-path`;
//! with `--allow-mismatched-debuginfo=yes` a copy of the program under
//! that folder.
//!
//! C++ names are demangled as Valgrind demangles them (GNU libiberty's
//! demangler): `names.cc` has a function with an empty parameter pack and
//! one taking a reference to a nested class, which `cpp_demangle` renders
//! otherwise.
//!
//! And the options that name functions as Valgrind's core does:
//! `--demangle=no` leaves a C++ program's names mangled, and
//! `--show-below-main=yes` names the functions that call `main` (`_start`,
//! glibc's `__libc_start_call_main`) rather than `(below main)`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cgx_formats::Profile;
use cgx_tests::run::{build as build_test_program, read, run, Kind, Profiler};
use cgx_tests::successful_output_of;

/// A function in a header and one in the main file, each running a loop.
const HEADER: &str = "static inline int square_sum(int x) {
    int r = 0;
    for (int i = 0; i < x; i++) r += i * x;
    return r;
}
";
const MAIN: &str = "#include \"../include/sum.h\"
__attribute__((noinline)) int sums(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += square_sum(i & 15);
    return s;
}
int main(void) { return sums(100) == 0; }
";

/// Builds `sub/main.c` in `dir` from `dir/sub` with `flags`, into `name`.
fn build(dir: &Path, name: &str, flags: &[&str]) -> std::path::PathBuf {
    let sub = dir.join("sub");
    fs::create_dir_all(&sub).expect("a source folder");
    fs::create_dir_all(dir.join("include")).expect("a header folder");
    fs::write(dir.join("include/sum.h"), HEADER).expect("the header");
    fs::write(sub.join("main.c"), MAIN).expect("the source");
    let executable = dir.join(name);
    successful_output_of(
        Command::new("gcc")
            .current_dir(&sub)
            .args(["-O1", "-g"])
            .args(flags)
            .arg("main.c")
            .arg("-o")
            .arg(&executable),
    );
    executable
}

/// The file names (`fl=`, `fi=`, `fe=`, and `cfi=`/`cfl=` of calls: one
/// table of compressed names) of a Callgrind profile that name the
/// program's own sources.
fn own_files(profile: &Path) -> BTreeSet<String> {
    let text = fs::read_to_string(profile).expect("a profile");
    let mut names = std::collections::BTreeMap::new();
    let mut files = BTreeSet::new();
    for line in text.lines() {
        let Some(spec) = ["fl=", "fi=", "fe=", "cfi=", "cfl="]
            .iter()
            .find_map(|key| line.strip_prefix(key))
        else {
            continue;
        };
        let name = match spec.strip_prefix('(') {
            Some(rest) => {
                let (id, name) = rest.split_once(')').expect("a compressed name");
                match name.strip_prefix(' ') {
                    Some(name) => {
                        names.insert(id.to_string(), name.to_string());
                        name.to_string()
                    }
                    None => names.get(id).expect("a name given before").clone(),
                }
            }
            None => spec.to_string(),
        };
        if name.ends_with("main.c") || name.ends_with("sum.h") {
            files.insert(name);
        }
    }
    files
}

/// The source files of `program`'s functions under Valgrind and cgx, run
/// with `options`.
fn files_of(program: &Path, options: &[&str], dir: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let valgrind = run(Profiler::Valgrind, options, program, &[], dir);
    let cgx = run(Profiler::Cgx, options, program, &[], dir);
    (own_files(&valgrind.files[0]), own_files(&cgx.files[0]))
}

/// The program built with DWARF `version` and a relative compilation
/// directory: Valgrind names its files `expected`, and cgx as Valgrind.
fn relative_directory_gives(version: &str, expected: [&str; 2]) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let map = format!(
        "-fdebug-prefix-map={}=./sub",
        dir.path().join("sub").display()
    );
    let dwarf = format!("-gdwarf-{version}");
    let program = build(dir.path(), &format!("relative{version}"), &[&dwarf, &map]);
    let (valgrind, cgx) = files_of(&program, &[], dir.path());
    let expected: BTreeSet<String> = expected.map(String::from).into();
    assert_eq!(valgrind, expected, "the test's premise: Valgrind's names");
    assert_eq!(cgx, valgrind);
}

#[test]
fn dwarf_5_with_a_relative_directory_joins_directory_0_to_it() {
    relative_directory_gives("5", ["./sub/./sub/main.c", "./sub/../include/sum.h"]);
}

#[test]
fn dwarf_4_with_a_relative_directory_takes_directory_0_as_it() {
    relative_directory_gives("4", ["./sub/main.c", "./sub/../include/sum.h"]);
}

/// `program`, built in `dir` with its absolute directory, has Valgrind's
/// names run with `options`, and cgx the same.
fn gives_absolute_names(program: &Path, options: &[&str], dir: &Path) {
    let (valgrind, cgx) = files_of(program, options, dir);
    let sub = dir.join("sub");
    let expected: BTreeSet<String> = [
        format!("{}/main.c", sub.display()),
        format!("{}/../include/sum.h", sub.display()),
    ]
    .into();
    assert_eq!(valgrind, expected, "the test's premise: Valgrind's names");
    assert_eq!(cgx, valgrind);
}

#[test]
fn an_absolute_directory_gives_absolute_names() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "absolute5", &["-gdwarf-5"]);
    gives_absolute_names(&program, &[], dir.path());
}

#[test]
fn debug_information_in_the_file_gnu_debuglink_names_is_read() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "linked", &["-gdwarf-5"]);
    // Its DWARF moved to `.debug/linked.debug`, which the program names.
    let debug = dir.path().join(".debug");
    fs::create_dir_all(&debug).expect("a .debug folder");
    let objcopy = |args: &[&str]| {
        successful_output_of(Command::new("objcopy").current_dir(dir.path()).args(args));
    };
    objcopy(&["--only-keep-debug", "linked", "linked.debug"]);
    objcopy(&[
        "--strip-debug",
        "--add-gnu-debuglink=linked.debug",
        "linked",
    ]);
    fs::rename(dir.path().join("linked.debug"), debug.join("linked.debug"))
        .expect("the debug file moved");
    gives_absolute_names(&program, &[], dir.path());
}

/// Builds the program `name` in `dir` and moves its DWARF out into a
/// file: named `name.debug` by its `.gnu_debuglink` when `linked`, else
/// a copy of the whole program with no build id nor link left in it.
/// Returns the program and the file, still in `dir`.
fn with_its_dwarf_apart(dir: &Path, name: &str, linked: bool) -> (PathBuf, PathBuf) {
    let program = build(dir, name, &["-gdwarf-5"]);
    let objcopy = |args: &[&str]| {
        successful_output_of(Command::new("objcopy").current_dir(dir).args(args));
    };
    let debug = format!("{name}.debug");
    objcopy(&["--only-keep-debug", name, &debug]);
    let link = format!("--add-gnu-debuglink={debug}");
    match linked {
        true => objcopy(&["--strip-debug", &link, name]),
        false => objcopy(&["--strip-debug", "--remove-section=.note.gnu.build-id", name]),
    }
    (program, dir.join(debug))
}

/// Moves `file` to `to`, making its folder.
fn move_to(file: &Path, to: &Path) {
    fs::create_dir_all(to.parent().expect("a folder")).expect("the folder made");
    fs::rename(file, to).expect("the file moved");
}

#[test]
fn a_debug_link_is_followed_under_extra_debuginfo_path() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (program, debug) = with_its_dwarf_apart(dir.path(), "extra", true);
    // EXTRA + the program's folder + "/" + the linked name.
    let extra = dir.path().join("extra-debug");
    let folder = dir.path().to_string_lossy().into_owned();
    move_to(
        &debug,
        &PathBuf::from(format!("{}{folder}/extra.debug", extra.display())),
    );
    let (valgrind, cgx) = files_of(&program, &[], &dir.path().join("without"));
    assert!(
        valgrind.is_empty() && cgx.is_empty(),
        "{valgrind:?} {cgx:?}"
    );
    let option = format!("--extra-debuginfo-path={}", extra.display());
    gives_absolute_names(&program, &[&option], dir.path());
}

#[test]
fn a_debug_link_is_followed_to_the_usrmerge_folder() {
    // Valgrind's other folder of an object: what follows the first "usr"
    // in its folder's name, here relative to the profiler's folder.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let usrx = dir.path().join("usrx");
    fs::create_dir_all(&usrx).expect("a folder");
    let (program, debug) = with_its_dwarf_apart(&usrx, "merged", true);
    let folder = usrx.to_string_lossy().into_owned();
    let merged = &folder[folder.find("usr").expect("usr in the name") + 3..];
    for profiler in ["valgrind", "cgx"] {
        let to = dir
            .path()
            .join(profiler)
            .join(format!("{merged}/merged.debug"));
        fs::create_dir_all(to.parent().expect("a folder")).expect("the folder made");
        fs::copy(&debug, &to).expect("the debug file copied");
    }
    fs::remove_file(&debug).expect("the debug file moved");
    let (valgrind, cgx) = files_of(&program, &[], dir.path());
    let source = format!("{}/sub/main.c", usrx.display());
    assert!(
        valgrind.contains(&source),
        "the test's premise: {valgrind:?}"
    );
    assert_eq!(cgx, valgrind);
}

#[test]
fn allow_mismatched_debuginfo_takes_the_extra_folder_s_copy_unchecked() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (program, debug) = with_its_dwarf_apart(dir.path(), "mismatched", false);
    // EXTRA + "/" + the program's path.
    let extra = dir.path().join("extra-debug");
    let path = program.to_string_lossy().into_owned();
    move_to(
        &debug,
        &PathBuf::from(format!("{}/{path}", extra.display())),
    );
    let option = format!("--extra-debuginfo-path={}", extra.display());
    let (valgrind, cgx) = files_of(&program, &[&option], &dir.path().join("without"));
    assert!(
        valgrind.is_empty() && cgx.is_empty(),
        "{valgrind:?} {cgx:?}"
    );
    gives_absolute_names(
        &program,
        &[&option, "--allow-mismatched-debuginfo=yes"],
        dir.path(),
    );
}

/// The names of `profile`'s functions that `keep` says to compare.
fn function_names(profile: &Profile, keep: impl Fn(&str, &str) -> bool) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for part in &profile.parts {
        for (function, _) in part.functions() {
            let object = profile.names.get(function.object);
            let name = profile.names.get(function.name);
            if keep(object, name) {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// The names `keep` selects in Valgrind's profile and in cgx's, of
/// `program` run with `options`.
fn names_of(
    program: &Path,
    options: &[&str],
    dir: &Path,
    keep: impl Fn(&str, &str) -> bool,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let valgrind = run(Profiler::Valgrind, options, program, &[], dir);
    let cgx = run(Profiler::Cgx, options, program, &[], dir);
    (
        function_names(&read(&valgrind.files[0]), &keep),
        function_names(&read(&cgx.files[0]), &keep),
    )
}

/// The names of the functions in the C++ program `source` (built into
/// `dir`) in Valgrind's profile and in cgx's, run with each of `options`.
fn own_names_of(source: &str, options: &[&[&str]], dir: &Path) -> Vec<[BTreeSet<String>; 2]> {
    let program = build_test_program(source, Kind::Cxx, dir);
    let path = program.to_string_lossy().into_owned();
    let own = |object: &str, _: &str| object == path;
    (options.iter().enumerate())
        .map(|(index, options)| {
            let (valgrind, cgx) = names_of(&program, options, &dir.join(index.to_string()), own);
            [valgrind, cgx]
        })
        .collect()
}

#[test]
fn demangle_no_leaves_the_names_mangled() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let runs = own_names_of("exceptions.cc", &[&["--demangle=no"], &[]], dir.path());
    let [valgrind, cgx] = &runs[0];
    assert!(
        valgrind.iter().any(|name| name.starts_with("_Z")),
        "the test's premise: mangled names in Valgrind's profile: {valgrind:?}"
    );
    assert_eq!(cgx, valgrind);
    let [_, demangled] = &runs[1];
    assert!(
        !demangled.iter().any(|name| name.starts_with("_Z")),
        "by default names are demangled: {demangled:?}"
    );
}

#[test]
fn cpp_names_are_demangled_as_valgrind_demangles_them() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let runs = own_names_of("names.cc", &[&[]], dir.path());
    let [valgrind, cgx] = &runs[0];
    assert!(
        valgrind.contains("int count_args<int>(int)")
            && valgrind
                .iter()
                .any(|name| name.contains("find(outer::Type const*, outer::Type::Result&)")),
        "the test's premise: Valgrind's names {valgrind:?}"
    );
    assert_eq!(cgx, valgrind);
}

#[test]
fn show_below_main_names_the_functions_below_main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build_test_program("hello.c", Kind::C, dir.path());
    let below = |_: &str, name: &str| {
        name == "(below main)" || name == "_start" || name.starts_with("__libc_start_call_main")
    };
    let (valgrind, cgx) = names_of(&program, &["--show-below-main=yes"], dir.path(), below);
    assert!(
        valgrind.contains("_start") && !valgrind.contains("(below main)"),
        "the test's premise: {valgrind:?}"
    );
    assert_eq!(cgx, valgrind);
    let (_, default) = names_of(&program, &[], &dir.path().join("default"), below);
    assert_eq!(default, BTreeSet::from(["(below main)".to_string()]));
}
