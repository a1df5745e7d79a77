//! The reader on raw input: mostly the Cachegrind dialect (the dialect is decided
//! by the header, so Callgrind input is reached too), and the gzip path when the
//! input starts with the gzip magic. Any input may be rejected with an error; none
//! may panic, hang or take unbounded memory.

#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match cgx_formats::read(Cursor::new(data.to_vec()), "fuzz.cachegrind") {
        Ok(profile) => {
            for part in &profile.parts {
                let _ = part.self_totals();
                let _ = part.has_call_graph();
            }
        }
        Err(error) => drop(error.to_string()),
    }
});
