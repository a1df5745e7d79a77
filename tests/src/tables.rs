//! Per-function figures computed from a profile, as callgrind_annotate and
//! cg_annotate print them: keyed by `file:function`.

use std::collections::BTreeMap;

use cgx_formats::{add_costs, NameId, Profile, Record};

/// Counts (one per event) by `file:function`. Functions whose counts are all zero
/// are left out, as the annotate tools print them as `.` or not at all.
pub type Functions = BTreeMap<String, Vec<u64>>;

/// Adds `costs` to the counts of `function` in `functions`.
fn add_to(functions: &mut Functions, function: String, costs: &[u64]) {
    let sum = functions.entry(function).or_default();
    if sum.len() < costs.len() {
        sum.resize(costs.len(), 0);
    }
    add_costs(sum, costs);
}

/// `functions` without the rows whose counts are all zero.
pub fn without_zeros(mut functions: Functions) -> Functions {
    functions.retain(|_, costs| costs.iter().any(|&c| c != 0));
    functions
}

/// The sum of two tables, row by row.
pub fn sum(a: &Functions, b: &Functions) -> Functions {
    let mut total = a.clone();
    for (function, costs) in b {
        add_to(&mut total, function.clone(), costs);
    }
    without_zeros(total)
}

/// The self cost of every function, added over all parts, keyed as
/// callgrind_annotate keys it: the source file of each cost line (the function's
/// `fl=` file, or the `fi=`/`fe=` file the line is in), a colon, the function name.
/// This is also how cg_annotate keys a Cachegrind file (`fl=` then `fn=`).
pub fn self_costs(profile: &Profile) -> Functions {
    records_by_function(profile, |record| match record {
        Record::Cost { file, costs, .. } => Some((file, costs)),
        _ => None,
    })
}

/// The inclusive costs of calls with a count of zero, by caller, keyed like
/// [`self_costs`]. callgrind_annotate 3.19 takes the line after `calls=0` for a
/// cost line, so it counts these as self cost of the caller. Callgrind writes
/// such calls in dumps after the first (`CALLGRIND_DUMP_STATS`): a call that was
/// made before the dump and returned after it.
pub fn zero_count_calls(profile: &Profile) -> Functions {
    records_by_function(profile, |record| match record {
        Record::Call {
            file,
            count: 0,
            inclusive,
            ..
        } => Some((file, inclusive)),
        _ => None,
    })
}

/// Adds up the costs `select` picks from each record, by `file:function`.
fn records_by_function(
    profile: &Profile,
    select: impl for<'r> Fn(Record<'r>) -> Option<(NameId, &'r [u64])>,
) -> Functions {
    let mut functions = Functions::new();
    for part in &profile.parts {
        for (function, records) in part.functions() {
            let name = profile.names.get(function.name);
            records.for_each(part.events.len(), |record| {
                if let Some((file, costs)) = select(record) {
                    let key = format!("{}:{name}", profile.names.get(file));
                    add_to(&mut functions, key, costs);
                }
            });
        }
    }
    without_zeros(functions)
}

/// Whether `functions` has a row for `landmark` (`file:function`, the file without
/// its folder): the file's name matches and the function's name is the landmark's
/// or starts with it followed by `'` (Callgrind's `fib'2`, `fib'fib'main`).
pub fn has_landmark(functions: &Functions, landmark: &str) -> bool {
    let (file, function) = landmark
        .split_once(':')
        .expect("a landmark is file:function");
    functions.keys().any(|key| {
        let Some((key_file, key_function)) = key.rsplit_once(':') else {
            return false;
        };
        let key_file = key_file.rsplit('/').next().unwrap_or(key_file);
        let base_name = key_function.split('\'').next().unwrap_or(key_function);
        key_file == file && base_name == function
    })
}

/// The counts of every line of `text` that starts with `key` (`summary:` or
/// `totals:`), in file order, read independently of cgx's reader.
pub fn count_lines(text: &str, key: &str) -> Vec<Vec<u64>> {
    text.lines()
        .filter_map(|line| line.strip_prefix(key))
        .map(|counts| {
            counts
                .split_whitespace()
                .map(|count| count.parse().expect("a decimal count"))
                .collect()
        })
        .collect()
}
