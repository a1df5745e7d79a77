//! Read, write, read again: what the writers write, the reader must read back as
//! the same profile.
//!
//! Whatever input the reader accepts (either dialect, plain or gzip):
//!
//! - **Callgrind writer**, all four combinations of `compress_strings` and
//!   `compress_positions`: the output must parse and be `==` the first profile
//!   (`PartialEq for Profile` compares canonical views: names resolved, costs at
//!   the same place added up, all-zero self costs left out). Nothing may differ:
//!   the Callgrind format expresses everything the model holds. Writing the
//!   reread profile again must give the same bytes (the writer numbers names in
//!   the order it writes them and keeps the order of functions and records, so the
//!   output does not depend on how the first profile happened to be interned).
//! - **Cachegrind writer**: it must refuse a profile with more or less than one
//!   part, without line positions or with calls or jumps, with the matching error.
//!   Otherwise its output must parse and be `==` to
//!   `cgx_converters::to_cachegrind(&profile)` with the `event:` definitions
//!   removed. That is what may legitimately differ from the first profile:
//!   - `creator:`, `pid:`, `thread:`, `part:`, other `key: value` header lines,
//!     `event:` definitions, `totals:` and object names (`ob=`) are dropped: the
//!     format has no place for them (only `desc:`, `cmd:`, `events:` are kept);
//!   - instruction addresses are dropped and `positions:` becomes `line`, so costs
//!     at different addresses of one line add up;
//!   - a cost in an inlined file (`fi=`/`fe=`) is written under `fl=` of that file,
//!     so the reader counts it for the function of that name in that file, not in
//!     the function's own file (functions are regrouped by the record's file);
//!   - `summary:` is the total of the costs written, whatever the first profile's
//!     `summary:` said (or whether it had one).
//!
//! Failures print the first difference and the text written.

#![no_main]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;

use cgx_formats::{
    canonical, read, write, CachegrindError, CallgrindOptions, CanonicalProfile, Format, Profile,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(profile) = read(Cursor::new(data.to_vec()), "fuzz.input") else {
        return;
    };
    let first = canonical(&profile);
    for compress_strings in [false, true] {
        for compress_positions in [false, true] {
            let format = Format::Callgrind(CallgrindOptions {
                compress_strings,
                compress_positions,
            });
            let text = written(&profile, format).expect("the Callgrind writer failed");
            let again = reread(&text, format);
            check_same(&first, &canonical(&again), &text, format);
            let text_again = written(&again, format).expect("the Callgrind writer failed");
            if text_again != text {
                panic!(
                    "{format:?}: writing the reread profile gives other bytes\n\
                     --- first ---\n{}\n--- second ---\n{}",
                    String::from_utf8_lossy(&text),
                    String::from_utf8_lossy(&text_again)
                );
            }
        }
    }

    let result = written(&profile, Format::Cachegrind);
    let parts = profile.parts.len();
    let lines = profile.parts.iter().all(|part| part.positions.line);
    let call_graph = profile.parts.iter().any(|part| part.has_call_graph());
    match result {
        Err(CachegrindError::Parts(n)) if parts != 1 && n == parts => {}
        Err(CachegrindError::NoLines) if parts == 1 && !lines => {}
        Err(CachegrindError::CallGraph) if parts == 1 && lines && call_graph => {}
        Ok(text) if parts == 1 && lines && !call_graph => {
            let again = reread(&text, Format::Cachegrind);
            let mut expected = cgx_converters::to_cachegrind(&profile)
                .expect("to_cachegrind failed on a one-part profile");
            for part in &mut expected.parts {
                part.events.defs.clear();
            }
            check_same(
                &canonical(&expected),
                &canonical(&again),
                &text,
                Format::Cachegrind,
            );
        }
        Ok(_) => panic!(
            "the Cachegrind writer accepted a profile of {parts} parts \
             (line positions: {lines}, call graph: {call_graph})"
        ),
        Err(error) => panic!(
            "the Cachegrind writer failed: {error} ({parts} parts, \
             line positions: {lines}, call graph: {call_graph})"
        ),
    }
});

fn written(profile: &Profile, format: Format) -> Result<Vec<u8>, CachegrindError> {
    let mut out = Vec::new();
    write(profile, format, &mut out)?;
    Ok(out)
}

fn reread(text: &[u8], format: Format) -> Profile {
    read(Cursor::new(text.to_vec()), "fuzz.written").unwrap_or_else(|error| {
        panic!(
            "{format:?}: the written profile does not read back: {error}\n--- written ---\n{}",
            String::from_utf8_lossy(text)
        )
    })
}

fn check_same(expected: &CanonicalProfile, found: &CanonicalProfile, text: &[u8], format: Format) {
    if expected == found {
        return;
    }
    panic!(
        "{format:?}: the profile read back differs: {}\n--- written ---\n{}",
        first_difference(expected, found),
        String::from_utf8_lossy(text)
    );
}

fn first_difference(a: &CanonicalProfile, b: &CanonicalProfile) -> String {
    if a.creator != b.creator {
        return format!("creator {:?} != {:?}", a.creator, b.creator);
    }
    if a.parts.len() != b.parts.len() {
        return format!("{} parts != {} parts", a.parts.len(), b.parts.len());
    }
    for (index, (a, b)) in a.parts.iter().zip(&b.parts).enumerate() {
        let part = index + 1;
        if a.header != b.header {
            return format!("part {part}: header {:?} != {:?}", a.header, b.header);
        }
        if a.events != b.events {
            return format!("part {part}: events {:?} != {:?}", a.events, b.events);
        }
        if a.positions != b.positions {
            return format!(
                "part {part}: positions {:?} != {:?}",
                a.positions, b.positions
            );
        }
        if a.summary != b.summary {
            return format!("part {part}: summary {:?} != {:?}", a.summary, b.summary);
        }
        if a.totals != b.totals {
            return format!("part {part}: totals {:?} != {:?}", a.totals, b.totals);
        }
        let difference = map_difference("costs", &a.costs, &b.costs)
            .or_else(|| map_difference("calls", &a.calls, &b.calls))
            .or_else(|| map_difference("jumps", &a.jumps, &b.jumps));
        if let Some(difference) = difference {
            return format!("part {part}: {difference}");
        }
    }
    "no difference found".into()
}

fn map_difference<K: Ord + Debug, V: PartialEq + Debug>(
    what: &str,
    a: &BTreeMap<K, V>,
    b: &BTreeMap<K, V>,
) -> Option<String> {
    for (key, value) in a {
        match b.get(key) {
            None => return Some(format!("{what}: {key:?} => {value:?} is missing")),
            Some(other) if other != value => {
                return Some(format!("{what}: {key:?} => {value:?} != {other:?}"))
            }
            Some(_) => {}
        }
    }
    b.keys()
        .find(|key| !a.contains_key(key))
        .map(|key| format!("{what}: {key:?} => {:?} is new", b[key]))
}
