//! Symbolization against gcc-built programs, checked with binutils' `nm` and
//! `addr2line`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cgx_engine::symbols::{Mapping, SectionKind, Symbols, SymbolsError};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Object, ObjectSection};

fn gcc(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed for {name}");
    out
}

/// `nm` value (file address) and size of a symbol.
fn nm(prog: &Path, sym: &str) -> (u64, u64) {
    let out = Command::new("nm").arg("-S").arg(prog).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 4 && f[3] == sym {
            return (
                u64::from_str_radix(f[0], 16).unwrap(),
                u64::from_str_radix(f[1], 16).unwrap(),
            );
        }
    }
    panic!("{sym} not in nm output");
}

/// `addr2line -a -f -i`: per address, the frames (function, "file", line),
/// innermost first.
fn addr2line(prog: &Path, addrs: &[u64]) -> Vec<Vec<(String, String, u32)>> {
    let out = Command::new("addr2line")
        .args(["-a", "-f", "-i", "-e"])
        .arg(prog)
        .args(addrs.iter().map(|a| format!("{a:#x}")))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut res: Vec<Vec<(String, String, u32)>> = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.starts_with("0x") {
            res.push(Vec::new());
            continue;
        }
        let pos = lines.next().unwrap();
        let pos = pos.split(" (discriminator").next().unwrap();
        let (file, line) = pos.rsplit_once(':').unwrap();
        res.last_mut()
            .unwrap()
            .push((l.to_owned(), file.to_owned(), line.parse().unwrap_or(0)));
    }
    res
}

/// Executable mappings as the kernel would make them, loaded with `bias`.
fn synthetic_maps(prog: &Path, bias: u64) -> Vec<Mapping> {
    let data = std::fs::read(prog).unwrap();
    let hdr = object::elf::FileHeader64::<object::Endianness>::parse(&*data).unwrap();
    let e = hdr.endian().unwrap();
    hdr.program_headers(e, &*data)
        .unwrap()
        .iter()
        .filter(|p| p.p_type(e) == object::elf::PT_LOAD && p.p_flags(e) & object::elf::PF_X != 0)
        .map(|p| Mapping {
            start: (p.p_vaddr(e) & !0xfff) + bias,
            end: ((p.p_vaddr(e) + p.p_memsz(e) + 0xfff) & !0xfff) + bias,
            perms: "r-xp".into(),
            offset: p.p_offset(e) & !0xfff,
            dev: (0, 0),
            inode: 1,
            path: prog.to_str().unwrap().to_owned(),
        })
        .collect()
}

/// Checks function, start, file and line of `file_addr + bias` against binutils.
fn check(syms: &Symbols, prog: &Path, name: &str, bias: u64) {
    let (addr, size) = nm(prog, name);
    for probe in [addr, addr + size / 2] {
        let loc = syms.lookup(probe + bias);
        assert_eq!(&*loc.object, prog.to_str().unwrap());
        let f = loc.function.clone().expect("function");
        assert_eq!(&*f.name, name);
        assert_eq!(f.start, addr + bias);
        let frames = addr2line(prog, &[probe]);
        let (_, file, line) = &frames[0][0];
        assert_eq!(loc.file_name(), file, "{name}+{:#x}", probe - addr);
        assert_eq!(loc.line, *line, "{name}+{:#x}", probe - addr);
    }
    assert!(syms.is_function_start(addr + bias));
    assert!(!syms.is_function_start(addr + bias + 1));
}

const STATIC_SRC: &str = r#"int counter;
int add(int a, int b) {
    return a + b;
}
static int twice(int x) {
    return add(x, x);
}
void _start(void) {
    counter = twice(21);
    for (;;)
        __asm__ volatile("mov $60, %%eax; xor %%edi, %%edi; syscall" ::: "rax", "rdi");
}
"#;

#[test]
fn static_nostdlib_binary() {
    let dir = tempfile::tempdir().unwrap();
    let prog = gcc(
        dir.path(),
        "stat",
        STATIC_SRC,
        &["-g", "-O0", "-static", "-nostdlib", "-fno-stack-protector"],
    );
    let mut syms = Symbols::new();
    let problems = syms.set_mappings(&synthetic_maps(&prog, 0));
    assert!(problems.is_empty(), "{problems:?}");
    for f in ["add", "twice", "_start"] {
        check(&syms, &prog, f, 0);
    }
    let out = syms.lookup(0x10);
    assert_eq!(&*out.object, "???");
    assert_eq!(out.function_name(), "???");
}

#[test]
fn objects_parsed_ahead_resolve_as_others() {
    let dir = tempfile::tempdir().unwrap();
    let prog = gcc(
        dir.path(),
        "ahead",
        STATIC_SRC,
        &["-g", "-O0", "-static", "-nostdlib", "-fno-stack-protector"],
    );
    cgx_engine::symbols::prefetch(prog.to_str().unwrap());
    // Asked twice: parsed once, taken once.
    cgx_engine::symbols::prefetch(prog.to_str().unwrap());
    for _ in 0..2 {
        let mut syms = Symbols::new();
        let problems = syms.set_mappings(&synthetic_maps(&prog, 0));
        assert!(problems.is_empty(), "{problems:?}");
        for f in ["add", "twice", "_start"] {
            check(&syms, &prog, f, 0);
        }
    }
}

#[test]
fn zlib_compressed_debug_sections() {
    let dir = tempfile::tempdir().unwrap();
    let prog = gcc(
        dir.path(),
        "zlib",
        STATIC_SRC,
        &[
            "-g",
            "-gz=zlib",
            "-O0",
            "-static",
            "-nostdlib",
            "-fno-stack-protector",
        ],
    );
    let data = std::fs::read(&prog).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let info = file.section_by_name(".debug_info").unwrap();
    assert_eq!(
        info.compressed_data().unwrap().format,
        object::CompressionFormat::Zlib,
        "gcc -gz=zlib left .debug_info uncompressed"
    );
    let mut syms = Symbols::new();
    let problems = syms.set_mappings(&synthetic_maps(&prog, 0));
    assert!(problems.is_empty(), "{problems:?}");
    for f in ["add", "twice", "_start"] {
        check(&syms, &prog, f, 0);
    }
}

const PIE_SRC: &str = r#"#include <signal.h>
#include <stdio.h>
int work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i;
    return s;
}
int main(void) {
    printf("%p %p\n", (void *)&work, (void *)&puts);
    fflush(stdout);
    raise(SIGSTOP);
    return work(3);
}
"#;

#[test]
fn live_pie_process_and_libc() {
    let dir = tempfile::tempdir().unwrap();
    let prog = gcc(dir.path(), "pie", PIE_SRC, &["-g", "-O0", "-fPIE", "-pie"]);
    let mut child = Command::new(&prog).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addrs: Vec<u64> = line
        .split_whitespace()
        .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap())
        .collect();
    let mut syms = Symbols::new();
    let problems = syms.refresh(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    let problems = problems.unwrap();
    assert!(problems.is_empty(), "{problems:?}");

    let (work_addr, _) = nm(&prog, "work");
    let bias = addrs[0] - work_addr;
    assert_ne!(bias, 0, "PIE loaded at its file address?");
    check(&syms, &prog, "work", bias);
    check(&syms, &prog, "main", bias);

    let puts = syms.lookup(addrs[1]);
    assert!(puts.object.contains("libc"), "{}", puts.object);
    let f = puts.function.expect("libc function");
    assert!(f.name.contains("puts"), "{}", f.name);
    assert_eq!(f.start, addrs[1]);
}

const INLINE_SRC: &str = r#"static inline __attribute__((always_inline)) int helper(int x) {
    int s = 0;
    for (int i = 0; i < x; i++)
        s += (i * x) ^ (s >> 3);
    return s;
}
__attribute__((noinline)) int outer(int x) {
    return helper(x) + 1;
}
int main(int argc, char **argv) {
    (void)argv;
    return outer(argc);
}
"#;

#[test]
fn inlined_code_has_its_symbols_function_and_the_inlined_line() {
    let dir = tempfile::tempdir().unwrap();
    let prog = gcc(
        dir.path(),
        "inl",
        INLINE_SRC,
        &["-g", "-O2", "-fPIE", "-pie"],
    );
    let bias = 0x5555_5555_4000;
    let mut syms = Symbols::new();
    assert!(syms.set_mappings(&synthetic_maps(&prog, bias)).is_empty());
    let (start, size) = nm(&prog, "outer");
    let addrs: Vec<u64> = (start..start + size).collect();
    let frames = addr2line(&prog, &addrs);
    let mut checked = 0;
    for (addr, fr) in addrs.iter().zip(&frames) {
        if fr.len() != 2 || fr[0].0 != "helper" {
            continue;
        }
        let loc = syms.lookup(addr + bias);
        assert_eq!(loc.function_name(), "outer");
        assert_eq!(loc.function.as_ref().unwrap().start, start + bias);
        assert_eq!((loc.file_name(), loc.line), (&*fr[0].1, fr[0].2));
        checked += 1;
    }
    assert!(checked > 0, "no inlined address found in outer: {frames:?}");
}

#[test]
fn unreadable_objects_are_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("not-elf");
    std::fs::write(&text, "hello").unwrap();
    let map = |start: u64, path: &Path| Mapping {
        start,
        end: start + 0x1000,
        perms: "r-xp".into(),
        offset: 0,
        dev: (0, 0),
        inode: 1,
        path: path.to_str().unwrap().to_owned(),
    };
    let maps = [map(0x1000, &text), map(0x3000, &dir.path().join("missing"))];
    let mut syms = Symbols::new();
    let problems = syms.set_mappings(&maps);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(matches!(problems[0], SymbolsError::Elf { .. }));
    assert!(matches!(problems[1], SymbolsError::Io { .. }));
    let loc = syms.lookup(0x1800);
    assert_eq!(&*loc.object, text.to_str().unwrap());
    assert_eq!(
        (loc.function_name(), loc.file_name(), loc.line),
        ("???", "???", 0)
    );
    // Cached failures are not reported twice.
    assert!(syms.set_mappings(&maps).is_empty());
}

#[test]
fn cxx_names_are_demangled_when_looked_up() {
    let dir = tempfile::tempdir().unwrap();
    // `-x c++`: the source is C++ whatever its name; no C++ runtime is
    // linked (-nostdlib).
    let prog = gcc(
        dir.path(),
        "names",
        "namespace ns { int twice(int x) { return 2 * x; } }\n\
         extern \"C\" void _start(void) {\n\
             ns::twice(21);\n\
             for (;;) __asm__ volatile(\"mov $60, %%eax; xor %%edi, %%edi; syscall\" ::: \"rax\", \"rdi\");\n\
         }\n",
        &["-x", "c++", "-g", "-O0", "-static", "-nostdlib", "-fno-exceptions"],
    );
    let mut syms = Symbols::new();
    assert!(syms.set_mappings(&synthetic_maps(&prog, 0)).is_empty());
    let (twice, size) = nm(&prog, "_ZN2ns5twiceEi");
    for probe in [twice, twice + size / 2, twice] {
        assert_eq!(syms.lookup(probe).function_name(), "ns::twice(int)");
    }
    let (start, _) = nm(&prog, "_start");
    assert_eq!(syms.lookup(start).function_name(), "_start");
    // As Valgrind's --demangle=no: the symbol table's names.
    syms.keep_mangled_names(true);
    assert_eq!(syms.lookup(twice).function_name(), "_ZN2ns5twiceEi");
    assert_eq!(
        syms.function(twice + 1).map(|f| f.name.to_string()),
        Some("_ZN2ns5twiceEi".to_string())
    );
}

#[test]
fn a_debug_file_named_by_gnu_debuglink_is_read_when_its_checksum_matches() {
    let dir = tempfile::tempdir().unwrap();
    let prog = gcc(
        dir.path(),
        "linked",
        STATIC_SRC,
        &["-g", "-O0", "-static", "-nostdlib", "-fno-stack-protector"],
    );
    let (add, _) = nm(&prog, "add");
    let expected = addr2line(&prog, &[add]);
    let objcopy = |args: &[&str]| {
        let status = Command::new("objcopy")
            .current_dir(dir.path())
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "objcopy {args:?}");
    };
    objcopy(&["--only-keep-debug", "linked", "linked.debug"]);
    objcopy(&[
        "--strip-debug",
        "--add-gnu-debuglink=linked.debug",
        "linked",
    ]);
    let lookup = || {
        let mut syms = Symbols::new();
        assert!(syms.set_mappings(&synthetic_maps(&prog, 0)).is_empty());
        let location = syms.lookup(add);
        (location.file_name().to_string(), location.line)
    };
    let (_, file, line) = &expected[0][0];
    assert_eq!(lookup(), (file.clone(), *line), "beside the program");
    // Another file under that name: its checksum is not the link's.
    let debug = dir.path().join("linked.debug");
    let mut bytes = std::fs::read(&debug).unwrap();
    bytes.push(0);
    std::fs::write(&debug, bytes).unwrap();
    assert_eq!(lookup(), ("???".to_string(), 0), "a changed debug file");
}

#[test]
fn a_function_symbol_of_size_0_names_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // An assembly function without `.size` (as gcc's `frame_dummy`), global
    // and local, after one with its size.
    let prog = gcc(
        dir.path(),
        "unsized",
        "__asm__(\".text\\n.globl sized\\n.type sized,@function\\nsized:\\n ret\\n.size sized,.-sized\\n\"\n\
                 \".globl bare\\n.type bare,@function\\nbare:\\n nop\\n ret\\n\"\n\
                 \".type local_bare,@function\\nlocal_bare:\\n nop\\n ret\\n\");\n\
         void sized(void); void bare(void); void local_bare(void);\n\
         void _start(void) {\n\
             sized(); bare(); local_bare();\n\
             for (;;) __asm__ volatile(\"mov $60, %%eax; xor %%edi, %%edi; syscall\" ::: \"rax\", \"rdi\");\n\
         }\n",
        &["-g", "-O0", "-static", "-nostdlib", "-fno-stack-protector"],
    );
    let mut syms = Symbols::new();
    assert!(syms.set_mappings(&synthetic_maps(&prog, 0)).is_empty());
    let (sized, size) = nm(&prog, "sized");
    assert_eq!(size, 1, "the test's premise: `sized` has its size");
    assert_eq!(syms.lookup(sized).function_name(), "sized");
    let out = Command::new("nm").arg("-S").arg(&prog).output().unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    for name in ["bare", "local_bare"] {
        // `nm -S` gives no size for them: address, type, name.
        let at = listing
            .lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .find(|fields| fields.len() == 3 && fields[2] == name)
            .map(|fields| u64::from_str_radix(fields[0], 16).unwrap())
            .unwrap_or_else(|| panic!("the test's premise: {name} without a size"));
        assert_eq!(syms.lookup(at).function_name(), "???", "{name}");
        assert!(syms.function(at + 1).is_none(), "{name}");
    }
}

#[test]
fn a_mapping_seen_before_keeps_its_object_without_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let prog = gcc(
        dir.path(),
        "kept",
        STATIC_SRC,
        &["-g", "-O0", "-static", "-nostdlib", "-fno-stack-protector"],
    );
    let maps = synthetic_maps(&prog, 0);
    let mut syms = Symbols::new();
    assert!(syms.set_mappings(&maps).is_empty());
    let (add, _) = nm(&prog, "add");
    // The file is gone: the mappings of the last call resolve as they did
    // (their file is not looked at again); the same file mapped anew,
    // elsewhere, is looked at and cannot be read.
    std::fs::remove_file(&prog).unwrap();
    let bias = 0x4000_0000;
    let mut again = maps.clone();
    again.extend(maps.iter().map(|m| Mapping {
        start: m.start + bias,
        end: m.end + bias,
        ..m.clone()
    }));
    let problems = syms.set_mappings(&again);
    assert!(
        matches!(problems[..], [SymbolsError::Io { .. }]),
        "{problems:?}"
    );
    assert_eq!(syms.lookup(add).function_name(), "add");
    assert_eq!(syms.lookup(add + bias).function_name(), "???");
    // A mapping the last call did not have is forgotten.
    syms.set_mappings(&again[maps.len()..]);
    assert_eq!(syms.lookup(add).function_name(), "???");
}

/// File address of `<name>:` in `objdump -d`.
fn objdump_label(prog: &Path, name: &str) -> u64 {
    let out = Command::new("objdump")
        .arg("-d")
        .arg(prog)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let label = format!("<{name}>:");
    let line = text
        .lines()
        .find(|l| l.ends_with(&label))
        .unwrap_or_else(|| panic!("{name} not in objdump output"));
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
}

#[test]
fn section_kinds_as_valgrind() {
    let dir = tempfile::tempdir().unwrap();
    let src = "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n";
    // Lazy binding without IBT: calls go through `.plt`.
    let prog = gcc(
        dir.path(),
        "dyn",
        src,
        &["-O0", "-fcf-protection=none", "-Wl,-z,lazy"],
    );
    let bias = 0x5555_0000_0000;
    let mut syms = Symbols::new();
    syms.set_mappings(&synthetic_maps(&prog, bias));
    let (main, _) = nm(&prog, "main");
    assert_eq!(syms.section_kind(main + bias), SectionKind::Text);
    let plt = objdump_label(&prog, "puts@plt");
    assert_eq!(syms.section_kind(plt + bias), SectionKind::Plt);
    // Valgrind finds no name for a PLT stub either.
    assert_eq!(syms.function(plt + bias), None);
    assert_eq!(syms.section_kind(0x1000), SectionKind::Other);
}

/// What `ldd` (the loader itself) says `program` maps, by canonical path.
fn ldd(program: &Path) -> std::collections::BTreeSet<PathBuf> {
    let out = Command::new("ldd").arg(program).output().unwrap();
    assert!(out.status.success(), "ldd {}", program.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let path = match line.split_once(" => ") {
                Some((_, found)) => found,
                None => line.trim(),
            };
            let path = path.split(" (").next()?.trim();
            path.starts_with('/')
                .then(|| std::fs::canonicalize(path).unwrap())
        })
        .collect()
}

#[test]
fn needed_libraries_are_those_the_loader_maps_deepest_first() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    gcc(
        &lib,
        "liba.so",
        "int a(void) { return 1; }",
        &["-shared", "-fPIC"],
    );
    gcc(
        &lib,
        "libb.so",
        "int a(void); int b(void) { return a() + 1; }",
        &[
            "-shared",
            "-fPIC",
            "-L",
            lib.to_str().unwrap(),
            "-Wl,-rpath,$ORIGIN",
            "-Wl,--no-as-needed",
            "-la",
        ],
    );
    let prog = gcc(
        dir.path(),
        "prog",
        "int b(void); int main(void) { return b() - 2; }",
        &[
            "-L",
            lib.to_str().unwrap(),
            "-Wl,-rpath,$ORIGIN/lib",
            "-Wl,--no-as-needed",
            "-lb",
        ],
    );
    let found = cgx_engine::symbols::needed_libraries(&prog);
    let expected = ldd(&prog);
    assert_eq!(
        found
            .iter()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        expected
    );
    assert_eq!(found.len(), expected.len(), "each once: {found:?}");
    let at = |name: &str| found.iter().position(|path| path.ends_with(name)).unwrap();
    assert!(at("liba.so") < at("libb.so"), "deepest first: {found:?}");
    // A system program: the same libraries as the loader's.
    let ls = Path::new("/bin/ls");
    if object::File::parse(&*std::fs::read(ls).unwrap())
        .is_ok_and(|file| file.imports().is_ok_and(|i| !i.is_empty()))
    {
        let found = cgx_engine::symbols::needed_libraries(ls);
        assert_eq!(
            found.into_iter().collect::<std::collections::BTreeSet<_>>(),
            ldd(ls)
        );
    }
}

#[test]
fn a_program_starts_with_its_interpreter_and_itself() {
    let dir = tempfile::tempdir().unwrap();
    let prog = gcc(dir.path(), "prog", "int main(void) { return 0; }", &[]);
    let data = std::fs::read(&prog).unwrap();
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let endian = elf.endian();
    let interpreter = elf
        .elf_program_headers()
        .iter()
        .find_map(|header| header.interpreter(endian, &*data).unwrap())
        .map(|path| std::fs::canonicalize(std::str::from_utf8(path).unwrap()).unwrap())
        .unwrap();
    let prog = std::fs::canonicalize(prog).unwrap();
    let expected = vec![interpreter, prog.clone()];
    assert_eq!(cgx_engine::symbols::started_with(&prog), expected);
    // A script starts its interpreter.
    let script = dir.path().join("script");
    std::fs::write(&script, format!("#!{}\n", prog.display())).unwrap();
    assert_eq!(cgx_engine::symbols::started_with(&script), expected);
    let statik = gcc(
        dir.path(),
        "static",
        "int main(void) { return 0; }",
        &["-static"],
    );
    let statik = std::fs::canonicalize(statik).unwrap();
    assert_eq!(
        cgx_engine::symbols::started_with(&statik),
        vec![statik.clone()]
    );
    assert!(cgx_engine::symbols::needed_libraries(&statik).is_empty());
}
