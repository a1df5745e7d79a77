//! Equality of profiles (`PartialEq for Profile`, which compares canonical views)
//! and of function tables, with a readable account of the differences.

use std::collections::BTreeMap;
use std::fmt::Debug;

use cgx_formats::{canonical, CanonicalPart, Profile};

use crate::tables::Functions;

/// Panics with the first difference unless `expected == actual`.
pub fn assert_same_profile(expected: &Profile, actual: &Profile, context: &str) {
    if expected != actual {
        let difference = first_difference(expected, actual)
            .unwrap_or_else(|| "== says no, but the canonical views are equal".into());
        panic!("{context}: the profiles differ: {difference}");
    }
}

/// The first difference between the canonical views of two profiles, if any.
fn first_difference(a: &Profile, b: &Profile) -> Option<String> {
    let (a, b) = (canonical(a), canonical(b));
    if a.creator != b.creator {
        return Some(format!("creator {:?} != {:?}", a.creator, b.creator));
    }
    if a.parts.len() != b.parts.len() {
        return Some(format!(
            "{} parts != {} parts",
            a.parts.len(),
            b.parts.len()
        ));
    }
    a.parts
        .iter()
        .zip(&b.parts)
        .enumerate()
        .find_map(|(index, (a, b))| {
            part_difference(a, b).map(|what| format!("part {}: {what}", index + 1))
        })
}

fn part_difference(a: &CanonicalPart, b: &CanonicalPart) -> Option<String> {
    let field = |name: &str, a: &dyn Debug, b: &dyn Debug| {
        let (a, b) = (format!("{a:?}"), format!("{b:?}"));
        (a != b).then(|| format!("{name} {a} != {b}"))
    };
    field("header", &a.header, &b.header)
        .or_else(|| field("events", &a.events, &b.events))
        .or_else(|| field("positions", &a.positions, &b.positions))
        .or_else(|| field("summary", &a.summary, &b.summary))
        .or_else(|| field("totals", &a.totals, &b.totals))
        .or_else(|| map_difference("cost", &a.costs, &b.costs))
        .or_else(|| map_difference("call", &a.calls, &b.calls))
        .or_else(|| map_difference("jump", &a.jumps, &b.jumps))
}

fn map_difference<K: Ord + Debug, V: PartialEq + Debug>(
    what: &str,
    a: &BTreeMap<K, V>,
    b: &BTreeMap<K, V>,
) -> Option<String> {
    a.iter()
        .find_map(|(key, value)| match b.get(key) {
            None => Some(format!("{what} {key:?} = {value:?} only in the first")),
            Some(other) if other != value => {
                Some(format!("{what} {key:?} = {value:?} != {other:?}"))
            }
            Some(_) => None,
        })
        .or_else(|| {
            b.iter()
                .find(|(key, _)| !a.contains_key(key))
                .map(|(key, value)| format!("{what} {key:?} = {value:?} only in the second"))
        })
}

/// Panics with the differing rows unless two function tables are equal.
pub fn assert_same_functions(expected: &Functions, actual: &Functions, context: &str) {
    assert_same_rows(expected, actual, context);
}

/// Panics with the differing rows unless two tables (function, file or line →
/// counts) are equal.
pub fn assert_same_rows<K: Ord + Debug, V: PartialEq + Debug>(
    expected: &BTreeMap<K, V>,
    actual: &BTreeMap<K, V>,
    context: &str,
) {
    let mut differences: Vec<String> = expected
        .iter()
        .filter(|(key, counts)| actual.get(*key) != Some(counts))
        .map(|(key, counts)| format!("  {key:?}: {counts:?} != {:?}", actual.get(key)))
        .collect();
    differences.extend(
        actual
            .iter()
            .filter(|(key, _)| !expected.contains_key(*key))
            .map(|(key, counts)| format!("  {key:?}: missing != {counts:?}")),
    );
    assert!(
        differences.is_empty(),
        "{context}: {} of {} rows differ (expected != actual):\n{}",
        differences.len(),
        expected.len(),
        differences.join("\n")
    );
}
