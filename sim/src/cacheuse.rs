//! Callgrind's `--cacheuse=yes` model (the "cacheuse" simulator of
//! `callgrind/sim.c`): the I1/D1/LL hierarchy plus, per resident line, how often it
//! was accessed and which parts of it were touched, charged to the instruction
//! that loaded it when it leaves the cache.
//!
//! The rules, as Valgrind 3.19 has them:
//!
//! - Every line slot holds an access count, a 32-bit usage mask (one bit per
//!   `line / 32` bytes, or `32 / line` bits per byte for 16-byte lines) and the
//!   owner that loaded it.
//! - An L1 (I1 or D1) hit adds 1 to the count and ORs the touched bytes into the
//!   mask. An L1 miss evicts the LRU line; if its count is non-zero and it has an
//!   owner, the owner is charged `AcCost1 += 1000 / count` and `SpLoss1 += ((32 −
//!   popcount(mask)) × line) >> 5`, and the count and mask are added to the LL line
//!   it was loaded from. The new line starts with count 1 and the touched mask.
//! - LL is consulted only for lines that missed in L1, one line at a time (unlike
//!   the plain simulator, a straddling access whose first line hits L1 sends only
//!   the second line to LL). An LL hit changes nothing but the LRU order. An LL
//!   miss evicts the LRU LL line: if its count (made only of L1 evictions) is
//!   non-zero and it has an owner, the owner is charged `AcCost2`/`SpLoss2`; the
//!   new line starts with count 0 and an empty mask, owned by the instruction whose
//!   L1 miss brought it in.
//! - The tags compared are the address bits above the set index and below bit
//!   32 (Valgrind's mask is 32 bits wide: lines 4 GiB apart share a tag); every tag starts
//!   as 0. So at the start all lines whose address is below `sets × line` (the
//!   cache size divided by the associativity) hit. With a huge LL this covers the
//!   usual executable and loader addresses, which is why Callgrind reports
//!   `ILmr = 0` for small programs under `--cacheuse=yes`.
//! - A line at address 0 (memline 0) that misses L1 is not looked up in LL.
//! - Charges and the propagation into LL happen only while collection is on.
//! - [`UseHierarchy::flush`] charges every resident line with an owner, I1 then D1
//!   (whose counts reach LL first) then LL, and leaves the lines without owner.

use crate::config::{CacheConfig, CacheLevel, CachesConfig, GeometryError};
use crate::outcome::Outcome;

/// Who loaded a line: an opaque id chosen by the caller (for example the cost
/// centre of the loading instruction). [`NO_OWNER`] is reserved.
pub type Owner = u64;

/// The owner of lines nobody loaded (at the start, after a flush or a clear);
/// charges to it are dropped. Do not pass it as an owner.
pub const NO_OWNER: Owner = u64::MAX;

/// The four cache-use events of Callgrind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UseEvent {
    /// L1 access cost: `1000 / count` per evicted I1 or D1 line.
    AcCost1,
    /// L1 spatial loss: bytes of an evicted I1 or D1 line never touched.
    SpLoss1,
    /// LL access cost: `1000 / count` per evicted LL line.
    AcCost2,
    /// LL spatial loss: bytes of an evicted LL line never touched in L1.
    SpLoss2,
}

impl UseEvent {
    /// The event name in Callgrind's `events:` line.
    pub fn name(self) -> &'static str {
        match self {
            UseEvent::AcCost1 => "AcCost1",
            UseEvent::SpLoss1 => "SpLoss1",
            UseEvent::AcCost2 => "AcCost2",
            UseEvent::SpLoss2 => "SpLoss2",
        }
    }
}

/// One amount to add to one owner's self cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Charge {
    /// Who loaded the evicted line.
    pub owner: Owner,
    /// Which event.
    pub event: UseEvent,
    /// How much to add.
    pub amount: u64,
}

/// A line changed hands: `owner` got a line (`loaded`) or lost one (evicted,
/// flushed or cleared). Lets a caller keep, per owner, how many resident lines
/// it has (the back-dating tree's reference counts), whether or not
/// collection is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LineChange {
    /// The line's owner.
    pub owner: Owner,
    /// `true` when the owner got the line, `false` when it lost it.
    pub loaded: bool,
}

/// Why a cache-use simulation cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CacheUseError {
    /// The geometry is invalid.
    #[error("{0} cache: {1}")]
    Geometry(CacheLevel, GeometryError),
    /// Callgrind keeps a way's slot number in the low tag bits, so the
    /// associativity cannot exceed `sets × line size`.
    #[error("{0} cache: cache-use statistics need an associativity of at most {1}")]
    AssocTooLarge(CacheLevel, u64),
}

/// Per-slot usage of a line.
#[derive(Clone, Copy, Debug)]
struct Usage {
    count: u32,
    mask: u32,
    owner: Owner,
}

/// A slot's [`Usage`] as a cache stores it: the count in the low half of
/// the first word and the mask in its high half, the owner's complement
/// in the second, so that zeroed memory is an unused line without owner.
type StoredUsage = [u64; 2];

impl Usage {
    #[inline(always)]
    fn load(stored: StoredUsage) -> Usage {
        Usage {
            count: stored[0] as u32,
            mask: (stored[0] >> 32) as u32,
            owner: !stored[1],
        }
    }

    #[inline(always)]
    fn store(self) -> StoredUsage {
        [
            u64::from(self.count) | u64::from(self.mask) << 32,
            !self.owner,
        ]
    }
}

/// No LL slot recorded for an L1 line.
const NO_DEP: u32 = u32::MAX;

/// One cache with usage bookkeeping. `tags` holds, per set in MRU-first order,
/// `tag | slot` where tag is the address with the low `tag_shift` bits cleared and
/// `slot` names the set's usage entry, which stays put while tags move.
///
/// The tables are zeroed allocations whose sets are set up (`ready`) at
/// once for I1 and D1, and for LL when a lookup first reaches the set,
/// which writes its tags and usage before anything reads them: so a large
/// LL costs memory only for the sets a program reaches, and each of their
/// pages is made once, by a write (a page read first would be the shared
/// zero page, whose replacement at the first write flushes the address
/// translations of the other processors running the tracer's threads).
#[derive(Clone, Debug)]
struct UseCache {
    line_size: u32,
    line_bits: u32,
    set_mask: u64,
    tag_mask: u64,
    assoc: usize,
    tags: Box<[u64]>,
    usage: Box<[StoredUsage]>,
    /// One bit per set: whether its tags and usage are written.
    ready: Box<[u64]>,
    /// Whether this is I1 or D1: every set set up at once, and `deps` kept.
    first_level: bool,
    /// For L1 caches: the LL slot each line was loaded from (or found in).
    deps: Box<[u32]>,
    start_mask: Box<[u32]>,
    end_mask: Box<[u32]>,
}

/// Result of looking up one line.
enum Lookup {
    /// Hit: the usage index.
    Hit(usize),
    /// Miss: the usage index of the evicted (now reused) slot.
    Miss(usize),
}

impl UseCache {
    fn new(level: CacheLevel, config: CacheConfig, l1: bool) -> Result<UseCache, CacheUseError> {
        config
            .check()
            .map_err(|e| CacheUseError::Geometry(level, e))?;
        let sets = config.sets() as usize;
        let assoc = config.assoc as usize;
        let line_bits = config.line_size.trailing_zeros();
        let tag_shift = line_bits + sets.trailing_zeros();
        let limit = 1u64 << tag_shift;
        if assoc as u64 > limit {
            return Err(CacheUseError::AssocTooLarge(level, limit));
        }
        let (start_mask, end_mask) = use_masks(config.line_size);
        let mut cache = UseCache {
            line_size: config.line_size,
            line_bits,
            set_mask: sets as u64 - 1,
            // Valgrind's `~((1 << shift) - 1)`: a 32-bit mask, widened with
            // zeros, so lines 4 GiB apart share a tag.
            tag_mask: u64::from(!(1u32.wrapping_shl(tag_shift).wrapping_sub(1))),
            assoc,
            tags: Box::default(),
            usage: Box::default(),
            ready: Box::default(),
            first_level: l1,
            deps: vec![NO_DEP; if l1 { sets * assoc } else { 0 }].into_boxed_slice(),
            start_mask,
            end_mask,
        };
        cache.clear();
        Ok(cache)
    }

    /// Every line back to its initial state (tag 0, unused, no owner): the
    /// tables allocated anew, zeroed, and for I1 and D1 every set set up.
    fn clear(&mut self) {
        let sets = self.sets();
        let len = sets * self.assoc;
        self.tags = vec![0; len].into_boxed_slice();
        self.usage = vec![[0; 2]; len].into_boxed_slice();
        self.ready = vec![0; sets.div_ceil(64)].into_boxed_slice();
        self.deps.fill(NO_DEP);
        if self.first_level {
            for set in 0..sets {
                self.make_ready(set);
            }
        }
    }

    /// The number of sets.
    fn sets(&self) -> usize {
        self.set_mask as usize + 1
    }

    /// Whether `set` is set up (its tags and usage written).
    #[inline]
    fn is_ready(&self, set: usize) -> bool {
        self.ready
            .get(set / 64)
            .is_some_and(|word| word & (1 << (set % 64)) != 0)
    }

    /// Writes the initial tags of `set` (way `j`: tag 0, slot `j`) and its
    /// lines' usage (unused, no owner) unless they are written.
    #[inline]
    fn make_ready(&mut self, set: usize) {
        let Some(word) = self.ready.get_mut(set / 64) else {
            return;
        };
        let bit = 1 << (set % 64);
        if *word & bit != 0 {
            return;
        }
        *word |= bit;
        let start = set * self.assoc;
        if let Some(ways) = self.tags.get_mut(start..start + self.assoc) {
            for (slot, way) in (0u64..).zip(ways) {
                *way = slot;
            }
        }
        if let Some(usage) = self.usage.get_mut(start..start + self.assoc) {
            usage.fill([0; 2]);
        }
    }

    /// The slots whose lines have an owner, in order: only sets set up
    /// can have them.
    fn owned_slots(&self) -> Vec<usize> {
        (0..self.sets())
            .filter(|&set| self.is_ready(set))
            .flat_map(|set| set * self.assoc..(set + 1) * self.assoc)
            .filter(|&slot| self.usage(slot).owner != NO_OWNER)
            .collect()
    }

    /// The usage of the line in `slot`.
    #[inline(always)]
    fn usage(&self, slot: usize) -> Usage {
        Usage::load(self.usage[slot])
    }

    /// Sets the usage of the line in `slot`.
    #[inline(always)]
    fn set_usage(&mut self, slot: usize, usage: Usage) {
        self.usage[slot] = usage.store();
    }

    #[inline]
    fn set_of(&self, addr: u64) -> u64 {
        (addr >> self.line_bits) & self.set_mask
    }

    /// Whether an access of `size` bytes at `addr` touches one set and hits
    /// the most recently used line there, which it then uses as
    /// [`UseHierarchy::access`] would: that line's slot; `None`, having
    /// done nothing, otherwise.
    #[inline(always)]
    fn hits_most_recent(&mut self, addr: u64, size: u32) -> Option<usize> {
        let (slot, mask) = self.most_recent(addr, size)?;
        self.use_slot(slot, 1, mask);
        Some(slot)
    }

    /// The slot of the line an access of `size` bytes at `addr` hits when
    /// it touches one set and hits the most recently used line there, with
    /// the bytes it touches as a usage mask; `None` otherwise.
    #[inline(always)]
    fn most_recent(&self, addr: u64, size: u32) -> Option<(usize, u32)> {
        let line_mask = u64::from(self.line_size - 1);
        let last = addr.wrapping_add(u64::from(size.clamp(1, self.line_size)) - 1);
        if self.set_of(addr) != self.set_of(last) {
            return None;
        }
        let start = self.set_of(addr) as usize * self.assoc;
        let &way = self.tags.get(start)?;
        if way & self.tag_mask != addr & self.tag_mask {
            return None;
        }
        let (first_byte, last_byte) = ((addr & line_mask) as usize, (last & line_mask) as usize);
        let mask = self.start_mask.get(first_byte)? & self.end_mask.get(last_byte)?;
        Some((start + (way & !self.tag_mask) as usize, mask))
    }

    /// `count` more uses of the line in `slot`, touching the bytes of `mask`.
    #[inline(always)]
    fn use_slot(&mut self, slot: usize, count: u32, mask: u32) {
        if let Some(stored) = self.usage.get_mut(slot) {
            let usage = Usage::load(*stored);
            *stored = Usage {
                count: usage.count.wrapping_add(count),
                mask: usage.mask | mask,
                owner: usage.owner,
            }
            .store();
        }
    }

    /// Looks up the line of `addr` in `set`, moving it (or the new line) to the MRU
    /// position.
    #[inline]
    fn lookup(&mut self, set: u64, addr: u64) -> Lookup {
        let tag = addr & self.tag_mask;
        let slot_mask = !self.tag_mask;
        let start = set as usize * self.assoc;
        self.make_ready(set as usize);
        let ways = &mut self.tags[start..start + self.assoc];
        if ways[0] & self.tag_mask == tag {
            return Lookup::Hit(start + (ways[0] & slot_mask) as usize);
        }
        if let Some(found) = ways[1..].iter().position(|&t| t & self.tag_mask == tag) {
            let way = found + 1;
            let entry = ways[way];
            ways.copy_within(0..way, 1);
            ways[0] = entry;
            return Lookup::Hit(start + (entry & slot_mask) as usize);
        }
        let last = ways.len() - 1;
        let slot = ways[last] & slot_mask;
        ways.copy_within(0..last, 1);
        ways[0] = tag | slot;
        Lookup::Miss(start + slot as usize)
    }

    /// `SpLoss` of a line with this mask.
    #[inline]
    fn loss(&self, mask: u32) -> u64 {
        (u64::from(32 - mask.count_ones()) * u64::from(self.line_size)) >> 5
    }
}

/// The usage mask [`UseHierarchy::fetch_mask`] gives with I1 lines of
/// `line_size` bytes (a power of two), for a caller without the hierarchy
/// (it builds the tables each time).
pub fn fetch_mask_of(line_size: u32, addr: u64, len: u32) -> u32 {
    let (start_mask, end_mask) = use_masks(line_size);
    mask_within(&start_mask, &end_mask, line_size, addr, len)
}

/// The usage mask of the bytes `len` bytes at `addr` touch in their line
/// of `line_size` bytes, with the tables `start_mask` and `end_mask` of
/// [`use_masks`].
#[inline]
fn mask_within(start_mask: &[u32], end_mask: &[u32], line_size: u32, addr: u64, len: u32) -> u32 {
    let line_mask = u64::from(line_size - 1);
    let last = addr.wrapping_add(u64::from(len.clamp(1, line_size)) - 1);
    start_mask[(addr & line_mask) as usize] & end_mask[(last & line_mask) as usize]
}

/// Callgrind's `line_start_mask` and `line_end_mask`: for each byte offset, the
/// mask bits from that byte to the end of the line, and from the start of the line
/// to that byte.
fn use_masks(line_size: u32) -> (Box<[u32]>, Box<[u32]>) {
    let line = line_size as usize;
    let mut start = vec![0u32; line];
    let mut end = vec![0u32; line];
    let (mut start_val, mut end_val) = (!0u32, !0u32);
    if line_size < 32 {
        let bits_per_byte = 32 / line_size;
        let mut start_bits = (1u32 << bits_per_byte) - 1;
        let mut end_bits = start_bits << (32 - bits_per_byte);
        for i in 0..line {
            start[i] = start_val;
            start_val &= !start_bits;
            start_bits = start_bits.checked_shl(bits_per_byte).unwrap_or(0);
            end[line - i - 1] = end_val;
            end_val &= !end_bits;
            end_bits = end_bits.checked_shr(bits_per_byte).unwrap_or(0);
        }
    } else {
        let bytes_per_bit = line / 32;
        let (mut start_bit, mut end_bit) = (1u32, 1u32 << 31);
        for i in 0..line {
            start[i] = start_val;
            end[line - i - 1] = end_val;
            if (i + 1) % bytes_per_bit == 0 {
                start_val &= !start_bit;
                end_val &= !end_bit;
                start_bit <<= 1;
                end_bit >>= 1;
            }
        }
    }
    (start.into_boxed_slice(), end.into_boxed_slice())
}

/// Which first-level cache an access goes to.
#[derive(Clone, Copy)]
enum L1 {
    I,
    D,
}

/// The I1/D1/LL hierarchy with cache-use bookkeeping.
#[derive(Clone, Debug)]
pub struct UseHierarchy {
    config: CachesConfig,
    i1: UseCache,
    d1: UseCache,
    ll: UseCache,
    min_line: u32,
    collect: bool,
    charges: Vec<Charge>,
    lines: Vec<LineChange>,
    /// The I1 line the last fetch touched last (its address) and its usage
    /// slot: the most recently used line of its set (only fetches touch
    /// I1), so a fetch within it is a hit that only counts its use.
    last_fetched: Option<(u64, usize)>,
}

impl UseHierarchy {
    /// Empty caches of the given geometry, collecting.
    pub fn new(config: &CachesConfig) -> Result<UseHierarchy, CacheUseError> {
        Ok(UseHierarchy {
            config: *config,
            i1: UseCache::new(CacheLevel::I1, config.i1, true)?,
            d1: UseCache::new(CacheLevel::D1, config.d1, true)?,
            ll: UseCache::new(CacheLevel::LL, config.ll, false)?,
            min_line: config.min_line_size(),
            collect: true,
            charges: Vec::new(),
            lines: Vec::new(),
            last_fetched: None,
        })
    }

    /// The geometry.
    pub fn config(&self) -> &CachesConfig {
        &self.config
    }

    /// Turns collection on or off (Callgrind's `--collect-atstart`,
    /// `--toggle-collect`, `CALLGRIND_TOGGLE_COLLECT`). While off, evictions charge
    /// nothing and L1 usage is not passed on to LL; the caches still work.
    pub fn set_collect(&mut self, collect: bool) {
        self.collect = collect;
    }

    /// Whether collection is on.
    pub fn collecting(&self) -> bool {
        self.collect
    }

    /// Empties all caches and forgets all usage without charging anything (as
    /// Callgrind does when instrumentation is switched on or off). Pending charges
    /// stay in [`UseHierarchy::drain_charges`]; every owned line is reported
    /// lost in [`UseHierarchy::drain_line_changes`].
    pub fn clear(&mut self) {
        for cache in [&self.i1, &self.d1, &self.ll] {
            for slot in cache.owned_slots() {
                self.lines.push(LineChange {
                    owner: cache.usage(slot).owner,
                    loaded: false,
                });
            }
        }
        self.i1.clear();
        self.d1.clear();
        self.ll.clear();
        self.last_fetched = None;
    }

    /// The charges produced since the last call, oldest first.
    pub fn drain_charges(&mut self) -> std::vec::Drain<'_, Charge> {
        self.charges.drain(..)
    }

    /// The lines that changed hands since the last call, in order.
    pub fn drain_line_changes(&mut self) -> std::vec::Drain<'_, LineChange> {
        self.lines.drain(..)
    }

    /// Whether charges or line changes are waiting to be drained.
    #[inline]
    pub fn has_reports(&self) -> bool {
        !self.charges.is_empty() || !self.lines.is_empty()
    }

    /// The charges produced so far, without removing them.
    pub fn pending_charges(&self) -> &[Charge] {
        &self.charges
    }

    /// The line changes so far, without removing them.
    pub fn pending_line_changes(&self) -> &[LineChange] {
        &self.lines
    }

    /// Forgets the charges and line changes so far (taken with
    /// [`UseHierarchy::pending_charges`] and
    /// [`UseHierarchy::pending_line_changes`]).
    pub fn clear_reports(&mut self) {
        self.charges.clear();
        self.lines.clear();
    }

    /// Fetches the `len` bytes of one instruction at `addr`, loaded on behalf of
    /// `owner`.
    #[inline]
    pub fn fetch(&mut self, addr: u64, len: u32, owner: Owner) -> Outcome {
        self.fetch_for(addr, len, &mut || owner)
    }

    /// [`UseHierarchy::fetch`] with the owner asked of `owner` only when a
    /// line is loaded (most accesses load none). A fetch within the line
    /// fetched last, or within the most recently used line of its set, is
    /// decided inline, anything else out of line.
    #[inline(always)]
    pub fn fetch_for(&mut self, addr: u64, len: u32, owner: &mut dyn FnMut() -> Owner) -> Outcome {
        let line_mask = u64::from(self.i1.line_size - 1);
        let last = addr.wrapping_add(u64::from(len.clamp(1, self.i1.line_size)) - 1);
        if let Some((line, _)) = self.last_fetched {
            if addr & !line_mask == line && last & !line_mask == line {
                self.fetch_again(1, self.fetch_mask(addr, len));
                return Outcome::L1Hit;
            }
        }
        if let Some(slot) = self.i1.hits_most_recent(addr, len) {
            self.last_fetched = Some((last & !line_mask, slot));
            return Outcome::L1Hit;
        }
        self.fetch_beyond_most_recent(addr, len, owner)
    }

    /// [`UseHierarchy::fetch_for`] past its inline checks.
    #[inline(never)]
    fn fetch_beyond_most_recent(
        &mut self,
        addr: u64,
        len: u32,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        let line_mask = u64::from(self.i1.line_size - 1);
        let last = addr.wrapping_add(u64::from(len.clamp(1, self.i1.line_size)) - 1);
        let outcome = self.access(L1::I, addr, len, owner);
        let i1 = &self.i1;
        let start = i1.set_of(last) as usize * i1.assoc;
        self.last_fetched = i1
            .tags
            .get(start)
            .map(|&tag| (last & !line_mask, start + (tag & !i1.tag_mask) as usize));
        outcome
    }

    /// `times` rounds of fetches at `points`, each `(addr, len, count,
    /// mask)`: a fetch of `len` bytes at `addr` ([`UseHierarchy::fetch_for`])
    /// and `count` more within its line touching the bytes of `mask`
    /// ([`UseHierarchy::fetch_again`]). When each first fetch is within the
    /// most recently used line of its set, every fetch of every round hits
    /// and changes no order, so the rounds only add to the lines' use;
    /// `false`, having done nothing, when one is not.
    pub fn fetch_hits_again(
        &mut self,
        points: impl Iterator<Item = (u64, u32, u32, u32)> + Clone,
        times: u32,
    ) -> bool {
        let i1 = &self.i1;
        if !points
            .clone()
            .all(|(addr, len, _, _)| i1.most_recent(addr, len).is_some())
        {
            return false;
        }
        let line_mask = u64::from(self.i1.line_size - 1);
        for (addr, len, count, mask) in points {
            if let Some((slot, first)) = self.i1.most_recent(addr, len) {
                let uses = times.wrapping_mul(count.wrapping_add(1));
                self.i1
                    .use_slot(slot, uses, first | if count > 0 { mask } else { 0 });
                let last = addr.wrapping_add(u64::from(len.clamp(1, self.i1.line_size)) - 1);
                self.last_fetched = Some((last & !line_mask, slot));
            }
        }
        true
    }

    /// The bytes of an I1 line a fetch of `len` bytes at `addr` within
    /// that line touches, as a usage mask.
    pub fn fetch_mask(&self, addr: u64, len: u32) -> u32 {
        let i1 = &self.i1;
        mask_within(&i1.start_mask, &i1.end_mask, i1.line_size, addr, len)
    }

    /// `count` more fetches wholly within the line fetched last, touching
    /// the bytes of `mask` ([`UseHierarchy::fetch_mask`]): what as many
    /// calls of [`UseHierarchy::fetch_for`] do (each hits that line).
    #[inline]
    pub fn fetch_again(&mut self, count: u32, mask: u32) {
        if count == 0 {
            return;
        }
        if let Some((_, slot)) = self.last_fetched {
            self.i1.use_slot(slot, count, mask);
        }
    }

    /// Reads or writes `size` bytes at `addr` for `owner` (both behave the same);
    /// `size` is clamped to the smallest line size.
    #[inline]
    pub fn data(&mut self, addr: u64, size: u32, owner: Owner) -> Outcome {
        self.data_for(addr, size, &mut || owner)
    }

    /// [`UseHierarchy::data`] with the owner asked of `owner` only when a
    /// line is loaded. A hit on D1's most recently used line of its set is
    /// decided inline, anything else out of line.
    #[inline(always)]
    pub fn data_for(&mut self, addr: u64, size: u32, owner: &mut dyn FnMut() -> Owner) -> Outcome {
        let size = size.min(self.min_line);
        if self.d1.hits_most_recent(addr, size).is_some() {
            return Outcome::L1Hit;
        }
        self.data_beyond_most_recent(addr, size, owner)
    }

    /// [`UseHierarchy::data_for`] past its inline check.
    #[inline(never)]
    fn data_beyond_most_recent(
        &mut self,
        addr: u64,
        size: u32,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        self.access(L1::D, addr, size, owner)
    }

    /// Charges every resident line that has an owner, as Callgrind does at the end
    /// of the run: I1, then D1 (passing their usage to LL), then LL. Afterwards no
    /// line has an owner. While collection is off nothing is charged, but the
    /// lines still leave their owners.
    pub fn flush(&mut self) {
        for which in [L1::I, L1::D] {
            for idx in self.l1(which).owned_slots() {
                self.evict_l1(which, idx, 0, NO_OWNER);
            }
        }
        for idx in self.ll.owned_slots() {
            self.evict_ll(idx, NO_OWNER);
        }
    }

    #[inline]
    fn l1(&mut self, which: L1) -> &mut UseCache {
        match which {
            L1::I => &mut self.i1,
            L1::D => &mut self.d1,
        }
    }

    /// One access to I1 or D1, with Callgrind's straddling rule: the two lines are
    /// looked up separately and only missing lines go to LL.
    #[inline]
    fn access(
        &mut self,
        which: L1,
        addr: u64,
        size: u32,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        let c = self.l1(which);
        let line_mask = u64::from(c.line_size - 1);
        let size = size.clamp(1, c.line_size);
        let last = addr.wrapping_add(u64::from(size) - 1);
        let (set1, set2) = (c.set_of(addr), c.set_of(last));
        let start = c.start_mask[(addr & line_mask) as usize];
        let end = c.end_mask[(last & line_mask) as usize];
        if set1 == set2 {
            return self.line(which, set1, addr, start & end, owner);
        }
        // The second line is the next set's (Valgrind panics otherwise, which a
        // clamped size cannot cause).
        let first = self.line(which, set1, addr, start, owner);
        let second = self.line(which, set2, last, end, owner);
        match (first, second) {
            (_, Outcome::L1Hit) => first,
            (Outcome::LlMiss, _) | (_, Outcome::LlMiss) => Outcome::LlMiss,
            _ => Outcome::LlHit,
        }
    }

    /// One line of an L1 access.
    #[inline]
    fn line(
        &mut self,
        which: L1,
        set: u64,
        addr: u64,
        mask: u32,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        let c = self.l1(which);
        match c.lookup(set, addr) {
            Lookup::Hit(idx) => {
                c.use_slot(idx, 1, mask);
                Outcome::L1Hit
            }
            Lookup::Miss(idx) => self.l1_miss(which, idx, addr, mask, owner),
        }
    }

    /// [`UseHierarchy::line`] when the line missed L1 and replaces the line
    /// in slot `idx` (out of line: most accesses hit).
    #[inline(never)]
    fn l1_miss(
        &mut self,
        which: L1,
        idx: usize,
        addr: u64,
        mask: u32,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        let memline = addr & !u64::from(self.l1(which).line_size - 1);
        self.evict_l1(which, idx, mask, owner());
        if memline == 0 {
            return Outcome::LlHit;
        }
        self.ll_access(which, idx, memline, owner)
    }

    /// Charges the L1 line in slot `idx` (if it was used and owned), passes its
    /// usage to its LL line, and installs the new line's usage.
    fn evict_l1(&mut self, which: L1, idx: usize, mask: u32, owner: Owner) {
        let collect = self.collect;
        let c = match which {
            L1::I => &mut self.i1,
            L1::D => &mut self.d1,
        };
        let old = c.usage(idx);
        if old.count > 0 && collect && old.owner != NO_OWNER {
            let loss = c.loss(old.mask);
            self.charges.push(Charge {
                owner: old.owner,
                event: UseEvent::AcCost1,
                amount: u64::from(1000 / old.count),
            });
            self.charges.push(Charge {
                owner: old.owner,
                event: UseEvent::SpLoss1,
                amount: loss,
            });
            self.ll.use_slot(c.deps[idx] as usize, old.count, old.mask);
        }
        c.set_usage(
            idx,
            Usage {
                count: 1,
                mask,
                owner,
            },
        );
        self.record_change(old.owner, owner);
    }

    /// Reports that a line went from `old` to `new` owner.
    #[inline]
    fn record_change(&mut self, old: Owner, new: Owner) {
        if old != NO_OWNER {
            self.lines.push(LineChange {
                owner: old,
                loaded: false,
            });
        }
        if new != NO_OWNER {
            self.lines.push(LineChange {
                owner: new,
                loaded: true,
            });
        }
    }

    /// Looks up `memline` in LL for the L1 line in slot `l1_idx`.
    fn ll_access(
        &mut self,
        which: L1,
        l1_idx: usize,
        memline: u64,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        let set = self.ll.set_of(memline);
        let (idx, outcome) = match self.ll.lookup(set, memline) {
            Lookup::Hit(idx) => (idx, Outcome::LlHit),
            Lookup::Miss(idx) => {
                self.evict_ll(idx, owner());
                (idx, Outcome::LlMiss)
            }
        };
        self.l1(which).deps[l1_idx] = idx as u32;
        outcome
    }

    /// Charges the LL line in slot `idx` (if it was used and owned) and installs an
    /// unused line owned by `owner`.
    fn evict_ll(&mut self, idx: usize, owner: Owner) {
        let old = self.ll.usage(idx);
        if old.count > 0 && self.collect && old.owner != NO_OWNER {
            self.charges.push(Charge {
                owner: old.owner,
                event: UseEvent::AcCost2,
                amount: u64::from(1000 / old.count),
            });
            self.charges.push(Charge {
                owner: old.owner,
                event: UseEvent::SpLoss2,
                amount: self.ll.loss(old.mask),
            });
        }
        self.ll.set_usage(
            idx,
            Usage {
                count: 0,
                mask: 0,
                owner,
            },
        );
        self.record_change(old.owner, owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use UseEvent::{AcCost1, AcCost2, SpLoss1, SpLoss2};

    /// I1 = D1: 128 B, 2-way, 32 B lines (2 sets, tags above bit 6); LL: 256 B,
    /// 2-way, 32 B lines (4 sets, tags above bit 7). One mask bit per byte.
    fn small() -> UseHierarchy {
        let l1 = CacheConfig::new(128, 2, 32);
        UseHierarchy::new(&CachesConfig {
            i1: l1,
            d1: l1,
            ll: CacheConfig::new(256, 2, 32),
        })
        .unwrap()
    }

    #[test]
    fn fetch_mask_of_a_line_size_is_the_hierarchys() {
        let h = small();
        for (addr, len) in [(0x40, 4), (0x5d, 3), (0x5f, 8), (0x7e, 2)] {
            assert_eq!(fetch_mask_of(32, addr, len), h.fetch_mask(addr, len));
        }
        assert_eq!(fetch_mask_of(32, 0x40, 4), 0xf);
    }

    fn charges(h: &mut UseHierarchy) -> Vec<(Owner, UseEvent, u64)> {
        h.drain_charges()
            .map(|c| (c.owner, c.event, c.amount))
            .collect()
    }

    /// The next of a deterministic sequence of pseudo-random numbers
    /// (a linear congruential generator).
    fn next_random(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state
    }

    #[test]
    fn fetches_within_the_last_fetched_line_count_as_data_accesses_do() {
        // I1 and D1 have the same geometry: the same accesses as fetches
        // (which skip the look-up within the line fetched last) and as
        // data reads (which never do) charge the same.
        let (mut fetched, mut read) = (small(), small());
        let mut state = 7u64;
        for owner in 0..4000u64 {
            let state = next_random(&mut state);
            let addr = 0x1000 + (state >> 33) % 0x300;
            let len = 1 + (state >> 20) as u32 % 15;
            for step in 0..3 {
                let at = addr + 5 * step;
                assert_eq!(fetched.fetch(at, len, owner), read.data(at, len, owner));
            }
        }
        fetched.flush();
        read.flush();
        assert_eq!(charges(&mut fetched), charges(&mut read));
        let changes = |h: &mut UseHierarchy| {
            h.drain_line_changes()
                .map(|c| (c.owner, c.loaded))
                .collect::<Vec<_>>()
        };
        assert_eq!(changes(&mut fetched), changes(&mut read));
    }

    #[test]
    fn fetching_again_within_the_last_line_charges_as_the_fetches_would() {
        // Runs of instructions within one line: each fetched, against the
        // first fetched and the others added with `fetch_again`.
        let (mut each, mut again) = (small(), small());
        let mut state = 11u64;
        for owner in 0..4000u64 {
            let state = next_random(&mut state);
            let addr = 0x1000 + (state >> 33) % 0x300;
            let len = 1 + (state >> 20) as u32 % 4;
            let line_end = (addr | 15) + 1;
            let followers: Vec<u64> = (1..4)
                .map(|step| addr + u64::from(len) * step)
                .filter(|&at| at + u64::from(len) <= line_end)
                .collect();
            assert_eq!(each.fetch(addr, len, owner), again.fetch(addr, len, owner));
            let mut mask = 0;
            for &at in &followers {
                assert_eq!(each.fetch(at, len, owner), Outcome::L1Hit);
                mask |= again.fetch_mask(at, len);
            }
            again.fetch_again(followers.len() as u32, mask);
            let data = 0x4000 + (state >> 40) % 0x200;
            assert_eq!(each.data(data, 4, owner), again.data(data, 4, owner));
        }
        each.flush();
        again.flush();
        assert_eq!(charges(&mut each), charges(&mut again));
    }

    #[test]
    fn fetches_that_hit_again_add_their_uses_as_the_rounds_would() {
        // Blocks of one to three lines (I1: two sets of two 32-byte
        // lines), each line with a 2-byte fetch and up to three more: run
        // once, then again in rounds, one fetch at a time against at once.
        let (mut each, mut batched) = (small(), small());
        let mut state = 7u64;
        let mut at_once = 0;
        for owner in 0..2000u64 {
            let random = next_random(&mut state);
            let base = 0x1000 + ((random >> 33) % 0x20) * 32;
            let lines = 1 + (random >> 20) % 3;
            let points: Vec<(u64, u32, u32)> = (0..lines)
                .map(|line| {
                    let addr = base + 32 * line + 2 * ((random >> (8 + line)) % 4);
                    (addr, 2, ((random >> (12 + 2 * line)) % 4) as u32)
                })
                .collect();
            let round = |h: &mut UseHierarchy| {
                for &(addr, len, count) in &points {
                    h.fetch(addr, len, owner);
                    for follower in 1..=u64::from(count) {
                        assert_eq!(h.fetch(addr + 2 * follower, len, owner), Outcome::L1Hit);
                    }
                }
            };
            round(&mut each);
            round(&mut batched);
            let times = 1 + (random >> 40) as u32 % 4;
            let masks: Vec<(u64, u32, u32, u32)> = points
                .iter()
                .map(|&(addr, len, count)| {
                    let followers = (1..=u64::from(count)).map(|k| addr + 2 * k);
                    let mask = followers.fold(0, |mask, at| mask | batched.fetch_mask(at, len));
                    (addr, len, count, mask)
                })
                .collect();
            if batched.fetch_hits_again(masks.iter().copied(), times) {
                at_once += 1;
            } else {
                (0..times).for_each(|_| round(&mut batched));
            }
            (0..times).for_each(|_| round(&mut each));
            let data = 0x4000 + (random >> 48) % 0x200;
            assert_eq!(each.data(data, 4, owner), batched.data(data, 4, owner));
        }
        assert!(at_once > 100 && at_once < 1900, "{at_once} rounds at once");
        each.flush();
        batched.flush();
        assert_eq!(charges(&mut each), charges(&mut batched));
    }

    #[test]
    fn every_owned_line_is_reported_loaded_and_lost_once() {
        type Held = std::collections::HashMap<Owner, i64>;
        fn count(h: &mut UseHierarchy, held: &mut Held) {
            for change in h.drain_line_changes() {
                *held.entry(change.owner).or_default() += if change.loaded { 1 } else { -1 };
            }
        }
        let mut h = small();
        let mut held = Held::new();
        h.data(0x100, 4, 1);
        count(&mut h, &mut held);
        h.set_collect(false);
        h.data(0x140, 4, 2);
        h.data(0x180, 4, 3);
        h.fetch(0x1000, 4, 3);
        count(&mut h, &mut held);
        h.flush();
        count(&mut h, &mut held);
        assert!(held.values().all(|&n| n == 0), "flushed: {held:?}");
        h.set_collect(true);
        h.data(0x100, 4, 4);
        h.clear();
        count(&mut h, &mut held);
        assert!(held.values().all(|&n| n == 0), "cleared: {held:?}");
    }

    #[test]
    fn masks_follow_callgrind() {
        let (s, e) = use_masks(64);
        assert_eq!(s[5] & e[8], 0b11100); // bytes 5..=8 → bits 2..=4
        assert_eq!(s[0] & e[63], !0);
        let (s, e) = use_masks(16);
        assert_eq!(s[1] & e[2], 0b11_1100); // two bits per byte
        assert_eq!(s[15], 0xc000_0000);
        let (s, e) = use_masks(128);
        assert_eq!(s[5] & e[8], 0b110); // one bit per 4 bytes
        let (s, e) = use_masks(32);
        assert_eq!(s[31] & e[31], 1 << 31);
        assert_eq!(e[0], 1);
    }

    #[test]
    fn eviction_and_flush_charges() {
        let mut h = small();
        let (a, b, c, d) = (1, 2, 3, 4);
        // A loads 0x100 (D1 set 0, LL set 0): misses both.
        assert_eq!(h.data(0x100, 4, a), Outcome::LlMiss);
        assert_eq!(h.data(0x104, 4, a), Outcome::L1Hit); // count 2, 8 bytes used
                                                         // B loads 0x140 (D1 set 0, LL set 2).
        assert_eq!(h.data(0x140, 8, b), Outcome::LlMiss);
        assert!(charges(&mut h).is_empty());
        // C loads 0x180 (D1 set 0): evicts A's line: 1000/2, 24 bytes unused.
        // A's usage goes to its LL line. LL set 0 evicts an unowned initial line.
        assert_eq!(h.data(0x180, 1, c), Outcome::LlMiss);
        assert_eq!(charges(&mut h), [(a, AcCost1, 500), (a, SpLoss1, 24)]);
        // D loads 0x200 (D1 set 0, LL set 0): evicts B's line from D1 and A's
        // line from LL (count 2 and mask from A's L1 eviction).
        assert_eq!(h.data(0x200, 1, d), Outcome::LlMiss);
        assert_eq!(
            charges(&mut h),
            [
                (b, AcCost1, 1000),
                (b, SpLoss1, 24),
                (a, AcCost2, 500),
                (a, SpLoss2, 24)
            ]
        );
        // At the end: D1 slots in order (D, then C), then LL slots (C, D, B).
        h.flush();
        assert_eq!(
            charges(&mut h),
            [
                (d, AcCost1, 1000),
                (d, SpLoss1, 31),
                (c, AcCost1, 1000),
                (c, SpLoss1, 31),
                (c, AcCost2, 1000),
                (c, SpLoss2, 31),
                (d, AcCost2, 1000),
                (d, SpLoss2, 31),
                (b, AcCost2, 1000),
                (b, SpLoss2, 24),
            ]
        );
        // Nothing is owned any more.
        h.flush();
        assert!(charges(&mut h).is_empty());
    }

    #[test]
    fn straddle_sends_only_missing_lines_to_ll() {
        let mut h = small();
        assert_eq!(h.data(0x100, 1, 1), Outcome::LlMiss); // D1 set 0
                                                          // Bytes 0x11e..=0x121: line 0x100 hits (bits 30, 31), line 0x120 (set 1)
                                                          // misses D1 and LL.
        assert_eq!(h.data(0x11e, 4, 1), Outcome::LlMiss);
        assert_eq!(h.data(0x11e, 4, 1), Outcome::L1Hit);
        // Evict line 0x120 from D1 set 1: count 2, bytes 0 and 1 used.
        h.data(0x160, 1, 2);
        h.data(0x1a0, 1, 3);
        assert_eq!(charges(&mut h), [(1, AcCost1, 500), (1, SpLoss1, 30)]);
        // Line 0x100: count 3, bytes 0, 30, 31 used.
        h.flush();
        let first: Vec<_> = charges(&mut h).into_iter().take(2).collect();
        assert_eq!(first, [(1, AcCost1, 333), (1, SpLoss1, 29)]);
    }

    #[test]
    fn initial_tags_are_zero() {
        let mut h = small();
        // Below 64 (L1 sets × line): resident at the start, never charged.
        assert_eq!(h.fetch(0x20, 4, 1), Outcome::L1Hit);
        // 0x40 misses L1 but is below 128 in LL: an LL hit.
        assert_eq!(h.fetch(0x44, 4, 1), Outcome::LlHit);
        assert_eq!(h.fetch(0x84, 4, 1), Outcome::LlMiss);
        h.flush();
        // Only the lines loaded on a miss have an owner: 0x40 and 0x80 in I1 and
        // 0x80 in LL (0x40's LL line was an initial one, unowned).
        let all = charges(&mut h);
        assert_eq!(
            all,
            [
                (1, AcCost1, 1000),
                (1, SpLoss1, 28),
                (1, AcCost1, 1000),
                (1, SpLoss1, 28),
                (1, AcCost2, 1000),
                (1, SpLoss2, 28),
            ]
        );
    }

    #[test]
    fn line_zero_skips_ll() {
        let mut h = small();
        // Push the initial line holding address 0 out of D1 set 0 (2 ways).
        h.data(0x100, 1, 1);
        h.data(0x140, 1, 1);
        // Address 0 misses D1 and is reported as an LL hit without an LL lookup.
        assert_eq!(h.data(0x8, 1, 2), Outcome::LlHit);
    }

    #[test]
    fn no_charges_while_not_collecting() {
        let mut h = small();
        h.set_collect(false);
        assert!(!h.collecting());
        h.data(0x100, 1, 1);
        h.data(0x140, 1, 1);
        h.data(0x180, 1, 1); // evicts 0x100: no charge, no propagation
                             // Still off: charges nothing, but 0x140 and 0x180 leave D1 and LL
                             // loses its owners, so nothing is left for a later flush.
        h.flush();
        assert!(charges(&mut h).is_empty());
        h.set_collect(true);
        h.flush();
        assert!(charges(&mut h).is_empty());
    }

    #[test]
    fn a_flush_charges_d1_usage_into_ll() {
        let mut h = small();
        h.data(0x100, 1, 1);
        h.data(0x140, 1, 1);
        h.data(0x180, 1, 1); // evicts 0x100 while collecting
        h.flush();
        // 0x140 and 0x180 in D1 and the evicted 0x100 charge AcCost1; the three
        // LL lines got usage (0x100's at its eviction, the others at the flush).
        let all = charges(&mut h);
        assert_eq!(all.iter().filter(|c| c.1 == AcCost1).count(), 3);
        assert_eq!(all.iter().filter(|c| c.1 == AcCost2).count(), 3);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut h = small();
        h.data(0x100, 1, 1);
        h.clear();
        h.flush();
        assert!(h.pending_charges().is_empty());
        assert_eq!(h.data(0x100, 1, 1), Outcome::LlMiss);
        assert_eq!(h.config().d1.line_size, 32);
    }

    #[test]
    fn a_stored_usage_of_zeros_is_an_unused_line_and_every_usage_keeps() {
        let unused = Usage::load([0; 2]);
        assert_eq!((unused.count, unused.mask, unused.owner), (0, 0, NO_OWNER));
        for (count, mask, owner) in [
            (1, 0x8000_0001, 0),
            (u32::MAX, u32::MAX, 7),
            (3, 0, NO_OWNER),
        ] {
            let usage = Usage::load(Usage { count, mask, owner }.store());
            assert_eq!((usage.count, usage.mask, usage.owner), (count, mask, owner));
        }
    }

    /// Every set of every cache of `h` set up.
    fn all_ready(h: &mut UseHierarchy) {
        for cache in [&mut h.i1, &mut h.d1, &mut h.ll] {
            for set in 0..cache.sets() {
                cache.make_ready(set);
            }
        }
    }

    #[test]
    fn sets_written_when_first_reached_behave_as_sets_written_at_the_start() {
        // I1 = D1: 256 B, 2-way, 32 B lines (4 sets); LL: 1 KB, 4-way (8 sets).
        let config = CachesConfig {
            i1: CacheConfig::new(256, 2, 32),
            d1: CacheConfig::new(256, 2, 32),
            ll: CacheConfig::new(1024, 4, 32),
        };
        let mut lazy = UseHierarchy::new(&config).unwrap();
        let mut eager = lazy.clone();
        all_ready(&mut eager);
        let mut state = 11;
        for step in 0..20_000u64 {
            let random = next_random(&mut state);
            // Addresses below 4 KB: many lines with tag 0, the initial one.
            let addr = (random >> 20) % 4096;
            let (size, owner) = ((random >> 8) as u32 % 8 + 1, step);
            let (a, b) = match random % 8 {
                0..=2 => (
                    lazy.fetch(addr, size, owner),
                    eager.fetch(addr, size, owner),
                ),
                3..=6 => (lazy.data(addr, size, owner), eager.data(addr, size, owner)),
                _ if step % 1000 == 7 => {
                    lazy.flush();
                    eager.flush();
                    (Outcome::L1Hit, Outcome::L1Hit)
                }
                _ => (lazy.fetch(addr, 1, owner), eager.fetch(addr, 1, owner)),
            };
            assert_eq!(a, b, "step {step}");
            assert_eq!(
                lazy.pending_charges(),
                eager.pending_charges(),
                "step {step}"
            );
            assert_eq!(
                lazy.pending_line_changes(),
                eager.pending_line_changes(),
                "step {step}"
            );
            lazy.clear_reports();
            eager.clear_reports();
        }
        lazy.flush();
        eager.flush();
        assert_eq!(lazy.pending_charges(), eager.pending_charges());
        assert!(!lazy.pending_charges().is_empty());
    }

    #[test]
    fn first_level_sets_are_set_up_at_once_and_ll_sets_at_their_first_lookup() {
        let mut h = small();
        let ready = |cache: &UseCache| -> Vec<usize> {
            (0..cache.sets())
                .filter(|&set| cache.is_ready(set))
                .collect()
        };
        assert_eq!(
            (ready(&h.i1), ready(&h.d1), ready(&h.ll)),
            (vec![0, 1], vec![0, 1], vec![])
        );
        // 0x20 hits I1 (tag 0): LL is not looked up.
        assert_eq!(h.fetch(0x20, 4, 1), Outcome::L1Hit);
        assert_eq!(ready(&h.ll), []);
        // 0x44 misses I1 and hits LL's set 2 (tag 0); 0x84 misses LL's set 0.
        assert_eq!(h.fetch(0x44, 4, 1), Outcome::LlHit);
        assert_eq!(ready(&h.ll), [2]);
        assert_eq!(h.fetch(0x84, 4, 1), Outcome::LlMiss);
        assert_eq!(ready(&h.ll), [0, 2]);
        h.clear();
        assert_eq!((ready(&h.i1), ready(&h.ll)), (vec![0, 1], vec![]));
    }

    #[test]
    fn rejects_assoc_above_tag_bits() {
        let mut config = CachesConfig::DEFAULT;
        config.ll = CacheConfig::new(4096, 256, 16);
        assert!(matches!(
            UseHierarchy::new(&config),
            Err(CacheUseError::AssocTooLarge(CacheLevel::LL, 16))
        ));
        assert_eq!(UseEvent::SpLoss2.name(), "SpLoss2");
    }
}
