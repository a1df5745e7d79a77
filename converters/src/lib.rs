//! Conversions between the profile formats cgx handles.
//!
//! Callgrind files carry everything Cachegrind files do, so Cachegrind → Callgrind is
//! writing the same model in the other format. Callgrind → Cachegrind is
//! [`to_cachegrind`]: self costs per source line, call graph and instruction
//! addresses dropped.

mod cachegrind;

pub use cachegrind::{to_cachegrind, ConvertError};
