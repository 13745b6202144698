//! The iteration order of a CPython 3.11 `set` of `str` under `PYTHONHASHSEED=0`.
//!
//! Why: TextCraft builds its observation from `list(set_of_recipe_lines)`, so the line order
//! and the distractors drawn from such a list depend on string hashes and the set's table
//! layout. With `PYTHONHASHSEED=0` both are deterministic, and this module reproduces them.
//!
//! - `hash(s)` = SipHash-1-3 with a zero key over the string's bytes (ASCII strings are stored
//!   one byte per character), `0` for the empty string, `−1` mapped to `−2`.
//! - The table (setobject.c): 8 slots to start; an insert probes slot `i = hash & mask`, then
//!   the 9 following slots when they fit (`LINEAR_PROBES`), then `perturb >>= 5;
//!   i = (5i + 1 + perturb) & mask`. After an insert, if `5·fill ≥ 3·mask` the table grows to
//!   the smallest power of two `> 4·used` and the old entries are re-inserted in slot order.
//! - Iteration walks the slots in index order.
//!
//! Only insertion is supported (TextCraft never removes from these sets). Non-ASCII strings
//! are rejected because CPython would hash their UCS-2/UCS-4 form.

const LINEAR_PROBES: usize = 9;
const PERTURB_SHIFT: u32 = 5;
const MIN_SIZE: usize = 8;

/// `hash(s)` of CPython 3.11 for an ASCII `str` with `PYTHONHASHSEED=0`.
pub fn py_str_hash(s: &str) -> i64 {
    assert!(
        s.is_ascii(),
        "py_str_hash: only ASCII strings are supported"
    );
    if s.is_empty() {
        return 0;
    }
    let h = siphash13(0, 0, s.as_bytes()) as i64;
    if h == -1 { -2 } else { h }
}

fn siphash13(k0: u64, k1: u64, src: &[u8]) -> u64 {
    let mut v0 = k0 ^ 0x736f_6d65_7073_6575;
    let mut v1 = k1 ^ 0x646f_7261_6e64_6f6d;
    let mut v2 = k0 ^ 0x6c79_6765_6e65_7261;
    let mut v3 = k1 ^ 0x7465_6462_7974_6573;
    let round = |v0: &mut u64, v1: &mut u64, v2: &mut u64, v3: &mut u64| {
        *v0 = v0.wrapping_add(*v1);
        *v2 = v2.wrapping_add(*v3);
        *v1 = v1.rotate_left(13) ^ *v0;
        *v3 = v3.rotate_left(16) ^ *v2;
        *v0 = v0.rotate_left(32);
        *v2 = v2.wrapping_add(*v1);
        *v0 = v0.wrapping_add(*v3);
        *v1 = v1.rotate_left(17) ^ *v2;
        *v3 = v3.rotate_left(21) ^ *v0;
        *v2 = v2.rotate_left(32);
    };
    let mut chunks = src.chunks_exact(8);
    for c in &mut chunks {
        let m = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        v3 ^= m;
        round(&mut v0, &mut v1, &mut v2, &mut v3);
        v0 ^= m;
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let b = ((src.len() as u64) << 56) | u64::from_le_bytes(tail);
    v3 ^= b;
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    v0 ^= b;
    v2 ^= 0xff;
    for _ in 0..3 {
        round(&mut v0, &mut v1, &mut v2, &mut v3);
    }
    (v0 ^ v1) ^ (v2 ^ v3)
}

/// Walks CPython's probe sequence for `hash` (slot `hash & mask`, the following
/// `LINEAR_PROBES` slots when they fit, then `perturb >>= 5; i = 5i + 1 + perturb`) until
/// `visit` answers.
fn probe<R>(hash: i64, mask: usize, mut visit: impl FnMut(usize) -> Option<R>) -> R {
    let mut perturb = hash as u64;
    let mut i = (hash as u64 as usize) & mask;
    loop {
        let probes = if i + LINEAR_PROBES <= mask {
            LINEAR_PROBES
        } else {
            0
        };
        for slot in i..=i + probes {
            if let Some(r) = visit(slot) {
                return r;
            }
        }
        perturb >>= PERTURB_SHIFT;
        i = (i
            .wrapping_mul(5)
            .wrapping_add(1)
            .wrapping_add(perturb as usize))
            & mask;
    }
}

/// An insertion-only set that iterates in CPython's order, for keys whose Python hash is
/// known (`K` equal ⇔ the Python objects are equal).
#[derive(Clone, Debug)]
pub struct PySet<K> {
    /// Slot → index into `items`.
    table: Vec<Option<u32>>,
    items: Vec<(K, i64)>,
}

impl<K: PartialEq + Clone> Default for PySet<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PartialEq + Clone> PySet<K> {
    pub fn new() -> Self {
        Self {
            table: vec![None; MIN_SIZE],
            items: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn contains(&self, key: &K, hash: i64) -> bool {
        self.find(key, hash).is_ok()
    }

    /// `set.add(key)` for a key whose `hash()` is `hash`.
    pub fn insert(&mut self, key: K, hash: i64) {
        let slot = match self.find(&key, hash) {
            Ok(_) => return,
            Err(slot) => slot,
        };
        self.table[slot] = Some(self.items.len() as u32);
        self.items.push((key, hash));
        let mask = self.table.len() - 1;
        // No deletions, so fill == used.
        if self.items.len() * 5 >= mask * 3 {
            self.resize(self.items.len() * 4);
        }
    }

    /// The slot holding `key`, or the first free slot of its probe sequence.
    fn find(&self, key: &K, hash: i64) -> Result<usize, usize> {
        probe(hash, self.table.len() - 1, |slot| match self.table[slot] {
            None => Some(Err(slot)),
            Some(k) => {
                let (item, h) = &self.items[k as usize];
                (*h == hash && item == key).then_some(Ok(slot))
            }
        })
    }

    /// Rebuilds the table at the smallest power of two above `min_used`, re-inserting in
    /// slot order (`set_table_resize` + `set_insert_clean`).
    fn resize(&mut self, min_used: usize) {
        let mut size = MIN_SIZE;
        while size <= min_used {
            size <<= 1;
        }
        let old = std::mem::replace(&mut self.table, vec![None; size]);
        for k in old.into_iter().flatten() {
            let hash = self.items[k as usize].1;
            let slot = probe(hash, size - 1, |slot| {
                self.table[slot].is_none().then_some(slot)
            });
            self.table[slot] = Some(k);
        }
    }

    /// The keys in CPython's iteration order (`list(s)`).
    pub fn iter(&self) -> impl Iterator<Item = &K> + '_ {
        self.table
            .iter()
            .flatten()
            .map(|&k| &self.items[k as usize].0)
    }
}

/// A set of ASCII strings in CPython's order.
#[derive(Clone, Debug, Default)]
pub struct PyStrSet(PySet<String>);

impl PyStrSet {
    pub fn new() -> Self {
        Self(PySet::new())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, s: &str) -> bool {
        self.0.contains(&s.to_owned(), py_str_hash(s))
    }

    pub fn insert(&mut self, s: &str) {
        self.0.insert(s.to_owned(), py_str_hash(s));
    }

    /// The elements in CPython's iteration order (`list(s)`).
    pub fn to_list(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PYTHONHASHSEED=0 python3.11 -c 'print(hash("a"), …)'`, run here.
    #[test]
    fn hashes_match_cpython() {
        assert_eq!(py_str_hash(""), 0);
        assert_eq!(py_str_hash("a"), 4_644_417_185_603_328_019);
        assert_eq!(py_str_hash("oak planks"), -6_761_525_219_028_176_799);
        assert_eq!(py_str_hash("abcdefgh"), 4_574_395_652_268_504_554);
        assert_eq!(
            py_str_hash("craft 4 stick using 2 oak planks"),
            -8_102_240_572_273_051_858
        );
    }

    /// `PYTHONHASHSEED=0 python3.11 -c 'print(list({str(i) for i in range(40)}))'` (order after
    /// two resizes).
    #[test]
    fn order_matches_cpython() {
        let mut s = PyStrSet::new();
        for i in 0..40 {
            s.insert(&i.to_string());
        }
        s.insert("7");
        assert_eq!(s.len(), 40);
        assert_eq!(s.to_list().join(","), ORDER_40);
    }

    const ORDER_40: &str = "38,9,23,8,5,10,15,27,17,7,11,28,22,26,14,24,39,0,37,4,16,33,12,34,25,2,13,21,6,1,3,35,31,20,18,30,32,36,29,19";
}
