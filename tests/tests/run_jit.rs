//! Programs that write code and run it: `rewrite.c` (it rewrites functions
//! in a writable and executable mapping in place, with no system call
//! between a rewrite and the next call, alone and in threads),
//! `jit_loops.c` (a loop of written blocks, rewritten between calls),
//! LuaJIT, PCRE2's JIT (`grep -P`) and node. Under cgx each prints what it
//! prints alone; the written programs' and LuaJIT's total Ir are within 1%
//! of Valgrind's (in Valgrind's environment, see `run_real_programs`), and
//! the self Ir of `jit_loops.c`'s written code and of the function it calls
//! equal Valgrind's.

use std::fs;
use std::path::Path;

use cgx_tests::run::{
    assert_status, build, native, run, run_with_env, self_ir, total_ir, Kind, Profiler, Run,
    VALGRINDS_ENVIRONMENT,
};

/// The largest difference of total Ir from Valgrind's allowed, in percent.
const TOLERANCE: f64 = 1.0;

/// Runs `program ARGS` alone, under Valgrind and under cgx (in Valgrind's
/// environment); asserts that both profiled runs print what the program
/// prints alone and exit 0, and, with `compare_ir`, that cgx's total Ir is
/// within [`TOLERANCE`] of Valgrind's. Returns Valgrind's run and cgx's.
fn same_as_natively(program: &Path, args: &[&str], compare_ir: bool, dir: &Path) -> (Run, Run) {
    let alone = native(program, args, dir);
    assert_status(&alone, 0);
    let valgrind = run(Profiler::Valgrind, &["-q"], program, args, dir);
    assert_status(&valgrind, 0);
    let cgx = run_with_env(
        Profiler::Cgx,
        &["-q"],
        VALGRINDS_ENVIRONMENT,
        program,
        args,
        dir,
    );
    assert_status(&cgx, 0);
    assert_eq!(cgx.stdout, alone.stdout, "{}: stdout", cgx.command);
    assert_eq!(
        valgrind.stdout, alone.stdout,
        "{}: stdout",
        valgrind.command
    );
    if compare_ir {
        let (expected, actual) = (total_ir(&valgrind.profile()), total_ir(&cgx.profile()));
        let off = 100.0 * (actual as f64 - expected as f64).abs() / expected as f64;
        println!(
            "{}: total Ir cgx {actual}, valgrind {expected} ({off:.3}% off)",
            cgx.command
        );
        assert!(
            off <= TOLERANCE,
            "{}: {off:.3}% off Valgrind's",
            cgx.command
        );
    }
    (valgrind, cgx)
}

#[test]
fn code_rewritten_in_place_runs_as_rewritten() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("rewrite.c", Kind::C, dir.path());
    same_as_natively(&program, &["0", "3000"], true, dir.path());
}

/// The self Ir of the code in no object (functions named by their
/// address) added up, and of `helper`.
fn written_code_and_helper_ir(profile: &cgx_formats::Profile) -> (u64, u64) {
    let ir = self_ir(profile);
    let written = ir
        .iter()
        .filter(|(name, _)| name.starts_with("0x"))
        .map(|(_, ir)| ir)
        .sum();
    (written, ir.get("helper").copied().unwrap_or(0))
}

#[test]
fn a_loop_of_written_blocks_rewritten_between_calls_costs_what_it_costs_under_valgrind() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("jit_loops.c", Kind::C, dir.path());
    let (valgrind, cgx) = same_as_natively(&program, &[], true, dir.path());
    let (written, helper) = written_code_and_helper_ir(&cgx.profile());
    // 300 calls of 40 iterations, each at least 11 instructions of the
    // written code and a call of the helper.
    assert!(written >= 300 * 40 * 11, "{}: written code", cgx.command);
    assert!(helper >= 300 * 40, "{}: helper", cgx.command);
    assert_eq!(
        (written, helper),
        written_code_and_helper_ir(&valgrind.profile()),
        "{}: the written code's and the helper's Ir",
        cgx.command
    );
}

#[test]
fn threads_rewriting_code_in_place_run_it_as_rewritten() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("rewrite.c", Kind::C, dir.path());
    same_as_natively(&program, &["3", "2000"], true, dir.path());
}

#[test]
fn luajit_computes_as_natively() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let script = dir.path().join("loops.lua");
    fs::write(
        &script,
        "local t, s = {}, 0\n\
         for i = 1, 300000 do\n\
           local x = (i * 7) % 1000\n\
           if x < 500 then s = s + x else s = s - (x % 13) end\n\
           t[(i % 100) + 1] = s\n\
         end\n\
         local function f(a) return a * 2 + 1 end\n\
         local acc = 0\n\
         for i = 1, 100000 do acc = acc + f(i % 17) end\n\
         print(s, acc, #t, string.format('%.3f', math.sqrt(acc)))\n",
    )
    .expect("the script is written");
    let script = script.to_string_lossy().into_owned();
    same_as_natively(Path::new("/usr/bin/luajit"), &[&script], true, dir.path());
}

#[test]
fn grep_with_pcre2_jit_finds_what_it_finds_natively() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = dir.path().join("lines.txt");
    let lines: String = (1..=20_000)
        .map(|n| format!("{n} foo{} bar {}\n", n % 7, n * 31 % 1000))
        .collect();
    fs::write(&input, lines).expect("the input is written");
    let input = input.to_string_lossy().into_owned();
    for pattern in [r"^(\d+)7 foo(?=\d bar)", r"(\d)\1", r"foo[0-3] bar 9\d\d$"] {
        let args = ["-nP", pattern, &input];
        same_as_natively(Path::new("/usr/bin/grep"), &args, false, dir.path());
    }
}

#[test]
fn node_computes_as_natively() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let script = dir.path().join("work.js");
    fs::write(
        &script,
        "let s = 0; const m = new Map();\n\
         for (let i = 0; i < 200000; i++) { s = (s + i * 7) % 1000003; m.set(i % 1000, s); }\n\
         const f = (a) => a.map((x) => x * 2).reduce((p, q) => p + q, 0);\n\
         const arr = Array.from({ length: 1000 }, (_, i) => i);\n\
         let t = 0; for (let i = 0; i < 500; i++) t += f(arr);\n\
         console.log(s, m.size, t, JSON.stringify({ a: [1, 2, 3] }));\n",
    )
    .expect("the script is written");
    let script = script.to_string_lossy().into_owned();
    same_as_natively(Path::new("/usr/bin/node"), &[&script], false, dir.path());
}
