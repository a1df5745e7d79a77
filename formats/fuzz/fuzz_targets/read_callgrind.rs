//! The reader in the Callgrind dialect: the input follows a `# callgrind format`
//! first line. Any input may be rejected with an error; none may panic, hang or
//! take unbounded memory.

#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = b"# callgrind format\n".to_vec();
    input.extend_from_slice(data);
    match cgx_formats::read(Cursor::new(input), "fuzz.callgrind") {
        Ok(profile) => {
            for part in &profile.parts {
                let _ = part.self_totals();
                let _ = part.has_call_graph();
            }
        }
        Err(error) => drop(error.to_string()),
    }
});
