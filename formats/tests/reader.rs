//! The reader on hand-written files: the rules of positions, names and parts, and
//! the errors for malformed input.

use std::io::Cursor;

use cgx_formats::{canonical, read, CanonicalPart, Error, Position, Profile};

fn parse(text: &str) -> Result<Profile, Error> {
    read(Cursor::new(text.as_bytes().to_vec()), "test.out")
}

fn only_part(text: &str) -> CanonicalPart {
    let profile = parse(text).unwrap_or_else(|error| panic!("{error}"));
    let mut parts = canonical(&profile).parts;
    assert_eq!(parts.len(), 1);
    parts.remove(0)
}

fn error_of(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("no error for:\n{text}"),
        Err(error) => error.to_string(),
    }
}

fn at(instr: u64, line: u64) -> Position {
    Position { instr, line }
}

/// Self costs as (function, file, position, costs) with owned strings.
fn costs(part: &CanonicalPart) -> Vec<(String, String, Position, Vec<u64>)> {
    part.costs
        .iter()
        .map(|((function, file, position), costs)| {
            (function.2.clone(), file.clone(), *position, costs.clone())
        })
        .collect()
}

#[test]
fn relative_positions_follow_the_previous_cost_line_not_call_targets() {
    let part = only_part(
        "# callgrind format\npositions: instr line\nevents: Ir\n\
         fl=(1) a.c\nfn=(1) f\n0x10 5 1\n+2 * 2\ncfn=(2) g\ncalls=3 +0x100 +90\n+1 +1 7\n-3 -2 4\n",
    );
    assert_eq!(
        costs(&part),
        vec![
            ("f".into(), "a.c".into(), at(0x10, 4), vec![4]),
            ("f".into(), "a.c".into(), at(0x10, 5), vec![1]),
            ("f".into(), "a.c".into(), at(0x12, 5), vec![2]),
        ]
    );
    let (call, (count, inclusive)) = part.calls.iter().next().expect("one call");
    assert_eq!(
        call.0 .2,
        at(0x13, 6),
        "call site is relative to the previous line"
    );
    assert_eq!(
        call.2,
        at(0x112, 95),
        "target is relative to the previous cost line"
    );
    assert_eq!(call.1 .2, "g");
    assert_eq!((*count, inclusive.clone()), (3, vec![7]));
}

#[test]
fn names_are_compressed_per_space_and_reset_per_part() {
    let profile = parse(
        "# callgrind format\nevents: Ir\nob=(1) prog\nfl=(1) a.c\nfn=(1) main\n1 10\n\
         cob=(2) libc.so\ncfi=(2) b.c\ncfn=(2) puts\ncalls=1 7\n1 30\n\
         ob=(2)\nfl=(2)\nfn=(2)\n7 30\n\
         part: 2\nevents: Ir\nob=(1) other\nfl=(1) c.c\nfn=(1) (below main)\n3 4\n",
    )
    .expect("valid");
    let parts = canonical(&profile).parts;
    assert_eq!(parts.len(), 2);
    let names: Vec<_> = parts[0].costs.keys().map(|(f, _, _)| f.clone()).collect();
    assert_eq!(
        names,
        vec![
            ("libc.so".into(), "b.c".into(), "puts".into()),
            ("prog".into(), "a.c".into(), "main".into()),
        ]
    );
    let callee = &parts[0].calls.keys().next().expect("a call").1;
    assert_eq!(callee, &("libc.so".into(), "b.c".into(), "puts".into()));
    let second: Vec<_> = parts[1].costs.keys().map(|(f, _, _)| f.2.clone()).collect();
    assert_eq!(
        second,
        vec!["(below main)".to_string()],
        "a name in parentheses is literal"
    );
    assert_eq!(parts[1].header.part, Some(2));
}

#[test]
fn inlined_files_keep_the_function_and_fn_returns_to_its_file() {
    let part = only_part(
        "# callgrind format\nevents: Ir\nfl=a.c\nfn=f\n1 1\nfi=h.h\n2 2\ncfn=g\ncalls=1 9\n2 5\nfn=g\n9 5\n",
    );
    assert_eq!(
        costs(&part),
        vec![
            ("f".into(), "a.c".into(), at(0, 1), vec![1]),
            ("f".into(), "h.h".into(), at(0, 2), vec![2]),
            ("g".into(), "a.c".into(), at(0, 9), vec![5]),
        ]
    );
    let callee = &part.calls.keys().next().expect("a call").1;
    assert_eq!(
        callee.1, "h.h",
        "a callee without cfi= is in the current file"
    );
}

#[test]
fn jumps_and_conditional_jumps() {
    let part = only_part(
        "# callgrind format\npositions: instr\nevents: Ir\nfn=f\n0x100 1\n\
         jcnd=3/10 +8\n+4\njfi=x.c\njfn=g\njump=2 0x200\n*\n",
    );
    let jumps: Vec<_> = part
        .jumps
        .iter()
        .map(|(key, value)| (key.0 .2, key.1.clone(), key.2.clone(), key.3, key.4, *value))
        .collect();
    assert_eq!(
        jumps,
        vec![
            (
                at(0x104, 0),
                String::new(),
                "f".into(),
                at(0x108, 0),
                true,
                (10, 3)
            ),
            (
                at(0x104, 0),
                "x.c".into(),
                "g".into(),
                at(0x200, 0),
                false,
                (2, 0)
            ),
        ]
    );
}

#[test]
fn header_lines_and_event_definitions() {
    let profile = parse(
        "# callgrind format\nversion: 1\ncreator: test 1.0\npid: 42\nthread: 2\ncmd:  ./prog a b\n\
         part: 3\ndesc: I1 cache: 32768 B\nevent: Ir : Instruction Fetches\nevent: Sum = Ir + Dr\n\
         events: Ir Dr\nsummary: 5 6\nfn=f\n1 5 6\ntotals: 5 6\n",
    )
    .expect("valid");
    assert_eq!(profile.creator.as_deref(), Some("test 1.0"));
    let part = &profile.parts[0];
    assert_eq!(
        (part.header.pid, part.header.thread, part.header.part),
        (Some(42), Some(2), Some(3))
    );
    assert_eq!(part.header.cmd.as_deref(), Some("./prog a b"));
    assert_eq!(part.header.desc, vec!["I1 cache: 32768 B".to_string()]);
    assert_eq!(
        part.events.defs[0].long_name.as_deref(),
        Some("Instruction Fetches")
    );
    assert_eq!(part.events.defs[1].formula.as_deref(), Some("Ir + Dr"));
    assert_eq!(part.summary, Some(vec![5, 6]));
    assert_eq!(part.totals, Some(vec![5, 6]));
    assert_eq!(part.self_totals(), vec![5, 6]);
}

#[test]
fn cachegrind_dots_missing_counts_and_fi_lines() {
    let part = only_part(
        "desc: I1 cache: x\ncmd: ./a\nevents: Ir Dr Dw\nfl=a.c\nfn=(below main)\n3 . 2\n4 1\nfi=b.h\n5 1 1 1\nsummary: 2 3 1\n",
    );
    assert_eq!(
        costs(&part),
        vec![
            ("(below main)".into(), "a.c".into(), at(0, 3), vec![0, 2, 0]),
            ("(below main)".into(), "a.c".into(), at(0, 4), vec![1, 0, 0]),
            ("(below main)".into(), "b.h".into(), at(0, 5), vec![1, 1, 1]),
        ]
    );
}

#[test]
fn gzip_input_is_read() {
    use flate2::write::GzEncoder;
    use std::io::Write;
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder
        .write_all(b"events: Ir\nfl=a.c\nfn=f\n1 4\nsummary: 4\n")
        .expect("in memory");
    let bytes = encoder.finish().expect("in memory");
    let profile = read(Cursor::new(bytes), "test.gz").expect("valid");
    assert_eq!(profile.parts[0].self_totals(), vec![4]);
}

#[test]
fn malformed_files_name_the_line_and_the_reason() {
    let cases = [
        (
            "cmd: a\nevents: Ir\nfl=a.c\nfn=f\n1 x\nsummary: 0\n",
            "test.out:5: bad count 'x'",
        ),
        (
            "cmd: a\nevents: Ir\nfl=a.c\nfn=f\n1 1 2\nsummary: 1\n",
            "test.out:5: 2 counts for 1 event",
        ),
        (
            "fl=a.c\nfn=f\n1 1\n",
            "test.out:1: fl= comes before the events: line",
        ),
        (
            "cmd: a\nevents: Ir\nfl=a.c\n1 1\n",
            "test.out:4: cost line before any fn= line",
        ),
        (
            "cmd: a\nevents: Ir\nfl=a.c\nfn=f\n1 2\nsummary: 3\n",
            "test.out:6: summary: 3 does not equal the totals of the cost lines, 2",
        ),
        (
            "cmd: a\nevents: Ir\nfl=a.c\nfn=f\n1 2\n",
            "test.out:5: missing summary: line",
        ),
        (
            "# callgrind format\nevents: Ir\nfn=(7)\n",
            "test.out:3: compressed function id (7) is used before it is defined",
        ),
        (
            "# callgrind format\nevents: Ir\nfn=(1) a\nfn=(1) b\n",
            "test.out:4: compressed function id (1) is redefined from 'a' to 'b'",
        ),
        (
            "# callgrind format\nevents: Ir\nfn=f\ncfn=g\ncalls=1 2\n",
            "test.out:5: a calls=/jump= line at the end of a part has no position line",
        ),
        (
            "# callgrind format\nevents: Ir\nfn=f\ncalls=1 2\n3 4\n",
            "test.out:4: calls= without a cfn= line before it",
        ),
        (
            "# callgrind format\nevents: Ir\nfn=f\ncfn=g\ncalls=1 2\nfn=h\n",
            "test.out:6: the calls=/jump= line 5 must be followed by its position line",
        ),
        (
            "# callgrind format\nversion: 2\n",
            "test.out:2: unsupported format version '2' (cgx reads version 1)",
        ),
        (
            "# callgrind format\npositions: instr\nevents: Ir\nfn=f\n5 1\n-6 1\n",
            "test.out:6: bad instruction address '-6'",
        ),
        (
            "# callgrind format\nevents: Ir Ir\n",
            "test.out:2: event Ir is listed twice",
        ),
        (
            "# callgrind format\nevents: Ir\nfn=f\n1 99999999999999999999\n",
            "test.out:4: bad count '99999999999999999999'",
        ),
        (
            "cmd: a\nevents: Ir\nfl=a.c\nfn=f\nob=x\n",
            "test.out:5: ob= is not part of the Cachegrind format",
        ),
        (
            "# callgrind format\nevents: Ir\nfn=f\njump=1 2\n3 4\n",
            "test.out:5: the position line of a jump has no costs",
        ),
        (
            "# callgrind format\nevents: Ir\nbogus\n",
            "test.out:3: unknown line 'bogus'",
        ),
        ("", "test.out: not a profile: no events: line"),
        (
            "# just a comment\n\n",
            "test.out: not a profile: no events: line",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error_of(text), expected, "for input:\n{text}");
    }
}
