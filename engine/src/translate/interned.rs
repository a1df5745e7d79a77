//! Values the translations of a code cache share, each kept once: a
//! translation holds a number per instruction. A program's instructions
//! decode to far fewer distinct [`Decoded`](crate::semantics::Decoded)
//! values than it has instructions (python3's start: 12 thousand of 200
//! thousand), and find their recorded words in fewer distinct
//! [`Sources`](super::capture::Sources) still (1,200), so this keeps what
//! the replay knows of every instruction in a fraction of the memory.

use std::hash::Hash;

use indexmap::IndexSet;
use rustc_hash::FxBuildHasher;

/// The distinct values, numbered in the order they were first seen.
#[derive(Clone, Debug)]
pub(super) struct Interned<T> {
    values: IndexSet<T, FxBuildHasher>,
}

impl<T> Default for Interned<T> {
    fn default() -> Self {
        Interned {
            values: IndexSet::default(),
        }
    }
}

impl<T: Hash + Eq + Clone> Interned<T> {
    /// The numbers of `values`, adding those not seen before; `None` when
    /// there would be more than `u32` numbers.
    pub fn intern(&mut self, values: &[T]) -> Option<Box<[u32]>> {
        values
            .iter()
            .map(|value| {
                // A value seen before is not cloned (a clone may allocate).
                let number = match self.values.get_index_of(value) {
                    Some(number) => number,
                    None => self.values.insert_full(value.clone()).0,
                };
                u32::try_from(number).ok()
            })
            .collect()
    }
}

impl<T> Interned<T> {
    /// The value numbered `number`.
    #[inline]
    pub fn get(&self, number: u32) -> Option<&T> {
        self.values.get_index(number as usize)
    }

    /// The values numbered `numbers`, in order (a number not given out
    /// ends them).
    pub fn of<'a>(&'a self, numbers: &'a [u32]) -> impl Iterator<Item = &'a T> + 'a {
        numbers.iter().map_while(|&number| self.get(number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantics::Decoded;
    use iced_x86::{Decoder, DecoderOptions};

    fn decode(bytes: &[u8]) -> Decoded {
        let instruction = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE).decode();
        Decoded::of(&instruction)
    }

    #[test]
    fn an_equal_value_gets_the_number_it_got_first() {
        let mut decodings = Interned::default();
        let push = decode(&[0x55]); // push rbp
        let mov = decode(&[0x48, 0x89, 0xe5]); // mov rbp, rsp
        let first = decodings.intern(&[push, mov]).unwrap();
        let second = decodings.intern(&[mov, push, push]).unwrap();
        assert_eq!(&*first, &[0, 1]);
        assert_eq!(&*second, &[1, 0, 0]);
        let back: Vec<Decoded> = decodings.of(&second).copied().collect();
        assert_eq!(back, [mov, push, push]);
        assert_eq!(decodings.get(2), None);
    }
}
