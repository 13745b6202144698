//! CPython's `random` module, the parts TextCraft uses: `random.seed(int)`, `random.sample`,
//! `random.shuffle`.
//!
//! Why: TextCraft's reset draws its distractor recipes and line order from Python's global
//! Mersenne Twister; reproducing its observations means reproducing the exact draws.
//!
//! - The generator is MT19937 (Matsumoto & Nishimura 1998) seeded by `init_by_array` with the
//!   seed's absolute value split into little-endian 32-bit words (`[0]` for seed 0).
//! - `_randbelow(n)`: `k = n.bit_length()`, draw `getrandbits(k)` (= the top `k` bits of one
//!   32-bit output) until the value is `< n`.
//! - `shuffle(x)`: for `i` from `len−1` down to 1, swap `x[i]` with `x[_randbelow(i+1)]`.
//! - `sample(pop, k)`: if `n ≤ setsize` (`21`, plus `4^⌈log₄(3k)⌉` when `k > 5`) a partial
//!   Fisher–Yates over a copy (`j = _randbelow(n−i)`, the picked slot refilled from the tail);
//!   otherwise rejection sampling of indices `_randbelow(n)` until unused.

const N: usize = 624;
const M: usize = 397;

/// Python's `random.Random` state (MT19937).
#[derive(Clone)]
pub struct PyRandom {
    mt: [u32; N],
    index: usize,
}

impl PyRandom {
    /// `random.seed(seed)` for a non-negative integer seed.
    pub fn new(seed: u64) -> Self {
        let key: Vec<u32> = if seed >> 32 == 0 {
            vec![seed as u32]
        } else {
            vec![seed as u32, (seed >> 32) as u32]
        };
        // `init_genrand(19650218)` is the same for every seed: compute it once.
        static BASE: std::sync::OnceLock<[u32; N]> = std::sync::OnceLock::new();
        let base = BASE.get_or_init(|| {
            let mut r = PyRandom {
                mt: [0; N],
                index: N,
            };
            r.init_genrand(19_650_218);
            r.mt
        });
        let mut r = PyRandom {
            mt: *base,
            index: N,
        };
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = r.mt[i - 1] ^ (r.mt[i - 1] >> 30);
            r.mt[i] = (r.mt[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                r.mt[0] = r.mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = r.mt[i - 1] ^ (r.mt[i - 1] >> 30);
            r.mt[i] = (r.mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                r.mt[0] = r.mt[N - 1];
                i = 1;
            }
        }
        r.mt[0] = 0x8000_0000;
        r
    }

    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..N {
            self.mt[i] = 1_812_433_253u32
                .wrapping_mul(self.mt[i - 1] ^ (self.mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        self.index = N;
    }

    /// One 32-bit output (`genrand_uint32`).
    pub fn next_u32(&mut self) -> u32 {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        if self.index >= N {
            // The reference twist, with its index arithmetic split into ranges (no `% N`).
            let mix = |a: u32, b: u32, c: u32| {
                let y = (a & UPPER) | (b & LOWER);
                c ^ (y >> 1) ^ if y & 1 == 1 { MATRIX_A } else { 0 }
            };
            let mt = &mut self.mt;
            for k in 0..N - M {
                mt[k] = mix(mt[k], mt[k + 1], mt[k + M]);
            }
            for k in N - M..N - 1 {
                mt[k] = mix(mt[k], mt[k + 1], mt[k + M - N]);
            }
            mt[N - 1] = mix(mt[N - 1], mt[0], mt[M - 1]);
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `getrandbits(k)` for `1 ≤ k ≤ 32`.
    fn getrandbits(&mut self, k: u32) -> u32 {
        debug_assert!((1..=32).contains(&k));
        self.next_u32() >> (32 - k)
    }

    /// `_randbelow(n)` for `1 ≤ n < 2³²`.
    pub fn randbelow(&mut self, n: usize) -> usize {
        assert!(
            n > 0 && n <= u32::MAX as usize,
            "randbelow: n = {n} out of range"
        );
        let k = usize::BITS - n.leading_zeros();
        loop {
            let r = self.getrandbits(k) as usize;
            if r < n {
                return r;
            }
        }
    }

    /// `random.random()`: 53 random bits in `[0, 1)`.
    pub fn random(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `random.choice(items)`; `None` for an empty slice.
    pub fn choice<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.randbelow(items.len())])
    }

    /// `random.shuffle(items)`.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.randbelow(i + 1);
            items.swap(i, j);
        }
    }

    /// `random.sample(population, k)`; panics if `k > population.len()` (Python raises).
    pub fn sample<T: Clone>(&mut self, population: &[T], k: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(k);
        self.sample_into(population, k, &mut out);
        out
    }

    /// [`PyRandom::sample`], appending to `out` (no allocation for small populations).
    pub fn sample_into<T: Clone>(&mut self, population: &[T], k: usize, out: &mut Vec<T>) {
        let n = population.len();
        assert!(k <= n, "sample larger than population");
        let mut setsize = 21usize;
        if k > 5 {
            // 4 ** ceil(log(3k, 4)), as floating point in CPython.
            let e = ((k as f64 * 3.0).ln() / 4f64.ln()).ceil() as u32;
            setsize += 4usize.pow(e);
        }
        if n <= setsize {
            // Partial Fisher–Yates over the indices; on the stack when they fit.
            let mut small = [0u32; 128];
            let mut big = Vec::new();
            let pool: &mut [u32] = if n <= small.len() {
                &mut small[..n]
            } else {
                big.extend(0..n as u32);
                &mut big
            };
            for (i, p) in pool.iter_mut().enumerate() {
                *p = i as u32;
            }
            for i in 0..k {
                let j = self.randbelow(n - i);
                out.push(population[pool[j] as usize].clone());
                pool[j] = pool[n - i - 1];
            }
        } else {
            let mut selected = std::collections::HashSet::with_capacity(k);
            for _ in 0..k {
                let mut j = self.randbelow(n);
                while selected.contains(&j) {
                    j = self.randbelow(n);
                }
                selected.insert(j);
                out.push(population[j].clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by CPython 3.11.7 (run here):
    /// `random.seed(s); [random.getrandbits(32) for _ in range(3)]`.
    #[test]
    fn raw_outputs_match_cpython() {
        for (seed, want) in [
            (0u64, [3_626_764_237u32, 1_654_615_998, 3_255_389_356]),
            (42, [2_746_317_213, 478_163_327, 107_420_369]),
            ((1 << 40) + 5, [2_166_296_868, 2_220_160_828, 1_153_647_273]),
        ] {
            let mut r = PyRandom::new(seed);
            assert_eq!(
                [r.next_u32(), r.next_u32(), r.next_u32()],
                want,
                "seed {seed}"
            );
        }
    }

    /// `random.seed(7); random.sample(range(30), 10); random.sample(range(100), 7);
    /// x = list(range(12)); random.shuffle(x)` in CPython 3.11.7 — covers both `sample`
    /// branches (pool and rejection) and `shuffle`.
    #[test]
    fn sample_and_shuffle_match_cpython() {
        let mut r = PyRandom::new(7);
        let a = r.sample(&(0..30).collect::<Vec<u32>>(), 10);
        assert_eq!(a, [10, 4, 12, 20, 1, 2, 17, 3, 11, 18]);
        let b = r.sample(&(0..100).collect::<Vec<u32>>(), 7);
        assert_eq!(b, [7, 64, 27, 4, 11, 55, 53]);
        let mut x: Vec<u32> = (0..12).collect();
        r.shuffle(&mut x);
        assert_eq!(x, [10, 5, 2, 9, 7, 4, 0, 6, 8, 11, 3, 1]);
    }

    /// `random.seed(5); random.random(); random.choice([10, 20, 30, 40, 50])` in CPython
    /// 3.11.7.
    #[test]
    fn random_and_choice_match_cpython() {
        let mut r = PyRandom::new(5);
        assert_eq!(r.random(), 0.6229016948897019);
        assert_eq!(r.choice(&[10, 20, 30, 40, 50]), Some(&30));
        assert_eq!(r.choice::<u8>(&[]), None);
    }
}
